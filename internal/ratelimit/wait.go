package ratelimit

// This file is waiting for a slot: a request that carries a maximum wait
// (Request.MaxWait) and is refused waits until the refusing windows should
// have room (the decision's RetryAfter), then is checked again with the same
// exact check. It is admitted as soon as the check admits it, or refused once
// the next check could only come after its maximum wait.
//
// Waiters of one key on one instance go in arrival order: only the oldest
// waiter of a queue checks; the others wait for their turn. A key has one
// queue, and one for each merchant whose own limit (limits per merchant)
// refused a waiter: a merchant's refusal is that merchant's, never handed
// to another merchant's waiter, and another merchant's request may have
// room at once. A request joins its merchant's queue when it has waiters,
// else the key's when it has waiters, without a check of its own; else it
// checks at once and, refused, joins the queue of the scope that refused
// it. A waiter refused on its turn by the other scope (its merchant's
// limit in the key's queue, the key's windows in its merchant's queue)
// moves to the end of that scope's queue, keeping its deadline. The number
// of waiters per key, in all its queues, is bounded (Options.MaxWaiters);
// beyond the bound the answer is an immediate refusal. A waiter whose
// context ends (the client disconnected) stops waiting at once.

import (
	"context"
	"sync"
	"time"
)

// MaxWaitCap is the largest maximum wait a request may ask for (30 s).
const MaxWaitCap = 30 * time.Second

// DefaultMaxWaiters is the default bound on waiters per key per instance,
// in all its queues.
const DefaultMaxWaiters = 100

// WaitOutcome says how a wait ended.
type WaitOutcome string

// The outcomes of a wait. A request admitted or refused by its first check
// did not wait and has no outcome.
const (
	// WaitAdmitted: the limiter admitted the request after it waited.
	WaitAdmitted WaitOutcome = "admitted"
	// WaitTimedOut: the windows would not have room within the maximum
	// wait.
	WaitTimedOut WaitOutcome = "timed_out"
	// WaitQueueFull: the key already had MaxWaiters waiters; refused at
	// once.
	WaitQueueFull WaitOutcome = "queue_full"
	// WaitCancelled: the request's context ended (the client left).
	WaitCancelled WaitOutcome = "cancelled"
	// WaitFailed: the limiter answered an error while the request waited.
	WaitFailed WaitOutcome = "failed"
)

// WaitObserver is told how each wait ended and how long it lasted. It is
// called on the request path and must not block.
type WaitObserver interface {
	Waited(key Key, outcome WaitOutcome, waited time.Duration)
}

// waitOptions tunes a waiter; Limiter.New fills them from its Options.
type waitOptions struct {
	maxWaiters int
	observer   WaitObserver
	now        func() time.Time
}

// waiter makes check wait for room. It is safe for concurrent use.
type waiter struct {
	check  func(context.Context, Request) (Decision, error)
	opts   waitOptions
	mu     sync.Mutex
	queues map[queueID]*waitQueue
	// perKey counts the waiters of each key, in all its queues: the bound
	// (waitOptions.maxWaiters) is per key.
	perKey map[Key]int
}

// queueID names a queue: a key's, or one merchant's of a key (merchant
// set: the requests its own limit refused).
type queueID struct {
	key      Key
	merchant string
}

// waitQueue is the waiters of one key, oldest first. Fields are guarded by
// waiter.mu.
type waitQueue struct {
	waiters []*waitTicket
	// nextTry is when a check may next find room: the last refusal's time
	// plus its RetryAfter, or the time of the last admission.
	nextTry time.Time
	// last is the last refusal, answered (with RetryAfter until nextTry)
	// to requests refused without a check of their own.
	last Decision
}

// waitTicket is one waiter; turn is closed when it becomes the oldest.
type waitTicket struct{ turn chan struct{} }

// newWaiter returns a waiter over check, which decides one request at once.
func newWaiter(check func(context.Context, Request) (Decision, error), opts waitOptions) *waiter {
	return &waiter{check: check, opts: opts, queues: map[queueID]*waitQueue{}, perKey: map[Key]int{}}
}

// waiting returns how many requests wait for key now, its merchants'
// queues included.
func (w *waiter) waiting(key Key) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.perKey[key]
}

