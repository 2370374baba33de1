package ratelimit

import "time"

// Rule is the effective limit of one key: every window is enforced together,
// and a request is admitted only if each has room. The zero Rule is
// unlimited.
type Rule struct {
	// Windows are sorted: sliding windows by Size, shortest first, then
	// calendar windows (day before month); count before amount. Their IDs are
	// distinct. Empty means unlimited.
	Windows []Window
	// Reserve, on a channel-wide key (bizType "*"), is for each window (same
	// index as Windows; nil or shorter when none) the part of its limit kept
	// for the named bizTypes: any other bizType may use at most the limit
	// minus the sum of that window's reservations. Named bizTypes may use the
	// whole limit.
	Reserve []map[string]int64
	// Merchants is for each window (same index as Windows; nil, shorter or
	// a nil entry when none) its limits per merchant: a request of a
	// merchant is admitted only if that merchant's own use of the window
	// stays within its limit too (Model).
	Merchants []*Merchants
	// Shadow makes the limiter evaluate and count the rule but always admit.
	Shadow bool
	// Adaptive is how the rule's sliding count windows learn a lower limit
	// from the channel's throttling; the zero value is on, with the
	// defaults (Adaptive).
	Adaptive Adaptive
}

// MerchantsOf returns the limits per merchant of window i, or nil.
func (r Rule) MerchantsOf(i int) *Merchants {
	if i < len(r.Merchants) {
		return r.Merchants[i]
	}
	return nil
}

// IsUnlimited reports whether the rule limits nothing.
func (r Rule) IsUnlimited() bool { return len(r.Windows) == 0 }

// IsClosed reports whether some count window has limit 0, so that every
// request is refused without asking Redis.
func (r Rule) IsClosed() bool {
	for _, w := range r.Windows {
		if w.Limit == 0 && !w.Amount {
			return true
		}
	}
	return false
}

// LimitFor returns the share of window i that bizType can count on under
// the rule's reservations whatever the others use: the whole limit for a
// window without any, else the limit minus the other names' reservations,
// never below zero. Admissions apply the exact rule (Model: only the other
// names' unmet reservations are kept); reports use this bound.
func (r Rule) LimitFor(i int, bizType string) int64 {
	w := r.Windows[i]
	if i >= len(r.Reserve) || len(r.Reserve[i]) == 0 {
		return w.Limit
	}
	var reserved int64
	for name, n := range r.Reserve[i] {
		if name != bizType {
			reserved += n
		}
	}
	return max(w.Limit-reserved, 0)
}

// Longest returns the longest sliding window size, or 0 for a rule without
// one.
func (r Rule) Longest() time.Duration {
	var d time.Duration
	for _, w := range r.Windows {
		d = max(d, w.Size)
	}
	return d
}

// LearnedReach is the longest a learned limit of r's windows can stay in
// force after its throttle: the channel's retry-after (at most
// MaxThrottleWait), or the windows it takes to climb from its floor back to
// the configured limit (learned.go), whichever is longer; 0 when no window
// learns. A replay that starts that long before an instant has seen every
// throttle whose learned limit is still in force at it (a throttle that
// lowers a limit still in force from an earlier one also depends on that
// one: the replay is then exact only as far as its start reaches).
func (r Rule) LearnedReach() time.Duration {
	var d time.Duration
	for i, w := range r.Windows {
		if l := r.learning(i); l.On() {
			climb := (w.Limit - l.Floor + l.Step - 1) / l.Step
			d = max(d, time.Duration(climb)*w.Size, MaxThrottleWait)
		}
	}
	return d
}
