// Package ratelimit limits calls to payment channels with exact sliding
// windows kept in Redis: one sorted set per bizType+channel window, whose
// members are requestIds and whose scores are Redis time, checked and updated
// by one atomic Lua call. When Redis fails, a circuit breaker and a
// configurable policy keep the limiter answering in microseconds.
//
// Under the default policy (local), the instance enforces the same windows
// in process while Redis fails, each limit scaled to its share. So that a
// failover inside a window does not start from zero, every admission Redis
// makes is mirrored into those in-process windows (this instance's own, the
// newest limit × share of each window); and so that the return to Redis
// does not start from what Redis alone holds, the admissions decided in
// process are taken off the limits asked of Redis until they leave their
// windows.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
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

// Source says what decided a Decision.
type Source string

// Decision sources.
const (
	SourceUnlimited Source = "unlimited"  // no limit: no store was asked
	SourceClosed    Source = "closed"     // a window with limit 0
	SourceRedis     Source = "redis"      // the shared store
	SourceNearCache Source = "near_cache" // remembered full window, no store call
	SourceLocal     Source = "local"      // degraded: in-process windows
	SourceFailOpen  Source = "fail_open"  // degraded: policy allow
)

// ErrUnavailable is returned by Allow when the store fails and the policy is
// PolicyDeny.
var ErrUnavailable = errors.New("ratelimit: limiter store unavailable")

// Decision is the outcome of one check. Being limited is a normal result,
// not an error.
type Decision struct {
	Key     Key
	Allowed bool
	// Limit and Window describe the binding window: the one that refused, or
	// the admitted window with the least room left. Limit is Unlimited for an
	// unlimited key.
	Limit  int64
	Window time.Duration
	// Count is the binding window's occupancy after the check; Remaining is
	// what is left of its limit.
	Count     int64
	Remaining int64
	// RetryAfter is how long until the window has room; zero when allowed.
	RetryAfter time.Duration
	Source     Source
	// Shadow is true when the rule refused but the key is in shadow mode, so
	// the request was admitted anyway.
	Shadow bool
	// Duplicate is true when the requestId was already in the window.
	Duplicate bool
}

// Degraded reports whether the decision was taken without the shared store.
func (d Decision) Degraded() bool { return d.Source == SourceLocal || d.Source == SourceFailOpen }

// Observer receives every decision, for metrics and reports. It is called on
// the request path and must not block.
type Observer interface {
	Decided(d Decision, elapsed time.Duration)
	Released(k Key)
	StoreFailed(k Key, err error)
}

// Options configures a Limiter. The zero value of each field selects the
// documented default.
type Options struct {
	// Timeout bounds each store call. Default 50ms.
	Timeout time.Duration
	// Policy applies while the store fails. Default PolicyLocal.
	Policy Policy
	// LocalShare is the fraction of each limit this instance enforces under
	// PolicyLocal, in (0, 1]: 1/instance count. Default 1. It also bounds
	// what the instance mirrors of its own Redis admissions (the newest
	// limit × share of each window), and after a failover the admissions
	// all instances made in process are estimated as this instance's own
	// divided by its share.
	LocalShare float64
	// DisableNearCache turns off remembering full windows locally.
	DisableNearCache bool
	// BreakerThreshold consecutive failures open the breaker. Default 3.
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker skips the store before a
	// probe. Default 250ms.
	BreakerCooldown time.Duration
	Logger          *slog.Logger
	Observer        Observer
	// Now is the clock for local windows and the near-cache. Default time.Now.
	Now func() time.Time
	// Unconfigured says what Allow does before any limits document was
	// loaded (no file, no Nacos server and no snapshot): PolicyAllow (the
	// default) treats every key as unlimited; PolicyDeny refuses every
	// request with ErrUnavailable.
	Unconfigured Policy
}

// Limiter checks requests against the current Config. It is safe for
// concurrent use.
type Limiter struct {
	store   Store
	local   *LocalStore
	opts    Options
	breaker *breaker
	log     *slog.Logger

	cfg   atomic.Pointer[Config]
	full  sync.Map      // Key -> nearEntry: windows known full until an instant
	share atomic.Uint64 // math.Float64bits of the local share in force
}

type nearEntry struct {
	until  time.Time
	limit  int64
	window time.Duration
	count  int64
}

