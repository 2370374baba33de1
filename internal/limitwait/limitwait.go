// Package limitwait turns a refusal of the channel limiter into a bounded
// wait: a request that carries a maximum wait (Request.MaxWait) and is refused
// waits until the refusing windows should have room (the decision's
// RetryAfter), then asks the limiter again with the same exact check. It is
// admitted as soon as the limiter admits it, or refused once the next
// check could only come after its maximum wait.
//
// Waiters of one key on one instance go in arrival order: only the oldest
// waiter of a key checks; the others wait for their turn. Their number per
// key is bounded (Options.MaxWaiters); beyond the bound the answer is an
// immediate refusal. A waiter whose context ends (the client disconnected)
// stops waiting at once.
//
// A Waiter has the shape of the limiter it wraps (Allow and Release), so it
// serves the payment flow and the /v1/limits routes alike; a request
// without a maximum wait goes straight to the wrapped limiter.
package limitwait

import (
	"context"
	"errors"
	"sync"
	"time"

	"payserver/internal/ratelimit"
)

// MaxWaitCap is the largest maximum wait a request may ask for (30 s).
const MaxWaitCap = 30 * time.Second

// DefaultMaxWaiters is the default bound on waiters per key per instance.
const DefaultMaxWaiters = 100

// Limiter is the limiter a Waiter wraps. *ratelimit.Limiter implements it.
type Limiter interface {
	Check(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error)
	Release(ctx context.Context, h ratelimit.Hold) error
	ReleaseAmount(ctx context.Context, h ratelimit.Hold) error
	Throttled(ctx context.Context, h ratelimit.Hold, retryAfter time.Duration) error
}

// Outcome says how a wait ended.
type Outcome string

// The outcomes of a wait. A request admitted or refused by its first check
// did not wait and has no outcome.
const (
	// Admitted: the limiter admitted the request after it waited.
	Admitted Outcome = "admitted"
	// TimedOut: the windows would not have room within the maximum wait.
	TimedOut Outcome = "timed_out"
	// QueueFull: the key already had MaxWaiters waiters; refused at once.
	QueueFull Outcome = "queue_full"
	// Cancelled: the request's context ended (the client left).
	Cancelled Outcome = "cancelled"
	// Failed: the limiter answered an error while the request waited.
	Failed Outcome = "failed"
)

// Observer is told how each wait ended and how long it lasted. It is called
// on the request path and must not block.
type Observer interface {
	Waited(key ratelimit.Key, outcome Outcome, waited time.Duration)
}