// total returns how many requests wait now, over every key.
func (w *waiter) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.queues {
		n += len(q.waiters)
	}
	return n
}

// run checks a request. Without a maximum wait (r.MaxWait, cut to
// MaxWaitCap) it is one check. With one, a refused request waits its turn
// and is checked again when the windows should have room, until it is
// admitted or the next check could only come after the maximum wait; then
// the answer is the last refusal, its RetryAfter the time until the windows
// should have room. It never waits past the maximum. The error is the
// check's, or ctx's when ctx ends while waiting.
func (w *waiter) run(ctx context.Context, r Request) (Decision, error) {
	key := r.Key
	maxWait := min(r.MaxWait, MaxWaitCap)
	if maxWait <= 0 {
		return w.check(ctx, r)
	}
	start := w.opts.now()
	deadline := start.Add(maxWait)

	// A request joins, without a check of its own, its merchant's queue
	// when it has waiters (they wait for that merchant's use to fall, and
	// go first), else the key's when it has waiters.
	id := queueID{key: key, merchant: requestMerchant(r.Merchant)}
	w.mu.Lock()
	q := w.queues[id]
	if q == nil || len(q.waiters) == 0 {
		id.merchant = ""
		q = w.queues[id]
	}
	if q == nil || len(q.waiters) == 0 {
		// Nobody waits: check at once, as without a maximum wait.
		w.mu.Unlock()
		d, err := w.check(ctx, r)
		if err != nil || d.Allowed || d.Closed() || d.Amount || d.Conflict || d.ExceedsCap || d.Unknown {
			// A closed key (limit 0) has no reopening time: no wait. Nor
			// does an amount refusal queue: it is this request's own (a
			// smaller amount may fit now, a larger one never), not the
			// key's, so it is never handed to another request.
			return d, err
		}
		// A refusal by the merchant's own limit waits in that merchant's
		// queue, any other in the key's.
		id.merchant = d.Merchant
		w.mu.Lock()
		q = w.queue(id)
		q.refused(d, w.opts.now())
	}
	for {
		now := w.opts.now()
		if w.perKey[key] >= w.opts.maxWaiters {
			d := q.refusal(now)
			w.drop(id, q)
			w.mu.Unlock()
			w.observe(key, WaitQueueFull, start)
			return d, nil
		}
		if q.nextTry.After(deadline) {
			// The windows have no room before the deadline: refuse now
			// rather than wait for a refusal.
			d := q.refusal(now)
			w.drop(id, q)
			w.mu.Unlock()
			w.observe(key, WaitTimedOut, start)
			return d, nil
		}
		t := &waitTicket{turn: make(chan struct{})}
		q.waiters = append(q.waiters, t)
		w.perKey[key]++
		if len(q.waiters) == 1 {
			close(t.turn)
		}
		w.mu.Unlock()

		d, outcome, err := w.waitIn(ctx, r, id, q, t, deadline)
		if outcome != waitMove {
			w.observe(key, outcome, start)
			return d, err
		}
		// Refused on its turn by the other scope: by its merchant's own
		// limit in the key's queue, or by the key's windows in its
		// merchant's queue. It waits on in that scope's queue, at its end.
		id.merchant = d.Merchant
		w.mu.Lock()
		q = w.queue(id)
		q.refused(d, w.opts.now())
	}
}

// waitIn is wait for t in q, the queue id names, taking t out of q however
// the wait ends (a check that panics included, so that the queue's turn is
// always handed on).
func (w *waiter) waitIn(ctx context.Context, r Request, id queueID, q *waitQueue, t *waitTicket, deadline time.Time) (Decision, WaitOutcome, error) {
	defer w.leave(id, q, t)
	return w.wait(ctx, r, q, t, deadline, id.merchant)
}

// waitMove is wait's outcome for a waiter refused by the other scope than
// its queue's: by its merchant's own limit in the key's queue, or by the
// key's windows in its merchant's queue. run moves it to that queue.
const waitMove WaitOutcome = "moved"

