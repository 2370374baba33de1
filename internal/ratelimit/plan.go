package ratelimit

import (
	"slices"
	"time"
)

// plan is what one request is checked against: every window that applies
// to it, its own key's first, then its channel-wide key's, each with the
// limit for the request's bizType.
type plan struct {
	windows []KeyWindow
	// shadow: every rule that applies is in shadow mode, so a refusal
	// admits anyway.
	shadow bool
	// hasBaseline: some window is an amount or calendar window, whose use
	// Redis reports is kept for the fallback (fallback.followRedis).
	hasBaseline bool
	// merchant is the merchant whose use of the key's windows some window
	// counts (the request's, or NoMerchant), "" when none does.
	merchant string
}

// newPlan builds the plan of r under cfg at now: the windows applicable
// gives (its key's, and its channel-wide key's when it counts there,
// Key.CountsChannelWide: never for a resolver key; after a window with
// merchant limits, the window counting the request's merchant's use). The rules are the ones
// in force at now (schedules included). An amount window applies only to a
// request with an amount in its currency (Window.Applies). A rule in
// shadow mode beside an enforced one (a shadow key under an enforced
// channel-wide key, or the other way round) is left out: its windows could
// not refuse, and counting them would need a second, non-atomic call.
func newPlan(cfg *Config, r Request, now time.Time) plan {
	own := cfg.RuleAt(r.Key, now)
	rules := []struct {
		key  Key
		rule Rule
	}{{r.Key, own}}
	if r.Key.CountsChannelWide() {
		wide := ChannelWide(r.Key.Channel)
		rules = append(rules, struct {
			key  Key
			rule Rule
		}{wide, cfg.RuleAt(wide, now)})
	}
	enforced, shadowed := false, false
	for _, x := range rules {
		if !x.rule.IsUnlimited() {
			enforced = enforced || !x.rule.Shadow
			shadowed = shadowed || x.rule.Shadow
		}
	}
	p := plan{shadow: shadowed && !enforced}
	n := 0
	for _, x := range rules {
		n += len(x.rule.Windows) + len(x.rule.Merchants)
	}
	p.windows = make([]KeyWindow, 0, n) // one allocation: this runs on every check
	var tracking []KeyWindow
	for _, x := range rules {
		if x.rule.Shadow && enforced {
			continue
		}
		for i, w := range x.rule.Windows {
			if !w.Applies(r.Amount, r.Currency) {
				continue
			}
			kw := KeyWindow{Key: x.key, Window: w, Learn: x.rule.learning(i)}
			if i < len(x.rule.Reserve) && len(x.rule.Reserve[i]) > 0 {
				kw.Reserved, tracking = reservations(x.key.Channel, w, x.rule.Reserve[i], r.Key.BizType, tracking)
				kw.OwnReserve = x.rule.Reserve[i][r.Key.BizType]
			}
			p.windows = append(p.windows, kw)
			if ml := x.rule.MerchantsOf(i); ml != nil {
				p.merchant = requestMerchant(r.Merchant)
				p.windows = append(p.windows, merchantWindow(x.key, w, ml, p.merchant))
			}
			p.hasBaseline = p.hasBaseline || w.Amount || w.IsCalendar()
		}
	}
	if len(tracking) > 0 {
		// Tracking windows come last: a Reserved index i < 0 is the
		// tracking window -1-i.
		for i := range p.windows {
			for j := range p.windows[i].Reserved {
				p.windows[i].Reserved[j].Index = len(p.windows) - 1 - p.windows[i].Reserved[j].Index
			}
		}
		p.windows = append(p.windows, tracking...)
	}
	if r.Regardless {
		for i := range p.windows {
			w := &p.windows[i]
			w.Limit, w.Learn, w.Reserved, w.OwnReserve = trackingLimit, Learning{}, nil, 0
		}
	}
	return p
}

