package limits

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"payserver/internal/iso4217"
	"payserver/internal/ratelimit"
)

// entry is one window entry of the document with its reservations.
type entry struct {
	w         ratelimit.Window
	reserve   map[string]int64
	merchants *ratelimit.Merchants
}

// windowFields are the fields of a window entry, as error messages list
// them.
const windowFields = "limit or amount, window or calendar, cutoff, zone, currency, reserve, perMerchant, merchants"

// parseWindow reads one window entry:
//
//	limit: N | amount: N     exactly one: a count (-1 unlimited) or a cap
//	                         on the sum of amounts, in minor units
//	window: 1s | calendar: day|month
//	                         at most one: a sliding window or a calendar
//	                         period; neither is the default window
//	cutoff: "HH:MM"          calendar only: when the period starts
//	                         (default 00:00)
//	zone: Area/City          calendar only: the IANA zone of the period
//	                         (default the document's zone)
//	currency: CNY            amount only: the only currency counted
//	                         (default every currency)
//	reserve: {BIZTYPE: n}    channel-wide keys only: part of the limit kept
//	                         for the named bizTypes (never RESOLVE)
//	perMerchant: n           each merchant's own use of the window may
//	                         reach at most n (0..the window's limit, -1
//	                         for none), in the window's unit
//	merchants: {ID: n}       the limits of named merchants: 0..the
//	                         window's limit, -1 for no limit, 0 refuses
//	                         the merchant
//
// A RESOLVE key takes no merchant limits: the resolver's queries are made
// for no merchant.
//
// A resolver key (RESOLVE:CHANNEL, ratelimit.ResolveBizType) takes count windows
// only, sliding or calendar: an amount window on it is refused.
//
// allowShadow permits a shadow field, which the single-window object form
// carries beside the window's fields.
func parseWindow(obj map[string]any, rc ruleContext, allowShadow bool) (entry, error) {
	for name := range obj {
		switch name {
		case "limit", "amount", "window", "calendar", "cutoff", "zone", "currency", "reserve", "perMerchant", "merchants":
		case "shadow":
			if !allowShadow {
				return entry{}, fmt.Errorf("unknown field %q (want %s; shadow goes beside windows)", name, windowFields)
			}
		default:
			return entry{}, fmt.Errorf("unknown field %q (want %s)", name, windowFields)
		}
	}
	var w ratelimit.Window
	var err error
	lv, hasLimit := obj["limit"]
	av, hasAmount := obj["amount"]
	switch {
	case hasLimit && hasAmount:
		return entry{}, errors.New("both limit and amount: write one (limit counts requests, amount caps their sum)")
	case hasAmount:
		if rc.key.IsResolve() {
			return entry{}, fmt.Errorf("amount window on %s: a RESOLVE key counts the resolver's channel queries, which move no money; give it count windows (limit)", rc.key)
		}
		w.Amount = true
		if w.Limit, err = parseAmount(av); err != nil {
			return entry{}, err
		}
	case hasLimit:
		if w.Limit, err = parseLimit(lv); err != nil {
			return entry{}, err
		}
	default:
		return entry{}, errors.New("limit is missing: write limit (a count) or amount (minor units)")
	}
	if err := parseSpan(obj, rc, &w); err != nil {
		return entry{}, err
	}
	if cv, ok := obj["currency"]; ok {
		if !w.Amount {
			return entry{}, errors.New("currency is for amount windows only")
		}
		if w.Currency, err = parseCurrency(cv); err != nil {
			return entry{}, err
		}
	}
	e := entry{w: w}
	if rv, ok := obj["reserve"]; ok {
		if e.reserve, err = parseReserve(rv, rc.key, w); err != nil {
			return entry{}, err
		}
	}
	if e.merchants, err = parseMerchants(obj, rc.key, w); err != nil {
		return entry{}, err
	}
	return e, nil
}