// Options tunes a Waiter. Zero values select the documented defaults.
type Options struct {
	// MaxWaiters bounds the requests waiting for one key on this instance.
	// Default DefaultMaxWaiters.
	MaxWaiters int
	// Observer receives every wait's outcome; nil means none.
	Observer Observer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Waiter wraps a Limiter with waiting. It is safe for concurrent use.
type Waiter struct {
	inner  Limiter
	opts   Options
	mu     sync.Mutex
	queues map[ratelimit.Key]*queue
}

// queue is the waiters of one key, oldest first. Fields are guarded by
// Waiter.mu.
type queue struct {
	waiters []*ticket
	// nextTry is when a check may next find room: the last refusal's time
	// plus its RetryAfter, or the time of the last admission.
	nextTry time.Time
	// last is the last refusal, answered (with RetryAfter until nextTry)
	// to requests refused without a check of their own.
	last ratelimit.Decision
}

// ticket is one waiter; turn is closed when it becomes the oldest.
type ticket struct{ turn chan struct{} }

// New returns a Waiter over inner.
func New(inner Limiter, opts Options) (*Waiter, error) {
	if inner == nil {
		return nil, errors.New("limitwait: nil limiter")
	}
	if opts.MaxWaiters < 0 {
		return nil, errors.New("limitwait: negative MaxWaiters")
	}
	if opts.MaxWaiters == 0 {
		opts.MaxWaiters = DefaultMaxWaiters
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Waiter{inner: inner, opts: opts, queues: map[ratelimit.Key]*queue{}}, nil
}

// Release passes through to the wrapped limiter.
func (w *Waiter) Release(ctx context.Context, h ratelimit.Hold) error {
	return w.inner.Release(ctx, h)
}

// Throttled passes through to the wrapped limiter.
func (w *Waiter) Throttled(ctx context.Context, h ratelimit.Hold, retryAfter time.Duration) error {
	return w.inner.Throttled(ctx, h, retryAfter)
}

// ReleaseAmount passes through to the wrapped limiter.
func (w *Waiter) ReleaseAmount(ctx context.Context, h ratelimit.Hold) error {
	return w.inner.ReleaseAmount(ctx, h)
}

// Allow is Check for a request without an amount.
func (w *Waiter) Allow(ctx context.Context, key ratelimit.Key, member string) (ratelimit.Decision, error) {
	return w.Check(ctx, ratelimit.Request{Key: key, Member: member})
}

// Waiting returns how many requests wait for key now.
func (w *Waiter) Waiting(key ratelimit.Key) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// Total returns how many requests wait now, over every key.
func (w *Waiter) Total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.queues {
		n += len(q.waiters)
	}
	return n
}

// Check checks a request. Without a maximum wait (r.MaxWait, cut to
// MaxWaitCap) it is the wrapped limiter's Check. With one, a refused
// request waits its turn and is checked again when the windows should have
// room, until it is admitted or the next check could only come after the
// maximum wait; then the answer is the last refusal, its RetryAfter the
// time until the windows should have room. It never waits past the
// maximum. The error is the wrapped limiter's, or ctx's when ctx ends
// while waiting.
func (w *Waiter) Check(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	key := r.Key
	maxWait := min(r.MaxWait, MaxWaitCap)
	if maxWait <= 0 {
		return w.inner.Check(ctx, r)
	}
	start := w.opts.Now()
	deadline := start.Add(maxWait)

	w.mu.Lock()
	q := w.queues[key]
	if q == nil || len(q.waiters) == 0 {
		// Nobody waits: check at once, as without a maximum wait.
		w.mu.Unlock()
		d, err := w.inner.Check(ctx, r)
		if err != nil || d.Allowed || d.Closed() || d.Amount || d.Conflict || d.ExceedsCap || d.Unknown {
			// A closed key (limit 0) has no reopening time: no wait. Nor
			// does an amount refusal queue: it is this request's own (a
			// smaller amount may fit now, a larger one never), not the
			// key's, so it is never handed to another request.
			return d, err
		}
		w.mu.Lock()
		q = w.queue(key)
		q.refused(d, w.opts.Now())
	}
	now := w.opts.Now()
	if len(q.waiters) >= w.opts.MaxWaiters {
		d := q.refusal(now)
		w.mu.Unlock()
		w.observe(key, QueueFull, start)
		return d, nil
	}
	if q.nextTry.After(deadline) {
		// The windows have no room before the deadline: refuse now
		// rather than wait for a refusal.
		d := q.refusal(now)
		w.mu.Unlock()
		w.observe(key, TimedOut, start)
		return d, nil
	}
	t := &ticket{turn: make(chan struct{})}
	q.waiters = append(q.waiters, t)
	if len(q.waiters) == 1 {
		close(t.turn)
	}
	w.mu.Unlock()
	defer w.leave(key, q, t)

	d, outcome, err := w.wait(ctx, r, q, t, deadline)
	w.observe(key, outcome, start)
	return d, err
}

// wait runs one waiter until it is admitted, times out, or ctx ends.
func (w *Waiter) wait(ctx context.Context, r ratelimit.Request, q *queue, t *ticket, deadline time.Time) (ratelimit.Decision, Outcome, error) {
	key := r.Key
	timer := time.NewTimer(deadline.Sub(w.opts.Now()))
	defer timer.Stop()
	select {
	case <-t.turn:
	case <-ctx.Done():
		return ratelimit.Decision{Key: key}, Cancelled, ctx.Err()
	case <-timer.C:
		return w.timedOut(q), TimedOut, nil
	}
	for {
		w.mu.Lock()
		next := q.nextTry
		w.mu.Unlock()
		// A try at the deadline or later would start past the maximum
		// wait (the turn and the deadline can fire together).
		if !next.Before(deadline) {
			return w.timedOut(q), TimedOut, nil
		}
		if pause := next.Sub(w.opts.Now()); pause > 0 {
			timer.Reset(pause)
			select {
			case <-ctx.Done():
				return ratelimit.Decision{Key: key}, Cancelled, ctx.Err()
			case <-timer.C:
			}
		}
		if !w.opts.Now().Before(deadline) {
			return w.timedOut(q), TimedOut, nil
		}
		d, err := w.inner.Check(ctx, r)
		switch {
		case err != nil && ctx.Err() != nil:
			return d, Cancelled, err
		case err != nil:
			return d, Failed, err
		}
		if !d.Allowed && d.Unknown {
			// This request's own lost answer (it may hold a slot): its
			// caller settles it; never the queue's refusal to hand on.
			return d, Failed, nil
		}
		if d.Closed() || (!d.Allowed && (d.Amount || d.Conflict || d.ExceedsCap)) {
			// The key was closed while this request waited, or its own
			// amount does not fit (not the queue's refusal to keep).
			return d, TimedOut, nil
		}
		now := w.opts.Now()
		w.mu.Lock()
		if d.Allowed {
			// Room may be left for the next waiter: it checks at once.
			q.nextTry = now
			w.mu.Unlock()
			return d, Admitted, nil
		}
		q.refused(d, now)
		w.mu.Unlock()
	}
}

func (w *Waiter) timedOut(q *queue) ratelimit.Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	return q.refusal(w.opts.Now())
}

// queue returns key's queue, creating it. w.mu must be held.
func (w *Waiter) queue(key ratelimit.Key) *queue {
	q := w.queues[key]
	if q == nil {
		q = &queue{}
		w.queues[key] = q
	}
	return q
}

// leave takes t out of q and, if t was the oldest, hands the turn on.
func (w *Waiter) leave(key ratelimit.Key, q *queue, t *ticket) {
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
	if len(q.waiters) == 0 && w.queues[key] == q {
		delete(w.queues, key)
	}
}

func (w *Waiter) observe(key ratelimit.Key, o Outcome, start time.Time) {
	if w.opts.Observer != nil {
		w.opts.Observer.Waited(key, o, w.opts.Now().Sub(start))
	}
}

// minPause keeps a refusal with no RetryAfter from spinning.
const minPause = time.Millisecond

// refused records a refusal decided at now.
func (q *queue) refused(d ratelimit.Decision, now time.Time) {
	q.last = d
	q.nextTry = now.Add(max(d.RetryAfter, minPause))
}

// refusal is the last refusal, its RetryAfter counted from now. It is
// another request's decision: it names no slot of this one's (Hold) and no
// lost answer (Unknown).
func (q *queue) refusal(now time.Time) ratelimit.Decision {
	d := q.last
	d.Allowed, d.Unknown, d.Hold = false, false, ratelimit.Hold{}
	d.RetryAfter = max(q.nextTry.Sub(now), minPause)
	return d
}
