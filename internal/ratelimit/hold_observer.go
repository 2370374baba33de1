package ratelimit

import "time"

// HoldObserver is an Observer that also hears what a replay of the
// limiter's decisions needs beyond Decided: every release and give-back of
// a hold, with its member and instant, every check refused because the
// store failed under PolicyDeny (Check's ErrUnavailable, which Decided
// never sees), and every change the shared store made to learned limits. The Limiter calls it, when its Observer implements it, on
// the request path: it must not block.
type HoldObserver interface {
	Observer
	// ReleasedHold is called once per Release (amountsOnly false) or
	// ReleaseAmount (true) that reaches the windows, at the limiter's
	// clock.
	ReleasedHold(h Hold, amountsOnly bool, at time.Time)
	// Unavailable is called for a check of r the store could not decide
	// under PolicyDeny, at the limiter's clock when the check began.
	Unavailable(r Request, at time.Time)
	// Throttled is called once the shared store has learned from a throttle
	// of h's call with retryAfter (Limiter.Throttled), under the limits
	// version in force, at the limiter's clock.
	Throttled(h Hold, retryAfter time.Duration, version string, at time.Time)
	// LearnedReset is called once the shared store has forgotten key's
	// learned limits (Limiter.ResetLearned), under the limits version in
	// force, at the limiter's clock.
	LearnedReset(key Key, version string, at time.Time)
}

// holdObserver returns o as a HoldObserver, or nil when it is not one.
func holdObserver(o Observer) HoldObserver {
	h, _ := o.(HoldObserver)
	return h
}

// ReleasedHold implements HoldObserver for the observers that do.
func (m multiObserver) ReleasedHold(h Hold, amountsOnly bool, at time.Time) {
	for _, o := range m {
		if ho := holdObserver(o); ho != nil {
			ho.ReleasedHold(h, amountsOnly, at)
		}
	}
}

// Unavailable implements HoldObserver for the observers that do.
func (m multiObserver) Unavailable(r Request, at time.Time) {
	for _, o := range m {
		if ho := holdObserver(o); ho != nil {
			ho.Unavailable(r, at)
		}
	}
}

// Throttled implements HoldObserver for the observers that do.
func (m multiObserver) Throttled(h Hold, retryAfter time.Duration, version string, at time.Time) {
	for _, o := range m {
		if ho := holdObserver(o); ho != nil {
			ho.Throttled(h, retryAfter, version, at)
		}
	}
}

// LearnedReset implements HoldObserver for the observers that do.
func (m multiObserver) LearnedReset(key Key, version string, at time.Time) {
	for _, o := range m {
		if ho := holdObserver(o); ho != nil {
			ho.LearnedReset(key, version, at)
		}
	}
}
