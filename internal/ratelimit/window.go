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