// wait runs one waiter of the queue of merchant ("" the key's) until it
// is admitted, times out, or ctx ends, or a refusal names another scope
// than its queue's (waitMove).
func (w *waiter) wait(ctx context.Context, r Request, q *waitQueue, t *waitTicket, deadline time.Time, merchant string) (Decision, WaitOutcome, error) {
	key := r.Key
	timer := time.NewTimer(deadline.Sub(w.opts.now()))
	defer timer.Stop()
	select {
	case <-t.turn:
	case <-ctx.Done():
		return Decision{Key: key}, WaitCancelled, ctx.Err()
	case <-timer.C:
		return w.timedOut(q), WaitTimedOut, nil
	}
	for {
		w.mu.Lock()
		next := q.nextTry
		w.mu.Unlock()
		// A try at the deadline or later would start past the maximum
		// wait (the turn and the deadline can fire together).
		if !next.Before(deadline) {
			return w.timedOut(q), WaitTimedOut, nil
		}
		if pause := next.Sub(w.opts.now()); pause > 0 {
			timer.Reset(pause)
			select {
			case <-ctx.Done():
				return Decision{Key: key}, WaitCancelled, ctx.Err()
			case <-timer.C:
			}
		}
		if !w.opts.now().Before(deadline) {
			return w.timedOut(q), WaitTimedOut, nil
		}
		d, err := w.check(ctx, r)
		switch {
		case err != nil && ctx.Err() != nil:
			return d, WaitCancelled, err
		case err != nil:
			return d, WaitFailed, err
		}
		if !d.Allowed && d.Unknown {
			// This request's own lost answer (it may hold a slot): its
			// caller settles it; never the queue's refusal to hand on.
			return d, WaitFailed, nil
		}
		if d.Closed() || (!d.Allowed && (d.Amount || d.Conflict || d.ExceedsCap)) {
			// The key was closed while this request waited, or its own
			// amount does not fit (not the queue's refusal to keep).
			return d, WaitTimedOut, nil
		}
		if !d.Allowed && d.Merchant != merchant {
			// Refused by the other scope: a merchant's refusal is never
			// the key's queue's to hand on, nor the key's windows' a
			// merchant queue's to wait out beside the key's own waiters.
			return d, waitMove, nil
		}
		now := w.opts.now()
		w.mu.Lock()
		if d.Allowed {
			// Room may be left for the next waiter: it checks at once.
			q.nextTry = now
			w.mu.Unlock()
			return d, WaitAdmitted, nil
		}
		q.refused(d, now)
		w.mu.Unlock()
	}
}

func (w *waiter) timedOut(q *waitQueue) Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	return q.refusal(w.opts.now())
}

// queue returns the queue id names, creating it. w.mu must be held.
func (w *waiter) queue(id queueID) *waitQueue {
	q := w.queues[id]
	if q == nil {
		q = &waitQueue{}
		w.queues[id] = q
	}
	return q
}

// leave takes t out of q and, if t was the oldest, hands the turn on.
func (w *waiter) leave(id queueID, q *waitQueue, t *waitTicket) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range q.waiters {
		if x != t {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if w.perKey[id.key]--; w.perKey[id.key] <= 0 {
			delete(w.perKey, id.key)
		}
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
	w.drop(id, q)
}

// drop forgets q, the queue id names, once nobody waits in it: a queue of
// each merchant a client names must not outlive its waiters. w.mu must be
// held.
func (w *waiter) drop(id queueID, q *waitQueue) {
	if len(q.waiters) == 0 && w.queues[id] == q {
		delete(w.queues, id)
	}
}

func (w *waiter) observe(key Key, o WaitOutcome, start time.Time) {
	if w.opts.observer != nil {
		w.opts.observer.Waited(key, o, w.opts.now().Sub(start))
	}
}

// minPause keeps a refusal with no RetryAfter from spinning.
const minPause = time.Millisecond

// refused records a refusal decided at now.
func (q *waitQueue) refused(d Decision, now time.Time) {
	q.last = d
	q.nextTry = now.Add(max(d.RetryAfter, minPause))
}

// refusal is the last refusal, its RetryAfter counted from now. It is
// another request's decision: it names no slot of this one's (Hold) and no
// lost answer (Unknown).
func (q *waitQueue) refusal(now time.Time) Decision {
	d := q.last
	d.Allowed, d.Unknown, d.Hold = false, false, Hold{}
	d.RetryAfter = max(q.nextTry.Sub(now), minPause)
	return d
}
