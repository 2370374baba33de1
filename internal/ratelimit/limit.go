package ratelimit

import (
	"fmt"
	"strconv"
	"time"
)

// Unlimited is the limit value that means "no limit": in the limits document,
// -1 (or a key that is not there at all) maps to it. An unlimited key is never
// checked against Redis.
const Unlimited int64 = -1

// Window is one window of a rule: at most Limit in any interval of length
// Size (a sliding window), or in each calendar period (a calendar window).
// What is limited is the number of admissions, or, for an amount window, the
// sum of their amounts in minor units. A Limit of 0 refuses everything.
//
// Window is comparable: two windows are the same window when every field is
// equal. ID names the stored window, which a limits change keeps as long as
// everything but Limit stays the same.
type Window struct {
	// Limit is the most admissions (count window) or the most amount (amount
	// window) the window takes.
	Limit int64
	// Size is a sliding window's length; zero for a calendar window.
	Size time.Duration
	// Amount makes the window cap the sum of admitted amounts, not their
	// number.
	Amount bool
	// Currency, for an amount window, is the only currency it counts; empty
	// counts every currency. Requests in another currency pass the window
	// without being counted.
	Currency string
	// Calendar, when set, makes the window a calendar period instead of a
	// sliding one.
	Calendar Calendar
}

// Calendar is a window that resets at calendar boundaries: each day or
// month in Zone, starting at Cutoff past local midnight (of the 1st, for a
// month). A daylight-saving day lasts 23 or 25 hours.
type Calendar struct {
	// Unit is CalendarDay, CalendarMonth, or empty for a sliding window.
	Unit CalendarUnit
	// Zone is the IANA time zone the periods are counted in.
	Zone *time.Location
	// Cutoff is when a period starts, past local midnight: 0 ≤ Cutoff < 24h,
	// whole minutes.
	Cutoff time.Duration
}

// CalendarUnit is the length of a calendar period.
type CalendarUnit string

// The calendar units.
const (
	CalendarDay   CalendarUnit = "day"
	CalendarMonth CalendarUnit = "month"
)

// IsCalendar reports whether w is a calendar window.
func (w Window) IsCalendar() bool { return w.Calendar.Unit != "" }

// Applies reports whether a request of amount in currency is counted by w:
// every request by a count window; by an amount window, a request with an
// amount in the window's currency (any currency when it names none).
func (w Window) Applies(amount int64, currency string) bool {
	if !w.Amount {
		return true
	}
	return amount > 0 && (w.Currency == "" || w.Currency == currency)
}

// Weight is what a request of amount adds to w: 1 in a count window, the
// amount in an amount window.
func (w Window) Weight(amount int64) int64 {
	if w.Amount {
		return amount
	}
	return 1
}

// ID names the stored window: everything that defines it but the limit, so
// that a limits change that only changes a limit keeps what the window
// holds. It is part of the window's Redis key.
//
//	1000                   sliding count window of 1000 ms
//	a60000 / a60000.CNY    sliding amount window, any currency / CNY only
//	day.0000.UTC           calendar count window: day from 00:00 UTC
//	aday.2300.Asia/Shanghai.CNY  calendar amount window, day from 23:00
func (w Window) ID() string {
	if !w.Amount && !w.IsCalendar() {
		return strconv.FormatInt(w.Size.Milliseconds(), 10) // the hot path: one allocation
	}
	var s string
	if w.IsCalendar() {
		c := w.Calendar
		s = fmt.Sprintf("%s.%02d%02d.%s", c.Unit, int(c.Cutoff/time.Hour), int(c.Cutoff%time.Hour/time.Minute), c.Zone.String())
	} else {
		s = strconv.FormatInt(w.Size.Milliseconds(), 10)
	}
	if w.Amount {
		s = "a" + s
		if w.Currency != "" {
			s += "." + w.Currency
		}
	}
	return s
}

// Name is the kind of rule w is, as 429 answers and reports name it:
// "count/1s", "amount/1m", "count/day", "amount/month".
func (w Window) Name() string {
	kind := "count"
	if w.Amount {
		kind = "amount"
	}
	if w.IsCalendar() {
		return kind + "/" + string(w.Calendar.Unit)
	}
	return kind + "/" + FormatSize(w.Size)
}

// FormatSize renders a window size as the document writes it: 1s, 1m, 1h,
// 1d, 500ms.
func FormatSize(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

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
	// Shadow makes the limiter evaluate and count the rule but always admit.
	Shadow bool
	// Adaptive is how the rule's sliding count windows learn a lower limit
	// from the channel's throttling; the zero value is on, with the
	// defaults (Adaptive).
	Adaptive Adaptive
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

// Schedule replaces the rule of one key from From (inclusive) to To
// (exclusive).
type Schedule struct {
	Key      Key
	From, To time.Time
	Rule     Rule
}

// Active reports whether s applies at now.
func (s Schedule) Active(now time.Time) bool { return !now.Before(s.From) && now.Before(s.To) }

// Config is an immutable, validated snapshot of the limits document. Requests
// read it without locks; a new document produces a new Config that replaces
// the old one whole.
type Config struct {
	// DefaultWindow is the window of bare numbers in the document.
	DefaultWindow time.Duration
	// Zone is the default time zone of calendar windows (UTC if the document
	// names none).
	Zone *time.Location
	// Shadow puts every key in shadow mode.
	Shadow bool
	// Rules holds every key the document names, including unlimited ones.
	// A channel-wide key has BizType "*" (AnyBizType).
	Rules map[Key]Rule
	// Schedules are the document's scheduled changes, sorted by key and
	// From; two schedules of one key never overlap.
	Schedules []Schedule
	// Routes holds the document's routes (routes.go); nil or empty when it
	// has none.
	Routes Routes
	// Version identifies the document the Config was read from: the hex
	// MD5 of its bytes (ParseDocument), the version the config center
	// shows and records for it. Empty for a Config made in code; the
	// Limiter then names it by a hash of its content (Decision.LimitsVersion).
	Version string
}

// RuleAt returns the rule for k in force at now: the base rule, unless a
// schedule replaces it. A key the document does not name is unlimited; so
// is a nil Config. The caller's clock says when: a Config reads none.
func (c *Config) RuleAt(k Key, now time.Time) Rule {
	if c == nil {
		return Rule{}
	}
	r := c.Rules[k]
	for _, s := range c.Schedules {
		if s.Key == k && s.Active(now) {
			r = s.Rule
			break
		}
	}
	if c.Shadow {
		r.Shadow = true
	}
	return r
}

// NextChange returns the first schedule boundary of k after now, or the zero
// time when none is ahead: until then, RuleAt(k, ·) stays what it is at now.
func (c *Config) NextChange(k Key, now time.Time) time.Time {
	var next time.Time
	if c == nil {
		return next
	}
	for _, s := range c.Schedules {
		if s.Key != k {
			continue
		}
		for _, t := range [2]time.Time{s.From, s.To} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}
