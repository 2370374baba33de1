package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
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

// onRedis decides on the shared store. Under PolicyLocal, admissions decided
// in process during an outage that are still in their windows lower the
// limits asked of Redis, which does not hold them; and each Redis admission
// is copied into the in-process windows, so that a later outage starts from
// it.
func (l *Limiter) onRedis(ctx context.Context, key Key, rule Rule, member string, now time.Time, end *time.Time) (Decision, error) {
	windows, localOnly := rule.Windows, []int64(nil)
	if l.followsRedis(rule) && l.local.MayHoldLocalOnly(now) {
		var refused *Decision
		if windows, localOnly, refused = l.lowerByLocalOnly(key, rule, now); refused != nil {
			l.breaker.abandon()
			return *refused, nil
		}
	}
	res, unknown, err := l.check(ctx, key, windows, member)
	if err != nil {
		if ctx.Err() != nil {
			l.breaker.abandon()
			return Decision{Key: key}, ctx.Err()
		}
		l.opts.Observer.StoreFailed(key, err)
		if l.breaker.failure() {
			l.log.Warn("limiter store failing; degraded decisions until it answers", "policy", string(l.opts.Policy), "key", key.String(), "err", err)
		}
		if unknown {
			return l.unknownOutcome(key, rule)
		}
		return l.decideDegraded(key, rule, member)
	}
	*end = l.opts.Now()
	if l.breaker.success() {
		l.log.Warn("limiter store answers again; back to shared windows", "key", key.String())
	}
	d := decision(key, rule, res, SourceRedis)
	if localOnly != nil {
		d.Count += localOnly[res.Window]
		d.Remaining = max(d.Limit-d.Count, 0)
		for i := range d.Windows {
			d.Windows[i].Count += localOnly[i]
		}
	}
	if d.Allowed && l.followsRedis(rule) {
		// Stamped after the answer: Redis admitted no later, so the copy
		// leaves its window no earlier than Redis's entry.
		l.local.CopyRedisAdmission(key, rule.Windows, l.LocalShare(), member, *end)
	}
	return d, nil
}

// check asks the store under Timeout. A call that failed after it may have
// reached Redis has an unknown outcome: Redis may have admitted the member.
// It is asked once more, with the same member, under RetryTimeout: the
// script never counts a member twice, so the answer is exact either way.
// unknown reports that the outcome is still unknown after the retry.
func (l *Limiter) check(ctx context.Context, key Key, windows []Window, member string) (res StoreResult, unknown bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	res, err = l.store.Check(cctx, key, windows, member)
	cancel()
	if err == nil || ctx.Err() != nil || neverReachedRedis(err) {
		return res, false, err
	}
	cctx, cancel = context.WithTimeout(ctx, l.opts.RetryTimeout)
	res, err = l.store.Check(cctx, key, windows, member)
	cancel()
	return res, err != nil, err
}

// neverReachedRedis reports whether a failed call provably did not run the
// script: no connection (dial error, pool exhausted, client closed) or an
// error reply, which Redis gives before running it.
func neverReachedRedis(err error) bool {
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// unknownOutcome answers a check whose store call may have admitted the
// member without telling us. A late answer must never become an extra
// admission, so under PolicyLocal it is refused, not decided in process;
// the client may retry (with the same requestId it is never counted twice).
func (l *Limiter) unknownOutcome(key Key, rule Rule) (Decision, error) {
	if l.opts.Policy != PolicyLocal {
		return l.allowOrDeny(key, rule)
	}
	w := rule.Windows[0]
	return Decision{Key: key, Limit: w.Limit, Window: w.Size, RetryAfter: l.opts.BreakerCooldown, Source: SourceLocal}, nil
}

// allowOrDeny is the answer of PolicyAllow (admit) and PolicyDeny
// (ErrUnavailable) without the store.
func (l *Limiter) allowOrDeny(key Key, rule Rule) (Decision, error) {
	if l.opts.Policy == PolicyDeny {
		return Decision{Key: key}, ErrUnavailable
	}
	w := rule.Windows[0]
	return Decision{Key: key, Allowed: true, Limit: w.Limit, Window: w.Size, Source: SourceFailOpen}, nil
}

// decideDegraded decides without the shared store, by policy.
func (l *Limiter) decideDegraded(key Key, rule Rule, member string) (Decision, error) {
	l.log.Debug("degraded limiter decision", "policy", string(l.opts.Policy), "key", key.String())
	if l.opts.Policy != PolicyLocal {
		return l.allowOrDeny(key, rule)
	}
	scaled := l.scaled(rule.Windows)
	var res StoreResult
	if rule.Shadow {
		res, _ = l.local.Check(context.Background(), key, scaled, member)
	} else {
		res = l.local.CheckLocalOnly(key, scaled, member, l.opts.Now())
	}
	return decision(key, Rule{Windows: scaled}, res, SourceLocal), nil
}

// followsRedis reports whether the in-process windows of rule must follow
// what Redis admits: only under PolicyLocal, the one policy that reads them,
// and not for shadow rules, which admit everything anyway. (Unlimited and
// closed rules never reach the store.)
func (l *Limiter) followsRedis(rule Rule) bool {
	return l.opts.Policy == PolicyLocal && !rule.Shadow
}

// lowerByLocalOnly is for the first checks on Redis after an outage, while
// admissions decided in process are still inside their windows: Redis does
// not hold them. It returns the windows to ask Redis with, each limit lowered
// by the admissions that all instances are estimated to have made in
// process and that are still in the window (this instance's own divided by
// its share: the instances fail over together under balanced load, the
// assumption of the share itself), and those estimates. When an estimate
// alone fills a window, refused is the refusal, decided without asking
// Redis.
func (l *Limiter) lowerByLocalOnly(key Key, rule Rule, now time.Time) (windows []Window, estimates []int64, refused *Decision) {
	counts, waits := l.local.LocalOnly(key, rule.Windows, now)
	some := false
	for _, c := range counts {
		some = some || c > 0
	}
	if !some {
		return rule.Windows, nil, nil
	}
	share := l.LocalShare()
	windows = make([]Window, len(rule.Windows))
	for i, w := range rule.Windows {
		o := int64(float64(counts[i])/share + 0.5)
		counts[i] = o
		windows[i] = Window{Limit: max(w.Limit-o, 0), Size: w.Size}
		if o >= w.Limit && (refused == nil || waits[i] > refused.RetryAfter) {
			refused = &Decision{Key: key, Limit: w.Limit, Window: w.Size, Count: o, RetryAfter: waits[i], Source: SourceNearCache}
		}
	}
	return windows, counts, refused
}

// scaleLimit cuts limit to share, rounded down so that the instances
// together never exceed the limit.
func scaleLimit(limit int64, share float64) int64 {
	return int64(float64(limit) * share)
}

// scaled returns the windows with each limit cut to this instance's share.
func (l *Limiter) scaled(ws []Window) []Window {
	share := l.LocalShare()
	out := make([]Window, len(ws))
	for i, w := range ws {
		out[i] = Window{Limit: scaleLimit(w.Limit, share), Size: w.Size}
	}
	return out
}

// Degraded reports whether checks currently bypass the shared store.
func (l *Limiter) Degraded() bool { return l.breaker.isOpen() }
