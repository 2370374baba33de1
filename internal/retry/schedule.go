// Package retry is payserver's one retry schedule and its one periodic
// loop. Every wait between two tries of the same thing, in the pay flow
// and in the limiter, starts at a first wait and doubles up to a most
// (Schedule); background work that runs at an interval runs in Every.
// Deadlines are read from each caller's injected clock; Sleep waits on the
// timer a caller passes or on the real one.
package retry

import (
	"context"
	"time"
)

// Schedule is a retry schedule: waits from First, doubling up to Most. The
// zero Schedule waits 0; copy a configured one per thing retried.
type Schedule struct {
	First, Most time.Duration
	next        time.Duration
}

// Wait returns the next wait and moves the schedule on.
func (b *Schedule) Wait() time.Duration {
	if b.next == 0 {
		b.next = b.First
	}
	d := b.next
	b.next = min(2*b.next, b.Most)
	return d
}

// Reset starts the schedule again from First.
func (b *Schedule) Reset() { b.next = 0 }

// Sleep sleeps d, or until ctx ends (false).
func Sleep(ctx context.Context, d time.Duration) bool {
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

// Every calls fn every interval until ctx ends, each call under a deadline
// of timeout when timeout is above 0. A call that outlasts the interval
// delays the next one; ticks are not queued.
func Every(ctx context.Context, interval, timeout time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				cctx, cancel = context.WithTimeout(ctx, timeout)
			}
			fn(cctx)
			cancel()
		}
	}
}
