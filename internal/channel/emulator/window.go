package emulator

import "time"

// window is a channel's throttle: the times of the payments it processed
// within the last span. A call it refuses is not counted, so a refused
// call never pushes the next admission further away.
type window struct {
	times []time.Time // ascending
}

// admit counts a payment at now if fewer than capacity were counted in
// (now-span, now], and reports true. Otherwise it reports false and how
// long until the oldest counted payment leaves the window (at least 1 ms).
// capacity Unlimited admits everything (and counts nothing).
func (w *window) admit(now time.Time, capacity int, span time.Duration) (bool, time.Duration) {
	if capacity == Unlimited {
		return true, 0
	}
	keep := 0
	for keep < len(w.times) && !w.times[keep].After(now.Add(-span)) {
		keep++
	}
	w.times = w.times[keep:]
	if len(w.times) < capacity {
		w.times = append(w.times, now)
		return true, 0
	}
	wait := w.times[len(w.times)-capacity].Add(span).Sub(now)
	return false, max(wait, time.Millisecond)
}

// forget gives back the slot a payment took at t (one that was admitted
// but could not be recorded).
func (w *window) forget(t time.Time) {
	for i := len(w.times) - 1; i >= 0; i-- {
		if w.times[i].Equal(t) {
			w.times = append(w.times[:i], w.times[i+1:]...)
			return
		}
	}
}
