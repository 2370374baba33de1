package configcenter

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"payserver/internal/iso4217"
	"payserver/internal/ratelimit"
)

// DescribeRule renders a rule compactly, for the audit history, reports and
// check-limits; present false renders "absent". Windows are joined by "+"
// as DescribeWindow renders them, and " (shadow)" follows a shadow rule:
//
//	20/1s+600/1m (shadow)
//	100/1s+amount 1000.00 CNY/1m+300000/day[23:00 Asia/Shanghai]
//	200/1s{REFUND:40}
func DescribeRule(r ratelimit.Rule, present bool) string {
	if !present {
		return "absent"
	}
	if r.IsUnlimited() {
		s := "unlimited"
		if r.Shadow {
			s += " (shadow)"
		}
		return s
	}
	parts := make([]string, len(r.Windows))
	for i, w := range r.Windows {
		var reserve map[string]int64
		if i < len(r.Reserve) {
			reserve = r.Reserve[i]
		}
		parts[i] = DescribeWindow(w, reserve) + describeMerchants(w, r.MerchantsOf(i))
	}
	s := strings.Join(parts, "+")
	if r.Shadow {
		s += " (shadow)"
	}
	return s
}

// DescribeWindow renders one window and its reservations (nil for none):
// "100/1s" for a sliding count window, "amount 5000000.00 CNY/day[00:00
// Asia/Shanghai]" for a calendar amount window counting CNY only (in major
// units of the currency, the cutoff and zone in brackets), "amount
// 100000 minor units/1m" for an amount window counting every currency,
// "200/1s{CANCEL:5,REFUND:40}" with reservations, sorted by bizType (in
// the window's unit).
func DescribeWindow(w ratelimit.Window, reserve map[string]int64) string {
	var b strings.Builder
	quantity := quantityOf(w)
	if w.Amount {
		b.WriteString("amount ")
	}
	b.WriteString(quantity(w.Limit))
	switch {
	case w.Currency != "":
		b.WriteString(" " + w.Currency)
	case w.Amount:
		b.WriteString(" minor units")
	}
	if w.IsCalendar() {
		fmt.Fprintf(&b, "/%s[%s %s]", w.Calendar.Unit, ratelimit.FormatCutoff(w.Calendar.Cutoff), w.Calendar.Zone)
	} else {
		b.WriteString("/" + FormatWindow(w.Size))
	}
	if len(reserve) > 0 {
		names := make([]string, 0, len(reserve))
		for name := range reserve {
			names = append(names, name)
		}
		sort.Strings(names)
		for i, name := range names {
			names[i] = name + ":" + quantity(reserve[name])
		}
		b.WriteString("{" + strings.Join(names, ",") + "}")
	}
	return b.String()
}

// quantityOf renders a quantity in w's unit: a count, or an amount in
// major units of w's currency (minor units without one).
func quantityOf(w ratelimit.Window) func(int64) string {
	if _, ok := iso4217.Exponent(w.Currency); w.Amount && ok {
		return func(n int64) string { major, _ := iso4217.Major(n, w.Currency); return major }
	}
	return func(n int64) string { return strconv.FormatInt(n, 10) }
}

// describeMerchants renders the limits per merchant of w, "" for none:
// "[perMerchant:10,M_VIP:40]" (perMerchant left out when only overrides
// are set), the overrides sorted by merchant, -1 for no limit, an ID
// quoted unless plain (ratelimit.MerchantLabel).
func describeMerchants(w ratelimit.Window, m *ratelimit.Merchants) string {
	if m == nil {
		return ""
	}
	quantity := quantityOf(w)
	limit := func(n int64) string {
		if n == ratelimit.Unlimited {
			return "-1"
		}
		return quantity(n)
	}
	var parts []string
	if m.PerMerchant != ratelimit.Unlimited {
		parts = append(parts, "perMerchant:"+quantity(m.PerMerchant))
	}
	ids := make([]string, 0, len(m.Overrides))
	for id := range m.Overrides {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		label := ratelimit.MerchantLabel(id)
		if id == "perMerchant" {
			label = strconv.Quote(id) // not the field
		}
		parts = append(parts, label+":"+limit(m.Overrides[id]))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// FormatWindow renders a window size compactly, as the limits document
// writes it: 1s, 1m, 1h, 1d, 500ms.
func FormatWindow(d time.Duration) string { return ratelimit.FormatSize(d) }

// DescribeSchedule names a schedule as the history shows it: "schedule
// KEY FROM/TO", its times in RFC 3339 as the document wrote them.
func DescribeSchedule(s ratelimit.Schedule) string {
	return "schedule " + s.Key.String() + " " + s.From.Format(time.RFC3339) + "/" + s.To.Format(time.RFC3339)
}

// scheduleDiff lists the schedules that differ between two snapshots as
// "schedule KEY FROM/TO: old -> new", each side its rule or "absent". A
// schedule is the same schedule when its key and instants are: moving one
// shows the old one absent and the new one added.
func scheduleDiff(old, cur *ratelimit.Config) []string {
	type id struct {
		key      ratelimit.Key
		from, to int64
	}
	type side struct {
		name string
		rule ratelimit.Rule
	}
	index := func(c *ratelimit.Config) map[id]side {
		m := map[id]side{}
		if c != nil {
			for _, s := range c.Schedules {
				m[id{s.Key, s.From.UnixNano(), s.To.UnixNano()}] = side{DescribeSchedule(s), s.Rule}
			}
		}
		return m
	}
	o, n := index(old), index(cur)
	var out []string
	for k, ns := range n {
		os, had := o[k]
		if was, is := DescribeRule(os.rule, had), DescribeRule(ns.rule, true); was != is {
			out = append(out, ns.name+": "+was+" -> "+is)
		}
	}
	for k, os := range o {
		if _, has := n[k]; !has {
			out = append(out, os.name+": "+DescribeRule(os.rule, true)+" -> absent")
		}
	}
	return out
}
