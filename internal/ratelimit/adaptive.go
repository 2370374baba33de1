package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// Adaptive says how the sliding count windows of a rule learn a lower limit
// from the channel: on each throttle the channel answers (Limiter.Throttled)
// the window's learned limit drops to a fraction of what it admitted, and it
// climbs back by a step of the configured limit per whole window without a
// throttle (Model: "Learned limits"). Calendar windows and amount windows
// are caps of the contract, not rates: they never learn.
//
// The zero value is on, with the defaults; Off opts a key out. Fractions
// are in millionths (million is the whole), so that every store, the Lua
// script included, computes with the same integers.
type Adaptive struct {
	// Off turns learning off for the rule's windows: they enforce their
	// configured limit only, and a throttle changes nothing.
	Off bool
	// Decrease is the fraction of a window's admissions (in the window at
	// the throttle) its learned limit drops to, in millionths, in
	// [1, million). Zero means DefaultDecrease.
	Decrease int64
	// Increase is the step the learned limit climbs per whole window
	// without a throttle, as a fraction of the configured limit in
	// millionths, in [1, million]. The step is at least 1. Zero means
	// defaultIncrease.
	Increase int64
	// Floor is the least a learned limit drops to, an absolute count of
	// at least 1. Zero means max(1, ⌊limit / 100⌋).
	Floor int64
}

// million is the whole of a fraction in millionths (Adaptive.Decrease,
// Adaptive.Increase).
const million = 1_000_000

// The defaults of Adaptive.
const (
	DefaultDecrease int64 = 700_000 // 0.7× what was admitted
	defaultIncrease int64 = 50_000  // +5% of the configured limit per window
)

// Millionths converts a fraction such as 0.7 to millionths (700000),
// rounded to the nearest: what a limits document's adaptive.decrease and
// adaptive.increase become.
func Millionths(f float64) (int64, error) {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return 0, fmt.Errorf("fraction %v outside [0, 1]", f)
	}
	return int64(math.Round(f * million)), nil
}

// Validate reports a setting a document must not hold: a fraction outside
// its range, or a negative floor.
func (a Adaptive) Validate() error {
	switch {
	case a.Off:
		return nil
	case a.Decrease < 0 || a.Decrease >= million:
		return fmt.Errorf("adaptive decrease %d millionths: want a fraction in (0, 1)", a.Decrease)
	case a.Increase < 0 || a.Increase > million:
		return fmt.Errorf("adaptive increase %d millionths: want a fraction in (0, 1]", a.Increase)
	case a.Floor < 0:
		return fmt.Errorf("adaptive floor %d: want at least 1", a.Floor)
	}
	return nil
}

// Learning is the resolved setting of one window that learns: the zero
// Learning is a window that does not (calendar and amount windows, a
// closed or unlimited window, a rule with Adaptive.Off, a window tracking
// a reservation's use).
type Learning struct {
	// Step is what the learned limit climbs per whole window since the
	// last throttle: max(1, ⌊limit × increase / million⌋).
	Step int64
	// Decrease is Adaptive.Decrease resolved, in millionths.
	Decrease int64
	// Floor is Adaptive.Floor resolved: at least 1.
	Floor int64
}

// On reports whether the window learns.
func (l Learning) On() bool { return l.Step > 0 }

// learning resolves a for window w: zero unless w is a sliding count
// window with a limit of at least 1.
func (a Adaptive) learning(w Window) Learning {
	if a.Off || w.Amount || w.IsCalendar() || w.Limit < 1 {
		return Learning{}
	}
	l := Learning{Decrease: a.Decrease, Floor: a.Floor}
	if l.Decrease == 0 {
		l.Decrease = DefaultDecrease
	}
	inc := a.Increase
	if inc == 0 {
		inc = defaultIncrease
	}
	l.Step = max(1, w.Limit*inc/million)
	if l.Floor == 0 {
		l.Floor = max(1, w.Limit/100)
	}
	return l
}

// learning resolves the rule's Adaptive for its window i. Reservations
// shrink with a learned limit (Model); a default floor on a window with
// reservations is at least the number of names holding one, so that the
// learned limit at its floor still keeps a call for each name whose
// reservation is its equal part of the reservations or more. A floor the
// document gives is kept as it is.
func (r Rule) learning(i int) Learning {
	w := r.Windows[i]
	l := r.Adaptive.learning(w)
	if !l.On() || r.Adaptive.Floor != 0 || i >= len(r.Reserve) {
		return l
	}
	names := int64(0)
	for _, n := range r.Reserve[i] {
		if n > 0 {
			names++
		}
	}
	l.Floor = min(max(l.Floor, names), w.Limit)
	return l
}

// Learns reports whether window w of a check has a learned limit to read:
// a window of the rules (not a reservation's use) that learns. The stores
// that keep learned limits (Learner) keep them for these windows only.
func (w KeyWindow) Learns() bool { return w.Learn.On() && w.Track == TrackNone }

// learningOnly returns the windows of windows that learn, in their order.
func learningOnly(windows []KeyWindow) []KeyWindow {
	var out []KeyWindow
	for _, w := range windows {
		if w.Learns() {
			out = append(out, w)
		}
	}
	return out
}

// LearnedLimit is the learned limit of one window of a key, as
// Limiter.Learned reports it.
type LearnedLimit struct {
	// Key and Window are the window: Window.Limit is its configured limit.
	Key    Key
	Window Window
	// Limit is the limit in force now: min(configured, learned), or 0
	// until NotBefore.
	Limit int64
	// Learned is the learned value now, not-before aside: it rises by Step
	// per whole window since Since; at or above the configured limit it no
	// longer binds.
	Learned int64
	// Since is the last throttle, on the store's clock.
	Since time.Time
	// NotBefore, when after now, is the channel's retry-after: the window
	// admits nothing until then. Zero when the throttle gave none.
	NotBefore time.Time
	// Until is when the learned limit ends whatever the configured limit:
	// when it would have climbed back to the configured limit in force at
	// the throttle (and not before NotBefore).
	Until time.Time
}
