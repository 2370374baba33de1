package ratelimit

import "time"

// plan is what one request is checked against: every window that applies
// to it, its own key's first, then its channel-wide key's, each with the
// limit for the request's bizType.
type plan struct {
	windows []KeyWindow
	// shadow: every rule that applies is in shadow mode, so a refusal
	// admits anyway.
	shadow bool
	// hasBaseline: some window is an amount or calendar window, whose use
	// Redis reports is kept for the fallback (LocalStore.FollowRedis).
	hasBaseline bool
}

// newPlan builds the plan of r under cfg at now. The rules are the ones in
// force at now (schedules included). An amount window applies only to a
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
	if !r.Key.IsChannelWide() {
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
		n += len(x.rule.Windows)
	}
	p.windows = make([]KeyWindow, 0, n) // one allocation: this runs on every check
	for _, x := range rules {
		if x.rule.Shadow && enforced {
			continue
		}
		for i, w := range x.rule.Windows {
			if !w.Applies(r.Amount, r.Currency) {
				continue
			}
			w.Limit = x.rule.LimitFor(i, r.Key.BizType)
			p.windows = append(p.windows, KeyWindow{Key: x.key, Window: w})
			p.hasBaseline = p.hasBaseline || w.Amount || w.IsCalendar()
		}
	}
	return p
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
	d := Decision{
		Key:        key,
		Allowed:    res.Allowed,
		Scope:      w.Key,
		Rule:       w.Name(),
		Amount:     w.Amount,
		Limit:      w.Limit,
		Window:     w.Size,
		Count:      res.Count,
		Remaining:  max(w.Limit-res.Count, 0),
		RetryAfter: res.RetryAfter,
		Source:     src,
		Duplicate:  res.Duplicate,
		Conflict:   res.Conflict,
		ExceedsCap: res.ExceedsCap,
	}
	if len(res.Counts) == len(p.windows) {
		d.Windows = make([]WindowUsage, len(p.windows))
		for i, w := range p.windows {
			d.Windows[i] = WindowUsage{Window: w.Window, Scope: w.Key, Count: res.Counts[i]}
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
// key and its channel-wide key.
func (p plan) nextChange(cfg *Config, key Key, now time.Time) time.Time {
	next := cfg.NextChange(key, now)
	if !key.IsChannelWide() {
		if t := cfg.NextChange(ChannelWide(key.Channel), now); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// releaseWindows returns the windows a release of a member of key touches:
// every window of key and of its channel-wide key, under the base rules and
// every schedule's (a schedule may have started or ended since the
// admission), each once; only amount windows when amountsOnly. Removing a
// member from a window that does not hold it changes nothing.
func releaseWindows(cfg *Config, key Key, now time.Time, amountsOnly bool) []KeyWindow {
	keys := []Key{key}
	if !key.IsChannelWide() {
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
		for _, r := range rules {
			for _, w := range r.Windows {
				id := idOf(KeyWindow{Key: k, Window: w})
				if seen[id] || (amountsOnly && !w.Amount) {
					continue
				}
				seen[id] = true
				out = append(out, KeyWindow{Key: k, Window: w})
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
