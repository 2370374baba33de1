package ratelimit

// This file is waiting for a slot: a request that carries a maximum wait
// (Request.MaxWait) and is refused waits until the refusing windows should
// have room (the decision's RetryAfter), then is checked again with the same
// exact check. It is admitted as soon as the check admits it, or refused once
// the next check could only come after its maximum wait.
//
// Waiters of one key on one instance go in arrival order: only the oldest
// waiter of a key checks; the others wait for their turn. A request refused
// by its merchant's own limit (limits per merchant) waits in that
// merchant's queue of the key instead, in the same way: its refusal is that
// merchant's, never handed to another merchant's waiter, and another
// merchant's request may have room now. A waiter of the key's queue
// refused by its merchant's limit on its turn moves to its merchant's
// queue, keeping its deadline. The number of waiters per queue is bounded
// (Options.MaxWaiters); beyond the bound the answer is an immediate
// refusal. A waiter whose context ends (the client disconnected) stops
// waiting at once.

import (
	"context"
	"sync"
	"time"
)

// MaxWaitCap is the largest maximum wait a request may ask for (30 s).
const MaxWaitCap = 30 * time.Second

// DefaultMaxWaiters is the default bound on waiters per key per instance.
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
	return &waiter{check: check, opts: opts, queues: map[queueID]*waitQueue{}}
}

// waiting returns how many requests wait for key now, its merchants'
// queues included.
func (w *waiter) waiting(key Key) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for id, q := range w.queues {
		if id.key == key {
			n += len(q.waiters)
		}
	}
	return n
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

	id := queueID{key: key}
	w.mu.Lock()
	q := w.queues[id]
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
		// queue.
		id.merchant = d.Merchant
		w.mu.Lock()
		q = w.queue(id)
		q.refused(d, w.opts.now())
	}
	for {
		now := w.opts.now()
		if len(q.waiters) >= w.opts.maxWaiters {
			d := q.refusal(now)
			w.mu.Unlock()
			w.observe(key, WaitQueueFull, start)
			return d, nil
		}
		if q.nextTry.After(deadline) {
			// The windows have no room before the deadline: refuse now
			// rather than wait for a refusal.
			d := q.refusal(now)
			w.mu.Unlock()
			w.observe(key, WaitTimedOut, start)
			return d, nil
		}
		t := &waitTicket{turn: make(chan struct{})}
		q.waiters = append(q.waiters, t)
		if len(q.waiters) == 1 {
			close(t.turn)
		}
		w.mu.Unlock()

		d, outcome, err := w.wait(ctx, r, q, t, deadline, id.merchant == "")
		w.leave(id, q, t)
		if outcome != waitMove {
			w.observe(key, outcome, start)
			return d, err
		}
		// Refused on its turn in the key's queue by its merchant's own
		// limit: it waits on in that merchant's queue.
		id.merchant = d.Merchant
		w.mu.Lock()
		q = w.queue(id)
		q.refused(d, w.opts.now())
	}
}

// waitMove is wait's outcome for a waiter of a key's queue that its
// merchant's own limit refused: run moves it to that merchant's queue.
const waitMove WaitOutcome = "moved"

// wait runs one waiter until it is admitted, times out, or ctx ends; in a
// key's queue (keyQueue), a refusal by the request's merchant's own limit
// ends it with waitMove.
func (w *waiter) wait(ctx context.Context, r Request, q *waitQueue, t *waitTicket, deadline time.Time, keyQueue bool) (Decision, WaitOutcome, error) {
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
		if !d.Allowed && d.Merchant != "" && keyQueue {
			// Its merchant's own use does not fit: that merchant's
			// refusal, never the key's queue's to hand on.
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
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
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
