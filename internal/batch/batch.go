// Package batch coalesces concurrent calls of one kind into batches, with no
// timer: a call that finds its batcher idle is served at once, alone, in its
// caller's goroutine and under its caller's context; calls that arrive while
// a call or batch is being served queue, and when it returns they are served
// together (at most Max at a time) by one goroutine that runs until the
// queue is empty. So one call or batch of a Batcher is in flight at a time,
// batches grow with load, and an uncontended call waits for nothing.
//
// The limiter's checks of one key (internal/ratelimit) and the order store's
// statements of one kind (internal/repo) are served this way. More than one
// in flight was measured for both and gave nothing end to end
// (docs/decisions/0005-one-batch-in-flight.md).
package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Batcher coalesces calls with argument A and result R. Set its fields
// before the first Do.
type Batcher[A, R any] struct {
	// Max bounds one batch.
	Max int
	// Fit says how many of the queued calls, taken in order, one batch
	// serves (nil: all of them); the others wait for the next batch.
	Fit func(calls []*Call[A, R]) int
	// One serves a call alone. Many serves two or more, setting each
	// call's Res and Err, under a context that ends when every caller has
	// left or at Timeout.
	One  func(ctx context.Context, a A) (R, error)
	Many func(ctx context.Context, calls []*Call[A, R])
	// Timeout bounds one batch whatever its callers' contexts say. Zero
	// means 10 s.
	Timeout time.Duration
	// FlushHook, if set (tests), runs at the start of every batch with its
	// size, and for a call served alone with 1.
	FlushHook func(n int)

	stats struct{ calls, batches, batched, retried, canceled atomic.Int64 }

	mu    sync.Mutex
	busy  bool // a call or a batch is being served
	queue []*Call[A, R]
}

// Call is one queued call.
type Call[A, R any] struct {
	Ctx   context.Context
	Arg   A
	Res   R
	Err   error
	done  chan struct{} // closed once Res and Err are set
	taken bool          // guarded by Batcher.mu: in a batch, or completed
}

// Stats counts what a Batcher did.
type Stats struct {
	Calls    int64 // calls served, alone or in a batch
	Batches  int64 // batches of two or more calls
	Batched  int64 // calls served by those
	Retried  int64 // calls the Many function reported as retried alone (AddRetried)
	Canceled int64 // calls that left the queue because their context ended
}

// Stats returns the counts so far.
func (b *Batcher[A, R]) Stats() Stats {
	return Stats{Calls: b.stats.calls.Load(), Batches: b.stats.batches.Load(), Batched: b.stats.batched.Load(),
		Retried: b.stats.retried.Load(), Canceled: b.stats.canceled.Load()}
}

// AddRetried counts n calls of a batch that Many served one by one.
func (b *Batcher[A, R]) AddRetried(n int) { b.stats.retried.Add(int64(n)) }

// Queued is the number of calls waiting for the next batch.
func (b *Batcher[A, R]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Do serves one call: at once if this Batcher is idle, else in the next
// batch. A caller whose context
// ends while it is queued leaves the queue, never served; one whose context
// ends while its batch is in flight gets the context's error at once (the
// batch may still serve it).
func (b *Batcher[A, R]) Do(ctx context.Context, a A) (R, error) {
	var zero R
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		defer b.next() // even if One panics, so its place in flight is freed
		if b.FlushHook != nil {
			b.FlushHook(1)
		}
		b.stats.calls.Add(1)
		return b.One(ctx, a)
	}
	c := &Call[A, R]{Ctx: ctx, Arg: a, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	b.mu.Unlock()

	select {
	case <-c.done:
		return c.Res, c.Err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !c.taken {
		for i, q := range b.queue {
			if q == c {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
		b.mu.Unlock()
		b.stats.canceled.Add(1)
		return zero, ctx.Err()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.Res, c.Err
	default:
		return zero, ctx.Err()
	}
}

// next runs after a call served alone: it hands whatever queued meanwhile
// to a serving goroutine, which keeps the batcher busy, or makes it idle.
func (b *Batcher[A, R]) next() {
	b.mu.Lock()
	batch := b.takeLocked()
	if batch == nil {
		b.busy = false
	}
	b.mu.Unlock()
	if batch != nil {
		go b.loop(batch)
	}
}

// loop serves batches until the queue is empty, then makes the batcher
// idle.
func (b *Batcher[A, R]) loop(batch []*Call[A, R]) {
	for batch != nil {
		b.serve(batch)
		b.mu.Lock()
		batch = b.takeLocked()
		if batch == nil {
			b.busy = false
		}
		b.mu.Unlock()
	}
}

// takeLocked removes the next batch from the queue, or returns nil. Calls
// whose context has ended are completed with its error instead.
func (b *Batcher[A, R]) takeLocked() []*Call[A, R] {
	if len(b.queue) == 0 {
		return nil
	}
	var batch, rest []*Call[A, R]
	for _, c := range b.queue {
		if len(batch) == b.Max {
			rest = append(rest, c)
			continue
		}
		if err := c.Ctx.Err(); err != nil {
			c.Err, c.taken = err, true
			close(c.done)
			b.stats.canceled.Add(1)
			continue
		}
		batch = append(batch, c)
	}
	if b.Fit != nil && len(batch) > 0 {
		if n := b.Fit(batch); n < len(batch) {
			rest = append(append([]*Call[A, R](nil), batch[n:]...), rest...)
			batch = batch[:n]
		}
	}
	clear(b.queue)
	b.queue = append(b.queue[:0], rest...)
	if len(batch) == 0 {
		return nil
	}
	for _, c := range batch {
		c.taken = true
	}
	return batch
}

// serve serves one batch and completes its calls.
func (b *Batcher[A, R]) serve(batch []*Call[A, R]) {
	if b.FlushHook != nil {
		b.FlushHook(len(batch))
	}
	b.stats.calls.Add(int64(len(batch)))
	if len(batch) == 1 {
		c := batch[0]
		c.Res, c.Err = b.One(c.Ctx, c.Arg)
		close(c.done)
		return
	}
	b.stats.batches.Add(1)
	b.stats.batched.Add(int64(len(batch)))
	ctx, release := b.context(batch)
	b.Many(ctx, batch)
	release()
	for _, c := range batch {
		close(c.done)
	}
}

// context is the context a batch runs under: the first caller's values,
// cancelled once every caller's context has ended, so that one caller
// leaving never cuts off the others, and at Timeout: one batch is in
// flight at a time, so one stuck on a dead connection must not hold every
// later call.
func (b *Batcher[A, R]) context(batch []*Call[A, R]) (context.Context, func()) {
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].Ctx), timeout)
	var live atomic.Int64
	live.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, c := range batch {
		stops[i] = context.AfterFunc(c.Ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
