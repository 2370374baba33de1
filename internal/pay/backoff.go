package pay

import (
	"time"

	"payserver/internal/retry"
)

// The retry schedules of the pay flow (retry.Schedule): every wait between
// two tries of the same thing (a claim read back, a duplicate waiting for
// its order, an outcome written again, and each entry of the Ledger). The
// waits go through retry.Sleep or the ledger's After, and deadlines are
// read from the injected clock (Options.Now and its kin), so tests can
// drive them.
var (
	// requestBackoff is for a request's own retries: short, the client waits.
	requestBackoff = retry.Schedule{First: 5 * time.Millisecond, Most: 100 * time.Millisecond}
	// workBackoff is for background work on a slot or an order.
	workBackoff = retry.Schedule{First: 50 * time.Millisecond, Most: 5 * time.Second}
)
