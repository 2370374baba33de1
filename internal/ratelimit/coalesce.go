package ratelimit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// defaultMaxBatch bounds one coalesced call when RedisStoreOptions.MaxBatch
// is zero.
const defaultMaxBatch = 128

// noDeadline bounds a coalesced call none of whose callers set a deadline.
const noDeadline = 5 * time.Second

// coalescer groups the concurrent checks of one key into single script
// calls. The check that finds its key idle is sent at once, by its own
// goroutine and under its own context, exactly as without coalescing, so an
// uncontended check costs nothing extra. Checks of that key arriving while a
// call is in flight queue; when the call returns, one sender goroutine sends
// the queue as one call, and again for what queued meanwhile, until the
// queue is empty. A key's calls never overlap, so arrival order is decision
// order, except that checks whose windows differ from the batch's (limits
// changed meanwhile) wait for a later call. Exactness never depends on the
// order: each call is one atomic script.
type coalescer struct {
	s   *RedisStore
	max int

	// calls and checks count the script calls sent and the checks they
	// decided (CoalesceStats).
	calls, checks atomic.Uint64

	mu sync.Mutex
	// queues holds one entry per key that has been checked. Only keys
	// with limits reach the store, so this is bounded by the limits
	// document.
	queues map[Key]*checkQueue
}

type checkQueue struct {
	pending []*pendingCheck
	busy    bool // a call for this key is in flight
}

type pendingCheck struct {
	ctx     context.Context
	windows []Window
	member  string
	done    chan struct{}
	res     StoreResult
	err     error
}

func newCoalescer(s *RedisStore, maxBatch int) *coalescer {
	if maxBatch <= 0 {
		maxBatch = defaultMaxBatch
	}
	return &coalescer{s: s, max: maxBatch, queues: map[Key]*checkQueue{}}
}

// check decides one check: at once if its key is idle, else with the next
// batch of the key. A queued caller that leaves on ctx may still be decided
// (and, if admitted, recorded) by a call already on its way, as with a plain
// client whose reply came too late.
func (c *coalescer) check(ctx context.Context, k Key, windows []Window, member string) (StoreResult, error) {
	c.mu.Lock()
	q := c.queues[k]
	if q == nil {
		q = &checkQueue{}
		c.queues[k] = q
	}
	if !q.busy {
		q.busy = true
		c.mu.Unlock()
		res, err := c.s.checkOne(ctx, k, windows, member)
		c.calls.Add(1)
		c.checks.Add(1)
		c.handOff(k, q)
		return res, err
	}
	p := &pendingCheck{ctx: ctx, windows: windows, member: member, done: make(chan struct{})}
	q.pending = append(q.pending, p)
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return StoreResult{}, ctx.Err()
	}
}

// handOff ends a call for q: the key goes idle, or a sender takes over the
// checks that queued meanwhile.
func (c *coalescer) handOff(k Key, q *checkQueue) {
	c.mu.Lock()
	if len(q.pending) == 0 {
		q.busy = false
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go c.send(k, q)
}

// send runs the key's queued checks, a batch per call, until none is left.
func (c *coalescer) send(k Key, q *checkQueue) {
	var batch []*pendingCheck
	for {
		c.mu.Lock()
		batch = c.take(q, batch[:0])
		if len(batch) == 0 && len(q.pending) == 0 {
			q.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if len(batch) > 0 {
			c.run(k, batch)
		}
	}
}

// take moves into batch, in arrival order, up to c.max queued checks that
// share the first one's windows; the others (a limits change in between)
// wait for the next call. Checks whose caller already left are dropped.
// c.mu is held.
func (c *coalescer) take(q *checkQueue, batch []*pendingCheck) []*pendingCheck {
	rest := q.pending[:0]
	var windows []Window
	for _, p := range q.pending {
		switch {
		case p.ctx.Err() != nil:
			p.err = p.ctx.Err()
			close(p.done)
		case len(batch) < c.max && (windows == nil || slices.Equal(p.windows, windows)):
			windows = p.windows
			batch = append(batch, p)
		default:
			rest = append(rest, p)
		}
	}
	clear(q.pending[len(rest):])
	q.pending = rest
	return batch
}

// run sends one batch as one script call and hands each caller its result.
// A batch of several runs until the latest of its callers' deadlines: it is
// not tied to any one caller's cancellation.
func (c *coalescer) run(k Key, batch []*pendingCheck) {
	c.calls.Add(1)
	c.checks.Add(uint64(len(batch)))
	if len(batch) == 1 {
		p := batch[0]
		p.res, p.err = c.s.checkOne(p.ctx, k, p.windows, p.member)
		close(p.done)
		return
	}
	windows := batch[0].windows
	members := make([]string, len(batch))
	var deadline time.Time
	for i, p := range batch {
		members[i] = p.member
		d, ok := p.ctx.Deadline()
		if !ok {
			d = time.Now().Add(noDeadline)
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	res, err := c.s.runCheck(ctx, c.s.keys(k, windows), checkArgs(windows, members...))
	cancel()
	out := make([]StoreResult, len(batch))
	if err == nil {
		err = parseCheckReply(res, len(windows), out)
	}
	for i, p := range batch {
		p.res, p.err = out[i], err
		close(p.done)
	}
}
