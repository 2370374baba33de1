package pay

import (
	"encoding/json"
	"os"

	"payserver/internal/ratelimit"
)

// An admission in flight is a payment between its limiter check and its
// claim: the limiter may hold its slot, and neither an order nor an entry
// owns it yet. The live request owns it, so the ledger does not take it;
// but a process killed then would leave the slot held by nobody until its
// window passed (the chaos campaign, seed 20261133: a day window). So from
// before the check until the claim is committed (the order owns the slot)
// or the request knows its answer (a refusal took nothing; a lost answer,
// a failed or lost claim are owned as before), a file in Dir keeps the
// payment as a claim to close, with a slot of unknown windows on each key
// it may be checked on. The next run takes a file left behind as any
// other entry (recover): after Grace from the check, the requestId is
// closed NOT_SENT unless an order holds it, and each slot then meets its
// fate against that order.
//
// The file's payment has an OrderNo of its own, never the claim's: a file
// left behind after the claim committed (a kill right after it, or a
// removal that failed) therefore never ends the claim NOT_SENT; its slots
// follow the claim's fate as a duplicate's would (watched while it is
// PROCESSING, kept or released once it ends).
//
// The file is written and removed without fsync, on the request path: it
// survives a kill of the process, not a crash of the machine.

// inFlight keeps o's payment, checked on keys, on disk until done is
// called; done is idempotent. Memory only (no Dir), it keeps nothing.
func (l *Ledger) inFlight(o *Order, keys ...ratelimit.Key) (done func()) {
	if l.opts.Dir == "" || len(keys) == 0 {
		return func() {}
	}
	p := paymentOf(o)
	p.OrderNo = newOrderNo(l.opts.Now().UTC())
	if p.Channel == "" {
		p.Channel = keys[0].Channel
	}
	j := journaledEntry{Version: journalVersion, Phase: phaseClose.String(), AtUs: l.opts.Now().UnixMicro(),
		Order: journalOrder(p), Why: notSentKilled}
	for _, k := range keys {
		j.Holds = append(j.Holds, journalHold(ratelimit.HoldOf(k, o.RequestID)))
	}
	path := l.path("inflight-" + newEntryID())
	data, err := json.Marshal(j)
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		l.opts.Logger.Warn("an admission in flight could not be kept on disk; a kill before its claim leaves its slot to its window",
			"requestId", o.RequestID, "err", err)
		return func() {}
	}
	removed := false
	return func() {
		if removed {
			return
		}
		removed = true
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			l.opts.Logger.Warn("an admission in flight's file could not be removed; the next run settles its slots against the order",
				"requestId", o.RequestID, "err", err)
		}
	}
}

// notSentKilled is the failure message of a payment closed by the next run
// after its process was killed between its limiter check and its claim.
const notSentKilled = "the payment's process stopped after the limiter admitted it and before its order was written, and it was not retried in time; it was closed without being sent, and nothing was charged"