// parseMerchants reads perMerchant and merchants: nil when the entry has
// neither.
func parseMerchants(obj map[string]any, key ratelimit.Key, w ratelimit.Window) (*ratelimit.Merchants, error) {
	pv, hasPer := obj["perMerchant"]
	mv, hasOverrides := obj["merchants"]
	if !hasPer && !hasOverrides {
		return nil, nil
	}
	if key.IsResolve() {
		return nil, fmt.Errorf("merchant limits on %s: a RESOLVE key counts the resolver's channel queries, which are made for no merchant", key)
	}
	if w.Limit == ratelimit.Unlimited {
		return nil, errors.New("merchant limits on an unlimited window: there is nothing to share")
	}
	limitOf := func(field string, v any) (int64, error) {
		n, err := parseWhole(field, v, w.Limit)
		if err != nil {
			return 0, err
		}
		if n < ratelimit.Unlimited {
			return 0, fmt.Errorf("%s %d: want 0..%d (the window's limit), or -1 for no merchant limit", field, n, w.Limit)
		}
		return n, nil
	}
	m := &ratelimit.Merchants{PerMerchant: ratelimit.Unlimited}
	if hasPer {
		n, err := limitOf("perMerchant", pv)
		if err != nil {
			return nil, err
		}
		m.PerMerchant = n
	}
	if hasOverrides {
		if keyed, ok := mv.(map[any]any); ok {
			// YAML reads an unquoted 00123 as the number 83 and true as a
			// boolean, not as the merchant ID written. What it read is
			// named, never offered as the ID to quote: that would be
			// another merchant.
			for id := range keyed {
				if _, ok := id.(string); !ok {
					return nil, fmt.Errorf("merchants: a merchant ID was read as %s, not as text: quote each merchant ID as written, such as {\"00123\": 40}", yamlRead(id))
				}
			}
		}
		raw, ok := mv.(map[string]any)
		if !ok || len(raw) == 0 {
			return nil, errors.New("merchants: want a map of merchant ID to its limit, such as {M_VIP: 40}")
		}
		m.Overrides = make(map[string]int64, len(raw))
		for id, v := range raw {
			if reason := ratelimit.MerchantProblem(id); reason != "" {
				return nil, fmt.Errorf("merchants: merchant %q %s", id, reason)
			}
			n, err := limitOf("merchants "+id, v)
			if err != nil {
				return nil, fmt.Errorf("merchants: %w", err)
			}
			m.Overrides[id] = n
		}
	}
	return m, nil
}

// parseSpan reads window, calendar, cutoff and zone into w.
func parseSpan(obj map[string]any, rc ruleContext, w *ratelimit.Window) error {
	wv, hasWindow := obj["window"]
	cv, hasCalendar := obj["calendar"]
	if !hasCalendar {
		for _, f := range [...]string{"cutoff", "zone"} {
			if _, ok := obj[f]; ok {
				return fmt.Errorf("%s is for calendar windows only (add calendar: day or month)", f)
			}
		}
	}
	switch {
	case hasWindow && hasCalendar:
		return errors.New("both window and calendar: write one (window slides, calendar resets at period boundaries)")
	case hasCalendar:
		unit, ok := cv.(string)
		if !ok || (unit != string(ratelimit.CalendarDay) && unit != string(ratelimit.CalendarMonth)) {
			return fmt.Errorf("calendar %v: want day or month", cv)
		}
		w.Calendar = ratelimit.Calendar{Unit: ratelimit.CalendarUnit(unit), Zone: rc.cfg.Zone}
		if zv, ok := obj["zone"]; ok {
			z, err := parseZone(zv)
			if err != nil {
				return fmt.Errorf("zone: %w", err)
			}
			w.Calendar.Zone = z
		}
		if ov, ok := obj["cutoff"]; ok {
			c, err := parseCutoff(ov)
			if err != nil {
				return fmt.Errorf("cutoff: %w", err)
			}
			w.Calendar.Cutoff = c
		}
	case hasWindow:
		d, err := parseWindowSize(wv)
		if err != nil {
			return fmt.Errorf("window: %w", err)
		}
		w.Size = d
	default:
		w.Size = rc.cfg.DefaultWindow
	}
	return nil
}

