package httpapi

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
)

// windowJSON describes one window of a rule as the limits document writes
// it, for GET /limits and GET /channels/usage.
type windowJSON struct {
	// Rule is the window's kind, as 429 answers name it: "count/1s",
	// "amount/day".
	Rule string `json:"rule"`
	// Kind is "count" (Limit admissions) or "amount" (Limit minor units).
	Kind  string `json:"kind"`
	Limit int64  `json:"limit"`
	// Window and WindowMs are a sliding window's length; absent for a
	// calendar window.
	Window   string `json:"window,omitempty"`
	WindowMs int64  `json:"windowMs,omitempty"`
	// Calendar, Cutoff and Zone describe a calendar window: "day" or
	// "month", starting at "HH:MM" in the IANA zone.
	Calendar string `json:"calendar,omitempty"`
	Cutoff   string `json:"cutoff,omitempty"`
	Zone     string `json:"zone,omitempty"`
	// Currency is the only currency an amount window counts; absent when
	// it counts every currency.
	Currency string `json:"currency,omitempty"`
	// Reserve is, on a channel-wide key, the part of Limit kept for each
	// named bizType.
	Reserve map[string]int64 `json:"reserve,omitempty"`
}

// Text renders the window for people: "100 per 1s", "amount 500000000
// CNY per day from 23:00 Asia/Shanghai", with "(kept for REFUND: 40)"
// after reservations.
func (w windowJSON) Text() string {
	var b strings.Builder
	if w.Kind == "amount" {
		b.WriteString("amount ")
	}
	fmt.Fprintf(&b, "%d", w.Limit)
	if w.Currency != "" {
		b.WriteString(" " + w.Currency)
	}
	b.WriteString(" per " + w.span())
	if len(w.Reserve) > 0 {
		names := make([]string, 0, len(w.Reserve))
		for name := range w.Reserve {
			names = append(names, name)
		}
		sort.Strings(names)
		for i, name := range names {
			names[i] = fmt.Sprintf("%s: %d", name, w.Reserve[name])
		}
		b.WriteString(" (kept for " + strings.Join(names, ", ") + ")")
	}
	return b.String()
}

// span is the window's length ("1s") or calendar period ("day from 23:00
// Asia/Shanghai").
func (w windowJSON) span() string {
	if w.Calendar != "" {
		return w.Calendar + " from " + w.Cutoff + " " + w.Zone
	}
	return w.Window
}

// describeWindows returns r's windows as windowJSON, in the rule's order.
func describeWindows(r ratelimit.Rule) []windowJSON {
	out := make([]windowJSON, len(r.Windows))
	for i, w := range r.Windows {
		j := windowJSON{Rule: w.Name(), Kind: "count", Limit: w.Limit, Currency: w.Currency}
		if w.Amount {
			j.Kind = "amount"
		}
		if w.IsCalendar() {
			j.Calendar, j.Cutoff, j.Zone = string(w.Calendar.Unit), ratelimit.FormatCutoff(w.Calendar.Cutoff), w.Calendar.Zone.String()
		} else {
			j.Window, j.WindowMs = configcenter.FormatWindow(w.Size), w.Size.Milliseconds()
		}
		if i < len(r.Reserve) && len(r.Reserve[i]) > 0 {
			j.Reserve = r.Reserve[i]
		}
		out[i] = j
	}
	return out
}

// readUsage reads the occupancy of every key from src (UsageOf) within
// usageTimeout. An unlimited key's counts are nil (the limiter answers it
// without asking its store); a key whose store answered a count per window
// of another rule carries errUsageShape.
func readUsage(ctx context.Context, src UsageSource, keys []ratelimit.Key) []ratelimit.KeyUsage {
	ctx, cancel := context.WithTimeout(ctx, usageTimeout)
	defer cancel()
	reads := src.UsageOf(ctx, keys)
	for i, u := range reads {
		if u.Err == nil && len(u.Counts) != len(u.Rule.Windows) && !u.Rule.IsUnlimited() {
			reads[i].Err = errUsageShape
		}
	}
	return reads
}
