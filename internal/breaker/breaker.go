// Package breaker is payserver's circuit breaker, shared by the limiter
// (its store) and channel health (each channel): after Failures failed
// calls in a row it opens for Cooldown, during which callers skip what it
// guards; then it lets Probes calls through at a time (half-open): Probes
// successes in a row close it, one failure opens it for another cool-down.
// It runs on the clock it is given, and a closed breaker answers Allow with
// one atomic load and no lock.
package breaker

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is a breaker's state.
type State int

// The states.
const (
	Closed State = iota
	HalfOpen
	Open
)

// String is "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "closed"
}

// Options tunes a Breaker. Zero values select the defaults.
type Options struct {
	// Failures is how many failed calls in a row open it. Default 1.
	Failures int
	// Cooldown is how long it stays open before probes. Default 1s.
	Cooldown time.Duration
	// Probes is how many calls a half-open breaker lets through at once,
	// and how many successes in a row close it. Default 1.
	Probes int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnChange, when set, is told of every change of state, under the
	// breaker's lock: it must not call the breaker.
	OnChange func(from, to State)
}

// Breaker is one circuit breaker. It is safe for concurrent use.
type Breaker struct {
	opts Options

	open     atomic.Bool // open or half-open; a closed breaker takes no lock
	failures atomic.Int32

	mu        sync.Mutex
	openedAt  time.Time
	halfOpen  bool // the cool-down has passed (reported once)
	inFlight  int  // probes let through and not yet answered
	successes int  // probes answered well in a row
}

// New returns a closed Breaker.
func New(opts Options) *Breaker {
	if opts.Failures <= 0 {
		opts.Failures = 1
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = time.Second
	}
	if opts.Probes <= 0 {
		opts.Probes = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Breaker{opts: opts}
}

// Allow reports whether a call may go through: always while closed; while
// half-open, when fewer than Probes probes are in flight (the call is then
// one of them, and must end with Success, Failure or Abandon).
func (b *Breaker) Allow() bool {
	if !b.open.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.cooledLocked() || b.inFlight >= b.opts.Probes {
		return false
	}
	b.inFlight++
	return true
}

// cooledLocked reports whether an open breaker's cool-down has passed,
// reporting the change to half-open the first time it sees it.
func (b *Breaker) cooledLocked() bool {
	if b.halfOpen {
		return true
	}
	if b.opts.Now().Sub(b.openedAt) < b.opts.Cooldown {
		return false
	}
	b.halfOpen = true
	b.changed(Open, HalfOpen)
	return true
}

// Success records a call that went well and reports whether it closed the
// breaker: the Probes-th probe in a row while half-open, or any success
// while open (a call let through before it opened: what it guards
// answered). While closed it only ends a run of failures, and reports
// false.
func (b *Breaker) Success() (closed bool) {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if !b.open.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() {
		return false
	}
	if b.inFlight > 0 {
		b.inFlight--
	}
	if b.successes++; b.successes < b.opts.Probes && b.halfOpen {
		return false
	}
	from := Open
	if b.halfOpen {
		from = HalfOpen
	}
	b.open.Store(false)
	b.halfOpen, b.inFlight, b.successes = false, 0, 0
	b.changed(from, Closed)
	return true
}

// Failure records a failed call and reports whether it opened the breaker:
// the Failures-th failure in a row while closed, or any failure while open
// or half-open (which starts another cool-down).
func (b *Breaker) Failure() (opened bool) {
	n := b.failures.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.open.Load()
	if !was && int(n) < b.opts.Failures {
		return false
	}
	from := Closed
	if was {
		from = Open
		if b.halfOpen {
			from = HalfOpen
		}
	}
	b.openedAt = b.opts.Now()
	b.halfOpen, b.inFlight, b.successes = false, 0, 0
	b.open.Store(true)
	if from != Open {
		b.changed(from, Open)
	}
	return !was
}

// Abandon ends a probe whose outcome says nothing about what the breaker
// guards (the caller gave up), so that another caller may probe.
func (b *Breaker) Abandon() {
	if !b.open.Load() {
		return
	}
	b.mu.Lock()
	if b.inFlight > 0 {
		b.inFlight--
	}
	b.mu.Unlock()
}

// IsOpen reports whether the breaker is open or half-open: calls skip what
// it guards but for its probes.
func (b *Breaker) IsOpen() bool { return b.open.Load() }

// State returns the breaker's state now.
func (b *Breaker) State() State {
	if !b.open.Load() {
		return Closed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() {
		return Closed
	}
	if b.cooledLocked() {
		return HalfOpen
	}
	return Open
}

// Refuses reports whether Allow would refuse a call now: open within its
// cool-down, or half-open with all its probes in flight.
func (b *Breaker) Refuses() bool {
	if !b.open.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open.Load() && (!b.cooledLocked() || b.inFlight >= b.opts.Probes)
}

// RetryAfter returns how long until a refusing breaker lets a probe
// through (1 ms while its probes are in flight); 0 when it would not
// refuse.
func (b *Breaker) RetryAfter() time.Duration {
	if !b.Refuses() {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.opts.Cooldown-b.opts.Now().Sub(b.openedAt), time.Millisecond)
}

func (b *Breaker) changed(from, to State) {
	if b.opts.OnChange != nil {
		b.opts.OnChange(from, to)
	}
}