// New returns a Limiter over store. It enforces nothing until SetConfig.
func New(store Store, opts Options) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("ratelimit: nil store")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.Policy == "" {
		opts.Policy = PolicyLocal
	}
	if _, err := ParsePolicy(string(opts.Policy)); err != nil {
		return nil, err
	}
	if opts.LocalShare == 0 {
		opts.LocalShare = 1
	}
	if opts.LocalShare < 0 || opts.LocalShare > 1 {
		return nil, fmt.Errorf("ratelimit: local share %v outside (0, 1]", opts.LocalShare)
	}
	if opts.BreakerThreshold <= 0 {
		opts.BreakerThreshold = 3
	}
	if opts.BreakerCooldown <= 0 {
		opts.BreakerCooldown = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch opts.Unconfigured {
	case "":
		opts.Unconfigured = PolicyAllow
	case PolicyAllow, PolicyDeny:
	default:
		return nil, fmt.Errorf("ratelimit: unconfigured policy %q: want allow or deny", opts.Unconfigured)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	l := &Limiter{
		store:   store,
		local:   NewLocalStore(opts.Now),
		opts:    opts,
		breaker: newBreaker(opts.BreakerThreshold, opts.BreakerCooldown, opts.Now),
		log:     opts.Logger,
	}
	l.share.Store(math.Float64bits(opts.LocalShare))
	return l, nil
}

// SetLocalShare changes the fraction of each limit this instance enforces
// under PolicyLocal, for instance when the live instance count changes. It
// applies to the next decision; share must be in (0, 1].
func (l *Limiter) SetLocalShare(share float64) error {
	if !(share > 0 && share <= 1) {
		return fmt.Errorf("ratelimit: local share %v outside (0, 1]", share)
	}
	l.share.Store(math.Float64bits(share))
	return nil
}

// LocalShare returns the fraction of each limit this instance enforces under
// PolicyLocal.
func (l *Limiter) LocalShare() float64 { return math.Float64frombits(l.share.Load()) }

// SetConfig swaps in a new limits snapshot for every later check and forgets
// what the near-cache knew under the old one. The in-process windows keep
// what they hold, as Redis does: a new limit applies to the admissions
// already made. Windows whose size no rule has any more are forgotten.
func (l *Limiter) SetConfig(c *Config) {
	l.cfg.Store(c)
	l.full.Clear()
	l.local.retain(func(k Key, size time.Duration) bool {
		for _, w := range c.Rule(k).Windows {
			if w.Size == size {
				return true
			}
		}
		return false
	})
}

// Config returns the snapshot in force, or nil before the first SetConfig.
func (l *Limiter) Config() *Config { return l.cfg.Load() }

// Loaded reports whether a configuration has been set.
func (l *Limiter) Loaded() bool { return l.cfg.Load() != nil }

// Degraded reports whether checks currently bypass the shared store.
func (l *Limiter) Degraded() bool { return l.breaker.isOpen() }

// Allow checks one request, identified by member (its requestId), against
// every window of key, and records it if admitted. A refusal is a Decision
// with Allowed false, not an error. The error is non-nil only when the store
// failed under PolicyDeny (ErrUnavailable) or ctx ended.
func (l *Limiter) Allow(ctx context.Context, key Key, member string) (Decision, error) {
	start := l.opts.Now()
	cfg := l.cfg.Load()
	if cfg == nil && l.opts.Unconfigured == PolicyDeny {
		return Decision{Key: key}, fmt.Errorf("%w: no limits loaded yet", ErrUnavailable)
	}
	rule := cfg.Rule(key)
	var end time.Time
	d, err := l.decide(ctx, key, rule, member, start, &end)
	if err != nil {
		return d, err
	}
	if !d.Allowed && rule.Shadow {
		d.Allowed, d.Shadow = true, true
	}
	if end.IsZero() {
		end = l.opts.Now()
	}
	l.opts.Observer.Decided(d, end.Sub(start))
	return d, nil
}

// decide takes the decision for Allow. When the store answered, it sets *end
// to the time read right after the answer (one clock read serves the mirror
// and the elapsed time).
func (l *Limiter) decide(ctx context.Context, key Key, rule Rule, member string, now time.Time, end *time.Time) (Decision, error) {
	if rule.IsUnlimited() {
		return Decision{Key: key, Allowed: true, Limit: Unlimited, Remaining: Unlimited, Source: SourceUnlimited}, nil
	}
	if rule.IsClosed() {
		for _, w := range rule.Windows {
			if w.Limit == 0 {
				return Decision{Key: key, Limit: 0, Window: w.Size, RetryAfter: w.Size, Source: SourceClosed}, nil
			}
		}
	}
	if !l.opts.DisableNearCache && !rule.Shadow {
		if v, ok := l.full.Load(key); ok {
			e := v.(nearEntry)
			if wait := e.until.Sub(now); wait > 0 {
				return Decision{Key: key, Limit: e.limit, Window: e.window, Count: e.count, RetryAfter: wait, Source: SourceNearCache}, nil
			}
			l.full.CompareAndDelete(key, v)
		}
	}
	if l.breaker.allow() {
		windows, owed := rule.Windows, []int64(nil)
		if l.tracksLocal(rule) && l.local.mayHaveUnshared(now) {
			var refused *Decision
			if windows, owed, refused = l.owed(key, rule, now); refused != nil {
				l.breaker.abandon()
				return *refused, nil
			}
		}
		cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		res, err := l.store.Check(cctx, key, windows, member)
		cancel()
		if err == nil {
			*end = l.opts.Now()
			if l.breaker.success() {
				l.log.Warn("limiter store answers again; back to shared windows", "key", key.String())
			}
			d := decision(key, rule, res, SourceRedis)
			if owed != nil {
				d.Count += owed[res.Window]
				d.Remaining = max(d.Limit-d.Count, 0)
			}
			if d.Allowed && l.tracksLocal(rule) {
				// Stamped after the answer: Redis admitted no later, so the
				// mirrored entry leaves its window no earlier than Redis's.
				l.local.mirror(key, rule.Windows, l.LocalShare(), member, *end, res.Duplicate)
			}
			if !d.Allowed && !l.opts.DisableNearCache && !rule.Shadow {
				l.full.Store(key, nearEntry{until: now.Add(d.RetryAfter), limit: d.Limit, window: d.Window, count: d.Count})
			}
			return d, nil
		}
		if ctx.Err() != nil {
			l.breaker.abandon()
			return Decision{Key: key}, ctx.Err()
		}
		l.opts.Observer.StoreFailed(key, err)
		if l.breaker.failure() {
			l.log.Warn("limiter store failing; degraded decisions until it answers", "policy", string(l.opts.Policy), "key", key.String(), "err", err)
		}
	}
	return l.degraded(key, rule, member)
}

func (l *Limiter) degraded(key Key, rule Rule, member string) (Decision, error) {
	l.log.Debug("degraded limiter decision", "policy", string(l.opts.Policy), "key", key.String())
	switch l.opts.Policy {
	case PolicyAllow:
		w := rule.Windows[0]
		return Decision{Key: key, Allowed: true, Limit: w.Limit, Window: w.Size, Source: SourceFailOpen}, nil
	case PolicyDeny:
		return Decision{Key: key}, ErrUnavailable
	}
	scaled := l.scaled(rule.Windows)
	res := l.local.check(key, scaled, member, l.opts.Now(), !rule.Shadow)
	return decision(key, Rule{Windows: scaled}, res, SourceLocal), nil
}

// tracksLocal reports whether the in-process windows of rule must follow
// what Redis admits: only under PolicyLocal, the one policy that reads them,
// and not for shadow rules, which admit everything anyway. (Unlimited and
// closed rules never reach the store.)
func (l *Limiter) tracksLocal(rule Rule) bool {
	return l.opts.Policy == PolicyLocal && !rule.Shadow
}

// owed is for the first checks on Redis after a failover, while admissions
// decided in process are still inside their windows: Redis does not hold
// them. It returns the windows to ask Redis with, each limit lowered by the
// admissions that all instances are estimated to have made in process and
// that are still in the window, this instance's own divided by its share
// (the instances fail over together under balanced load: the assumption
// of the share itself), and those estimates. When an estimate alone fills
// a window, refused is the refusal, decided without asking Redis.
func (l *Limiter) owed(key Key, rule Rule, now time.Time) (windows []Window, owed []int64, refused *Decision) {
	counts, waits := l.local.unshared(key, rule.Windows, now)
	some := false
	for _, c := range counts {
		some = some || c > 0
	}
	if !some {
		return rule.Windows, nil, nil
	}
	windows = make([]Window, len(rule.Windows))
	for i, w := range rule.Windows {
		o := int64(float64(counts[i])/l.LocalShare() + 0.5)
		counts[i] = o
		windows[i] = Window{Limit: w.Limit - o, Size: w.Size}
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

func decision(key Key, rule Rule, res StoreResult, src Source) Decision {
	w := rule.Windows[res.Window]
	d := Decision{
		Key:        key,
		Allowed:    res.Allowed,
		Limit:      w.Limit,
		Window:     w.Size,
		Count:      res.Count,
		Remaining:  max(w.Limit-res.Count, 0),
		RetryAfter: res.RetryAfter,
		Source:     src,
		Duplicate:  res.Duplicate,
	}
	return d
}

// Release gives back the slot member holds in every window of key, in the
// shared store and in the local fallback. The pay flow calls it when a
// request was admitted but the channel was never called.
func (l *Limiter) Release(ctx context.Context, key Key, member string) error {
	rule := l.cfg.Load().Rule(key)
	if rule.IsUnlimited() || rule.IsClosed() {
		return nil
	}
	_ = l.local.Release(ctx, key, rule.Windows, member)
	l.full.Delete(key)
	l.opts.Observer.Released(key)
	if !l.breaker.allow() {
		return ErrUnavailable
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	if err := l.store.Release(cctx, key, rule.Windows, member); err != nil {
		l.breaker.failure()
		return fmt.Errorf("ratelimit: release %s: %w", key, err)
	}
	l.breaker.success()
	return nil
}

// Usage returns the current occupancy of each window of key, read from the
// shared store, with the rule in force. It is for reports, not the pay path.
func (l *Limiter) Usage(ctx context.Context, key Key) (Rule, []int64, error) {
	rule := l.cfg.Load().Rule(key)
	if rule.IsUnlimited() {
		return rule, nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	counts, err := l.store.Usage(cctx, key, rule.Windows)
	return rule, counts, err
}

// Ping reports whether the shared store answers.
func (l *Limiter) Ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	return l.store.Ping(cctx)
}

type nopObserver struct{}

func (nopObserver) Decided(Decision, time.Duration) {}
func (nopObserver) Released(Key)                    {}
func (nopObserver) StoreFailed(Key, error)          {}
