package ratelimit

import "time"

// HoldObserver is an Observer that also hears what a replay of the
// limiter's decisions needs beyond Decided: every release and give-back of
// a hold, with its member and instant, and every check refused because the
// store failed under PolicyDeny (Check's ErrUnavailable, which Decided
// never sees). The Limiter calls it, when its Observer implements it, on
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
