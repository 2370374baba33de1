package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Policy says what the limiter does while the shared store (Redis) fails.
type Policy string

// The degraded-mode policies.
const (
	// PolicyLocal enforces the same windows in process, each limit scaled to
	// this instance's share, starting from this instance's own admissions
	// that Redis made in those windows. It is the default.
	PolicyLocal Policy = "local"
	// PolicyAllow admits everything while Redis fails.
	PolicyAllow Policy = "allow"
	// PolicyDeny refuses everything while Redis fails, with ErrUnavailable.
	PolicyDeny Policy = "deny"
)

// ParsePolicy validates a policy name; "" means PolicyLocal.
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "":
		return PolicyLocal, nil
	case PolicyLocal, PolicyAllow, PolicyDeny:
		return Policy(s), nil
	}
	return "", fmt.Errorf("unknown limiter policy %q (want local, allow or deny)", s)
}

// unknownOutcome answers a check whose store call may have admitted the
// member without telling us. A late answer must never become an extra
// admission, so under PolicyLocal it is refused, not decided in process;
// the client may retry (with the same requestId it is never counted twice).
// Under PolicyDeny it is the same refusal, not ErrUnavailable: the call may
// hold a slot, and only an unknown outcome (with its Hold) tells the caller
// to keep it until its fate is known. PolicyAllow admits it: the member's
// record, if the call made one, is that admission's.
func (l *Limiter) unknownOutcome(p plan, key Key) (Decision, error) {
	if l.opts.Policy == PolicyAllow {
		return l.allowOrDeny(p, key)
	}
	d := p.decision(key, StoreResult{}, SourceLocal)
	d.Allowed, d.RetryAfter, d.Remaining, d.Unknown = false, l.opts.BreakerCooldown, 0, true
	return d, nil
}

// allowOrDeny is the answer of PolicyAllow (admit) and PolicyDeny
// (ErrUnavailable) without the store.
func (l *Limiter) allowOrDeny(p plan, key Key) (Decision, error) {
	if l.opts.Policy == PolicyDeny {
		return Decision{Key: key}, ErrUnavailable
	}
	d := p.decision(key, StoreResult{Allowed: true}, SourceFailOpen)
	d.Remaining = 0
	unrecorded(&d, l.opts.Now())
	return d, nil
}

// decideDegraded decides without the shared store, by policy. Under
// PolicyLocal every window is enforced in process with its limit cut to
// this instance's share: of the whole limit for a sliding count window
// (whose admissions by this instance were copied), or of the learned limit
// Redis last reported for it, climbing from then (fallback.seenLearned),
// when lower; of what Redis last reported left for an amount or calendar
// window. The in-process windows' own learned limits (from throttles this
// instance was told of, Limiter.Throttled) apply on top.
func (l *Limiter) decideDegraded(lim *limits, p plan, r Request) (Decision, error) {
	l.log.Debug("degraded limiter decision", "policy", string(l.opts.Policy), "key", r.Key.String())
	if l.opts.Policy != PolicyLocal {
		return l.allowOrDeny(p, r.Key)
	}
	scaled := plan{windows: l.scaled(p), shadow: p.shadow}
	var res StoreResult
	var localOnly bool
	if p.shadow {
		res, _ = l.local.Check(context.Background(), scaled.windows, r.Member, r.Amount) // a LocalStore always answers (nil)
		localOnly = !res.Duplicate
	} else {
		res, localOnly = l.local.CheckLocalOnly(scaled.windows, r.Member, r.Amount, l.opts.Now())
	}
	d := scaled.decision(r.Key, res, SourceLocal)
	d.localOnly = localOnly
	if d.Allowed {
		d.WindowKeys = p.windowKeys(lim.localKeys, WindowKey)
	}
	return d, nil
}

// lowerByLocalOnly is for the first checks on Redis after an outage, while
// admissions decided in process are still inside their windows: Redis does
// not hold them. It returns the plan to ask Redis with, each limit lowered
// by the use that all instances are estimated to have made in process and
// that is still in the window (this instance's own divided by its share:
// the instances fail over together under balanced load, the assumption of
// the share itself), and those estimates. When an estimate alone fills a
// window, refused is the refusal, decided without asking Redis.
func (l *Limiter) lowerByLocalOnly(p plan, key Key, now time.Time) (asked plan, estimates []int64, refused *Decision) {
	uses, waits := l.local.LocalOnly(p.windows, now)
	some := false
	for _, c := range uses {
		some = some || c > 0
	}
	if !some {
		return p, nil, nil
	}
	share := l.LocalShare()
	asked = plan{windows: make([]KeyWindow, len(p.windows)), shadow: p.shadow, hasBaseline: p.hasBaseline}
	for i, w := range p.windows {
		o := int64(float64(uses[i])/share + 0.5)
		uses[i] = o
		asked.windows[i] = w
		asked.windows[i].Limit = max(w.Limit-o, 0)
		if o >= w.Limit && (refused == nil || waits[i] > refused.RetryAfter) {
			d := p.decision(key, StoreResult{Window: i, Count: o}, SourceNearCache)
			d.RetryAfter, d.Remaining = waits[i], 0
			refused = &d
		}
	}
	return asked, uses, refused
}

// scaleLimit cuts limit to share, rounded down so that the instances
// together never exceed the limit.
func scaleLimit(limit int64, share float64) int64 {
	return int64(float64(limit) * share)
}

// scaled returns the plan's windows with each limit cut to this instance's
// share, amount and calendar windows after taking off the use Redis last
// reported (baseline).
func (l *Limiter) scaled(p plan) []KeyWindow {
	share := l.LocalShare()
	var base []int64
	if p.hasBaseline {
		base = l.local.baseline(p.windows, l.opts.Now())
	}
	learned := l.local.seenLearned(p.windows, l.opts.Now())
	out := make([]KeyWindow, len(p.windows))
	for i, w := range p.windows {
		limit := w.Limit
		if learned != nil {
			limit = learned[i]
		}
		if base != nil {
			limit = max(limit-base[i], 0)
		}
		out[i] = w
		out[i].Limit = scaleLimit(limit, share)
		if len(w.Reserved) > 0 {
			// Reservations are cut to the share as the limit is.
			out[i].Reserved = make([]Reserved, len(w.Reserved))
			for j, rv := range w.Reserved {
				out[i].Reserved[j] = Reserved{Index: rv.Index, Amount: scaleLimit(rv.Amount, share)}
			}
			out[i].OwnReserve = scaleLimit(w.OwnReserve, share)
		}
	}
	return out
}

// Degraded reports whether checks currently bypass the shared store.
func (l *Limiter) Degraded() bool { return l.breaker.IsOpen() }
