package pay

import (
	"context"
	"time"
)

// backoff is the one retry schedule of internal/pay: every wait between
// two tries of the same thing (a claim read back, a duplicate waiting for
// its order, an outcome written again, and each entry of the Ledger)
// starts at first and doubles up to most. The waits themselves go through
// sleepCtx or the ledger's After, and deadlines are read from the injected
// clock (Options.Now and its kin), so tests can drive them.
type backoff struct {
	first, most, next time.Duration
}

// Backoff schedules of the pay flow.
var (
	// requestBackoff is for a request's own retries: short, the client waits.
	requestBackoff = backoff{first: 5 * time.Millisecond, most: 100 * time.Millisecond}
	// workBackoff is for background work on a slot or an order.
	workBackoff = backoff{first: 50 * time.Millisecond, most: 5 * time.Second}
)

// wait returns the next wait and moves the schedule on.
func (b *backoff) wait() time.Duration {
	if b.next == 0 {
		b.next = b.first
	}
	d := b.next
	b.next = min(2*b.next, b.most)
	return d
}

// reset starts the schedule again from first.
func (b *backoff) reset() { b.next = 0 }

// sleepCtx sleeps d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
