package testutil

import (
	"sync"
	"time"
)

// Clock is a settable clock for tests, safe for concurrent use. Pass its Now
// method wherever a constructor takes a clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
