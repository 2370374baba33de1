package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker stops sending checks to a failing store. After threshold
// consecutive failures it opens for cooldown, during which callers skip the
// store at the cost of an atomic load. Then one probe at a time is let
// through: a success closes it, a failure opens it for another cooldown.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	now       func() time.Time

	open     atomic.Bool // closed breakers take no lock
	failures atomic.Int32

	mu        sync.Mutex
	openUntil time.Time
	probing   bool
}

func newBreaker(threshold int, cooldown time.Duration, now func() time.Time) *breaker {
	return &breaker{threshold: int32(threshold), cooldown: cooldown, now: now}
}

// allow reports whether a call may go to the store.
func (b *breaker) allow() bool {
	if !b.open.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.probing || b.now().Before(b.openUntil) {
		return false
	}
	b.probing = true
	return true
}

// success records a good call and reports whether it closed an open breaker.
func (b *breaker) success() (closed bool) {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if !b.open.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	return b.open.Swap(false)
}

// failure records a failed call and reports whether it opened the breaker.
func (b *breaker) failure() (opened bool) {
	n := b.failures.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if n < b.threshold && !b.open.Load() {
		return false
	}
	b.openUntil = b.now().Add(b.cooldown)
	return !b.open.Swap(true)
}

// abandon ends a probe whose outcome says nothing about the store (the
// caller gave up), so that the next caller may probe.
func (b *breaker) abandon() {
	if !b.open.Load() {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// isOpen reports whether checks currently skip the store.
func (b *breaker) isOpen() bool { return b.open.Load() }
