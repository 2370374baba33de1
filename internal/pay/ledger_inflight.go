package pay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"payserver/internal/ratelimit"
)

// An admission in flight is a payment between its limiter check and its
// claim: the limiter may hold its slot, and neither an order nor an entry
// owns it yet. The live request owns it, so the ledger does not take it;
// but a process killed then would leave the slot held by nobody until its
// window passed (a day window: until the next day). So from the moment
// the limiter can hold its slot (ratelimit.Request.Holding: not for a
// refusal from the near-cache) until the claim is committed (the order owns the slot)
// or the request knows its answer (a refusal took nothing; a lost answer,
// a failed or lost claim are owned as before), a line in Dir's log keeps the
// payment as a claim to close, with a slot of unknown windows on each key
// it may be checked on. The next run takes a payment left in flight as
// any other entry (recoverInFlight): after Grace from the check, the requestId is
// closed NOT_SENT unless an order holds it, and each slot then meets its
// fate against that order.
//
// The logged payment has an OrderNo of its own, never the claim's: one
// left in flight after the claim committed (a kill right after it, or an
// end that could not be logged) therefore never ends the claim NOT_SENT; its slots
// follow the claim's fate as a duplicate's would (watched while it is
// PROCESSING, kept or released once it ends).
//
// The admissions in flight are lines appended to one file in Dir,
// inflight.log: "+ID JSON" before the limiter can hold a slot, "-ID" once the claim or the
// answer is known. An append costs a few microseconds, where a file per
// payment (write, rename, remove) cost about 80 µs here. The log is not
// synced: it survives a kill of the process, not a crash of the machine.
// Past inflightRotate bytes it is rewritten with only the lines of the
// admissions still in flight. The next run reads what is left in flight,
// keeps each as an entry of its own (synced, as every entry), and removes
// the log.

// inflightName is the log's name in Dir.
const inflightName = "inflight.log"

// inflightRotate is the size past which the log is rewritten.
const inflightRotate = 4 << 20

// inflightLog is the log of admissions in flight.
type inflightLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	size int64
	live map[string][]byte // the "+" line of each admission in flight
}

// add appends id's line before the limiter can hold its payment's slot.
func (g *inflightLog) add(id string, data []byte) error {
	line := make([]byte, 0, len(id)+len(data)+3)
	line = append(append(append(append(line, '+'), id...), ' '), data...)
	line = append(line, '\n')
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f == nil {
		f, err := os.OpenFile(g.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		g.f = f
	}
	if _, err := g.f.Write(line); err != nil {
		return err
	}
	g.size += int64(len(line))
	g.live[id] = line
	return nil
}

// remove appends id's end, and rewrites the log once it is past
// inflightRotate.
func (g *inflightLog) remove(id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.live[id]; !ok || g.f == nil {
		return nil
	}
	delete(g.live, id)
	n, err := g.f.Write([]byte("-" + id + "\n"))
	g.size += int64(n)
	if err != nil {
		return err
	}
	if g.size > inflightRotate {
		return g.rotate()
	}
	return nil
}

// rotate rewrites the log with the lines of the admissions still in
// flight, and appends to it from then on; g.mu is held.
func (g *inflightLog) rotate() error {
	next := g.path + ".next"
	f, err := os.OpenFile(next, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	var size int64
	for _, line := range g.live {
		n, err := f.Write(line)
		size += int64(n)
		if err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := os.Rename(next, g.path); err != nil {
		_ = f.Close()
		return err
	}
	_ = g.f.Close()
	g.f, g.size = f, size
	return nil
}

// recoverInFlight keeps, as entries of their own, the admissions an
// earlier run left in flight in its log, then removes the log. An entry
// that cannot be kept is an error: starting without it would leave its
// slots held by nobody.
func (l *Ledger) recoverInFlight() error {
	path := filepath.Join(l.opts.Dir, inflightName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pay: the ledger's admissions in flight %s cannot be read: %w", path, err)
	}
	left := map[string][]byte{}
	var order []string
	for _, line := range bytes.Split(data, []byte("\n")) {
		switch {
		case len(line) > 1 && line[0] == '+':
			id, body, ok := bytes.Cut(line[1:], []byte(" "))
			if ok {
				left[string(id)] = body
				order = append(order, string(id))
			}
		case len(line) > 1 && line[0] == '-':
			delete(left, string(line[1:]))
		}
	}
	n := 0
	for _, id := range order {
		body, ok := left[id]
		if !ok {
			continue
		}
		delete(left, id)
		e, err := entryOf(body)
		if err != nil {
			// A line cut short by the kill: its check was never made.
			l.opts.Logger.Warn("an admission in flight left by an earlier run is unreadable; skipped", "err", err)
			continue
		}
		e.id = "inflight-" + id
		l.mu.Lock()
		l.journal(e)
		l.mu.Unlock()
		if e.unwritten {
			return fmt.Errorf("pay: an admission in flight could not be kept in the ledger %s", l.opts.Dir)
		}
		l.restore(e)
		n++
	}
	if n > 0 {
		l.opts.Logger.Info("admissions an earlier run left in flight are settled", "count", n)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("pay: the ledger's admissions in flight %s cannot be removed: %w", path, err)
	}
	return nil
}

// inFlight returns hold, which keeps the payment order returns, checked on
// keys, in the log (once, however often it is called; order is called only
// then), and done, which ends it: both idempotent, and a hold after done
// keeps nothing. The pay flow calls hold right before the limiter can hold
// a slot for the payment (ratelimit.Request.Holding), so a refusal from
// the near-cache writes and builds nothing, and done once the order or the
// ledger owns the slot. Memory only (no Dir), it keeps nothing.
func (l *Ledger) inFlight(order func() *Order, keys ...ratelimit.Key) (hold, done func()) {
	if l.opts.Dir == "" || len(keys) == 0 {
		return func() {}, func() {}
	}
	var id, requestID string
	kept, ended := false, false
	hold = func() {
		if kept || ended {
			return
		}
		kept = true
		o := order()
		requestID = o.RequestID
		p := paymentOf(o)
		p.OrderNo = newOrderNo(l.opts.Now().UTC())
		if p.Channel == "" {
			p.Channel = keys[0].Channel
		}
		j := journaledEntry{Version: journalVersion, Phase: phaseClose.String(), AtUs: l.opts.Now().UnixMicro(),
			Order: journalOrder(p), Why: notSentKilled}
		for _, k := range keys {
			j.Holds = append(j.Holds, journalHold(ratelimit.HoldOf(k, o.RequestID).OfMerchant(o.MerchantID)))
		}
		data, err := json.Marshal(j)
		if err == nil {
			id = newEntryID()
			if err = l.flight.add(id, data); err != nil {
				id = ""
			}
		}
		if err != nil {
			l.opts.Logger.Warn("an admission in flight could not be kept on disk; a kill before its claim leaves its slot to its window",
				"requestId", o.RequestID, "err", err)
		}
	}
	done = func() {
		if ended {
			return
		}
		ended = true
		if id == "" {
			return
		}
		if err := l.flight.remove(id); err != nil {
			l.opts.Logger.Warn("the end of an admission in flight could not be logged; the next run settles its slots against the order",
				"requestId", requestID, "err", err)
		}
	}
	return hold, done
}

// notSentKilled is the failure message of a payment closed by the next run
// after its process was killed between its limiter check and its claim.
const notSentKilled = "the payment's process stopped after the limiter admitted it and before its order was written, and it was not retried in time; it was closed without being sent, and nothing was charged"