// reservations returns, for window w of channel with reservations reserve,
// checked for bizType, the Reserved entries of the other names (their Index
// -1-i for the i-th tracking window) and tracking with one window per name
// appended (TrackOwn for bizType's), in the names' order.
func reservations(channel string, w Window, reserve map[string]int64, bizType string, tracking []KeyWindow) ([]Reserved, []KeyWindow) {
	names := make([]string, 0, len(reserve))
	for n := range reserve {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Reserved
	for _, n := range names {
		t := KeyWindow{Key: reserveKey(channel, n), Window: w, Track: TrackOther}
		t.Limit = trackingLimit
		if n == bizType {
			t.Track = TrackOwn
		} else {
			out = append(out, Reserved{Index: -1 - len(tracking), Amount: reserve[n]})
		}
		tracking = append(tracking, t)
	}
	return out, tracking
}

// closed returns the index of a window that refuses every request of the
// plan (a count window with limit 0, or an amount window with cap 0), or
// -1.
func (p plan) closed() int {
	for i, w := range p.windows {
		if w.Limit == 0 {
			return i
		}
	}
	return -1
}

// decision turns a store's answer for the plan into a Decision.
func (p plan) decision(key Key, res StoreResult, src Source) Decision {
	w := p.windows[res.Window]
	limit := w.Limit
	if res.Limits != nil {
		limit = res.Limits[res.Window]
	}
	d := Decision{
		Key:        key,
		Allowed:    res.Allowed,
		Scope:      w.Key.base(),
		Merchant:   w.Merchant,
		Rule:       w.Name(),
		Amount:     w.Amount,
		Limit:      limit,
		Configured: w.Limit,
		Learned:    limit < w.Limit,
		Window:     w.Size,
		Count:      res.Count,
		Remaining:  max(limit-res.Count, 0),
		RetryAfter: res.RetryAfter,
		Source:     src,
		Duplicate:  res.Duplicate,
		Conflict:   res.Conflict,
		ExceedsCap: res.ExceedsCap,
	}
	if res.Allowed {
		d.AdmittedAt = res.At
	}
	d.DecidedAt = res.Now
	if len(res.Counts) == len(p.windows) {
		// What other names keep is no room for this request.
		d.Remaining = max(limit-w.unmet(res.Counts, limit)-res.Count, 0)
		d.Windows = make([]WindowUsage, 0, len(p.windows))
		for i, w := range p.windows {
			if w.Track == TrackNone {
				u := WindowUsage{Window: w.Window, Scope: w.Key.base(), Merchant: w.Merchant, Count: res.Counts[i], Effective: w.Limit}
				if res.Limits != nil {
					u.Effective = res.Limits[i]
				}
				u.Kept = w.unmet(res.Counts, u.Effective)
				d.Windows = append(d.Windows, u)
			}
		}
	}
	return d
}

// closedDecision is the refusal of a closed plan (window i has limit 0):
// with ClosedUntil, and RetryAfter until then, when a schedule is known to
// open it (see reopensAt).
func (p plan) closedDecision(cfg *Config, r Request, i int, now time.Time) Decision {
	d := p.decision(r.Key, StoreResult{Window: i}, SourceClosed)
	d.Count, d.Remaining = 0, 0
	if at := p.reopensAt(cfg, r, now); !at.IsZero() {
		d.ClosedUntil, d.RetryAfter = at, at.Sub(now)
	}
	return d
}

// maxReopenSteps bounds the schedule boundaries reopensAt walks.
const maxReopenSteps = 64

// reopensAt is the first schedule boundary after now at which r's plan is
// no longer closed, or zero when none is known (closed by the base rules,
// or by schedules past the ones walked).
func (p plan) reopensAt(cfg *Config, r Request, now time.Time) time.Time {
	at := now
	for range maxReopenSteps {
		next := p.nextChange(cfg, r.Key, at)
		if next.IsZero() {
			return time.Time{}
		}
		if newPlan(cfg, r, next).closed() < 0 {
			return next
		}
		at = next
	}
	return time.Time{}
}

// nextChange is the first schedule boundary after now of the plan's keys:
// key and, when it counts there, its channel-wide key.
func (p plan) nextChange(cfg *Config, key Key, now time.Time) time.Time {
	next := cfg.NextChange(key, now)
	if key.CountsChannelWide() {
		if t := cfg.NextChange(ChannelWide(key.Channel), now); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// releaseWindows returns the windows a release of a member of key touches:
// every window of key and, when it counts there (Key.CountsChannelWide), of
// its channel-wide key, under the base rules and
// every schedule's (a schedule may have started or ended since the
// admission), each once, and merchant's use of each window with limits
// per merchant (the merchant "-" for ""); only amount windows when
// amountsOnly. Removing a member from a window that does not hold it
// changes nothing.
func releaseWindows(cfg *Config, key Key, now time.Time, amountsOnly bool, merchant string) []KeyWindow {
	keys := []Key{key}
	if key.CountsChannelWide() {
		keys = append(keys, ChannelWide(key.Channel))
	}
	var out []KeyWindow
	seen := map[windowID]bool{}
	for _, k := range keys {
		var base Rule
		if cfg != nil {
			base = cfg.Rules[k]
		}
		rules := []Rule{cfg.RuleAt(k, now), base}
		if cfg != nil {
			for _, sc := range cfg.Schedules {
				if sc.Key == k {
					rules = append(rules, sc.Rule)
				}
			}
		}
		add := func(kw KeyWindow) {
			id := idOf(kw)
			if seen[id] || (amountsOnly && !kw.Amount) {
				return
			}
			seen[id] = true
			out = append(out, kw)
		}
		for _, r := range rules {
			for i, w := range r.Windows {
				add(KeyWindow{Key: k, Window: w})
				if ml := r.MerchantsOf(i); ml != nil {
					add(merchantWindow(k, w, ml, requestMerchant(merchant)))
				}
				if i < len(r.Reserve) {
					if _, named := r.Reserve[i][key.BizType]; named && k.IsChannelWide() && !key.IsChannelWide() {
						// The member's own use of the reservation.
						add(KeyWindow{Key: reserveKey(k.Channel, key.BizType), Window: w, Track: TrackOwn})
					}
				}
			}
		}
	}
	return out
}

// KeyWindows returns windows as windows of k.
func KeyWindows(k Key, windows []Window) []KeyWindow {
	out := make([]KeyWindow, len(windows))
	for i, w := range windows {
		out[i] = KeyWindow{Key: k, Window: w}
	}
	return out
}
