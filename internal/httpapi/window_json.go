package httpapi

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/iso4217"
	"payserver/internal/ratelimit"
)

// WindowJSON describes one window of a rule as the limits document writes
// it, for GET /limits and GET /channels/usage.
type WindowJSON struct {
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
	// LimitMajor and ReserveMajor are, on an amount window with a
	// currency, Limit and Reserve in major units of Currency as decimal
	// strings ("5000000.00" for 500000000 CNY).
	LimitMajor   string            `json:"limitMajor,omitempty"`
	ReserveMajor map[string]string `json:"reserveMajor,omitempty"`
	// PerMerchant and Merchants are the window's limits per merchant, in
	// its unit: every merchant's (absent when only overrides are set), and
	// the named merchants' (-1 no limit, 0 refused). Absent without
	// merchant limits.
	PerMerchant *int64           `json:"perMerchant,omitempty"`
	Merchants   map[string]int64 `json:"merchants,omitempty"`
}

// Text renders the window for people: "100 per 1s", "amount 5,000,000.00
// CNY per day from 23:00 Asia/Shanghai", with "(kept for REFUND: 40)"
// after reservations. An amount is in major units of its currency
// (iso4217.Text).
func (w WindowJSON) Text() string {
	var b strings.Builder
	b.WriteString(w.quantity(w.Limit))
	b.WriteString(" per " + w.Span())
	if len(w.Reserve) > 0 {
		names := make([]string, 0, len(w.Reserve))
		for name := range w.Reserve {
			names = append(names, name)
		}
		sort.Strings(names)
		for i, name := range names {
			names[i] = name + ": " + w.quantity(w.Reserve[name])
		}
		b.WriteString(" (kept for " + strings.Join(names, ", ") + ")")
	}
	if w.PerMerchant != nil || len(w.Merchants) > 0 {
		var parts []string
		if w.PerMerchant != nil {
			parts = append(parts, "each merchant at most "+w.quantity(*w.PerMerchant))
		}
		ids := make([]string, 0, len(w.Merchants))
		for id := range w.Merchants {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			switch n := w.Merchants[id]; n {
			case ratelimit.Unlimited:
				parts = append(parts, ratelimit.MerchantLabel(id)+": no limit")
			case 0:
				parts = append(parts, ratelimit.MerchantLabel(id)+": refused")
			default:
				parts = append(parts, ratelimit.MerchantLabel(id)+": "+w.quantity(n))
			}
		}
		b.WriteString(" (" + strings.Join(parts, "; ") + ")")
	}
	return b.String()
}

// quantity renders n in the window's unit: a count as it is, an amount as
// iso4217.Text writes it, after "amount".
func (w WindowJSON) quantity(n int64) string {
	if w.Kind == "amount" {
		return "amount " + iso4217.Text(n, w.Currency)
	}
	return strconv.FormatInt(n, 10)
}

// ofLimit renders n against the window's limit for people: "2 / 200", or
// for an amount "12,745.70 / 5,000,000.00 CNY", the currency once after
// both.
func (w WindowJSON) OfLimit(n int64) string {
	if w.Kind != "amount" {
		return strconv.FormatInt(n, 10) + " / " + strconv.FormatInt(w.Limit, 10)
	}
	used, limit := iso4217.Text(n, w.Currency), iso4217.Text(w.Limit, w.Currency)
	unit := strings.TrimLeft(limit, "-0123456789.,")
	return strings.TrimSuffix(used, unit) + " / " + limit
}

// major returns n in major units of the window's currency, or nil for a
// count window or an amount window without a (known) currency.
func (w WindowJSON) Major(n int64) *string {
	if w.Kind != "amount" {
		return nil
	}
	m, ok := iso4217.Major(n, w.Currency)
	if !ok {
		return nil
	}
	return &m
}

// span is the window's length ("1s") or calendar period ("day from 23:00
// Asia/Shanghai").
func (w WindowJSON) Span() string {
	if w.Calendar != "" {
		return w.Calendar + " from " + w.Cutoff + " " + w.Zone
	}
	return w.Window
}

// DescribeWindows returns r's windows as windowJSON, in the rule's order.
func DescribeWindows(r ratelimit.Rule) []WindowJSON {
	out := make([]WindowJSON, len(r.Windows))
	for i, w := range r.Windows {
		j := WindowJSON{Rule: w.Name(), Kind: "count", Limit: w.Limit, Currency: w.Currency}
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
		if m := r.MerchantsOf(i); m != nil {
			if m.PerMerchant != ratelimit.Unlimited {
				j.PerMerchant = &m.PerMerchant
			}
			j.Merchants = m.Overrides
		}
		if m := j.Major(j.Limit); m != nil {
			j.LimitMajor = *m
			for name, n := range j.Reserve {
				if j.ReserveMajor == nil {
					j.ReserveMajor = make(map[string]string, len(j.Reserve))
				}
				j.ReserveMajor[name] = *j.Major(n)
			}
		}
		out[i] = j
	}
	return out
}

// ReadUsage reads the occupancy of every key from src (UsageOf) within
// usageTimeout. An unlimited key's counts are nil (the limiter answers it
// without asking its store); a key whose store answered a count per window
// of another rule carries errUsageShape.
func ReadUsage(ctx context.Context, src UsageSource, keys []ratelimit.Key) []ratelimit.KeyUsage {
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

// UsageSource reads live window occupancy from the limiter's shared store.
// *ratelimit.Limiter implements it.
type UsageSource interface {
	Config() *ratelimit.Config
	// Usage reads one key's.
	Usage(ctx context.Context, key ratelimit.Key) (ratelimit.Rule, []int64, error)
	// UsageOf reads that of each of keys, one answer per key in their
	// order, in as few store calls as the store allows.
	UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage
}

// usageTimeout bounds reading every key's occupancy for one answer.
const usageTimeout = 2 * time.Second

// errUsageShape is a store answer with a count per window of another rule
// (the limits changed between reading the rule and the counts).
var errUsageShape = errors.New("limiter store returned a count per window for another rule")