// parseZone reads an IANA time zone name such as "Asia/Shanghai" or "UTC".
// "Local" and "" are refused: a document must mean the same on every host.
func parseZone(v any) (*time.Location, error) {
	name, ok := v.(string)
	if !ok || name == "" {
		return nil, fmt.Errorf("%v: want an IANA time zone name such as \"Asia/Shanghai\" or \"UTC\"", v)
	}
	if name == "Local" {
		return nil, errors.New(`"Local" depends on the host: name the IANA zone, such as "Asia/Shanghai"`)
	}
	z, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as \"Asia/Shanghai\" or \"UTC\"", name)
	}
	return z, nil
}

// parseCutoff reads "HH:MM", 00:00 to 23:59.
func parseCutoff(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("%v: want \"HH:MM\" in quotes, such as \"23:00\"", v)
	}
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != len("15:04") {
		return 0, fmt.Errorf("%q: want \"HH:MM\" from 00:00 to 23:59, such as \"23:00\"", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// parseCurrency reads a currency code: an active ISO 4217 currency a
// payment may be made in (the table POST /pay checks too), so that a typo
// such as CYN, which no payment could ever match, is refused rather than
// leaving the cap counting nothing.
func parseCurrency(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("currency %v: want an ISO 4217 code such as CNY", v)
	}
	if _, ok := iso4217.Exponent(s); !ok {
		return "", fmt.Errorf("currency %q is not an active ISO 4217 currency a payment may be made in (such as CNY, USD)", s)
	}
	return s, nil
}

// parseReserve reads {BIZTYPE: n}: allowed on channel-wide keys only, each
// n ≥ 0, and their sum within the window's limit.
func parseReserve(v any, key ratelimit.Key, w ratelimit.Window) (map[string]int64, error) {
	if !key.IsChannelWide() {
		return nil, fmt.Errorf("reserve is for channel-wide keys only (write it under %q)", ratelimit.ChannelWide(key.Channel).String())
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, errors.New("reserve: want a map of bizType to the part of the limit kept for it, such as {REFUND: 40}")
	}
	if w.Limit == ratelimit.Unlimited {
		return nil, errors.New("reserve on an unlimited window: there is nothing to keep")
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]int64, len(m))
	var sum int64
	for _, name := range names {
		if reason := ratelimit.CodeProblem(name); reason != "" {
			return nil, fmt.Errorf("reserve: bizType %q %s", name, reason)
		}
		if name == ratelimit.ResolveBizType {
			return nil, fmt.Errorf("reserve: %s is the resolver's reserved bizType: its queries count only on %s, never in channel-wide windows, so nothing is kept for them here", name, ratelimit.ResolveKey(key.Channel))
		}
		n, err := parseWhole("reserve "+name, m[name], w.Limit)
		if err != nil {
			return nil, fmt.Errorf("reserve: %w", err)
		}
		if n < 0 {
			return nil, fmt.Errorf("reserve %s: %d is negative", name, n)
		}
		out[name] = n
		// Each n is at most the limit, so the sum cannot overflow before
		// it passes the limit.
		if sum += n; sum > w.Limit {
			return nil, fmt.Errorf("reserve: the reservations sum to more than the window's limit %d", w.Limit)
		}
	}
	return out, nil
}

// yamlRead names what YAML read a key as, for a message.
func yamlRead(v any) string {
	switch v := v.(type) {
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case nil:
		return "null"
	case time.Time:
		return "a date, " + v.Format(time.RFC3339)
	default:
		return fmt.Sprintf("the number %v", v)
	}
}
