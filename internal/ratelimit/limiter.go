// Package ratelimit limits calls to payment channels with exact sliding
// windows kept in Redis: one sorted set per bizType+channel window, whose
// members are requestIds and whose scores are Redis time, checked and updated
// by one atomic Lua call (the Redis store: redisstore, which implements
// Store). The rules are written once, in Model (model.go), and every store
// is property-tested against it.
//
// Limiter puts two wrappers around the store: the near-cache (near_cache.go),
// which answers a saturated key without a store call, and degraded mode
// (degraded.go), which keeps the limiter answering when Redis fails.
// Its callers call it directly: a refused request that asks to may wait for
// room (wait.go), checks before the first limits document can be refused
// (Options.NotLoaded), and the checks of named callers are told to an
// observer (Options.Checks).
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"payserver/internal/breaker"
)

// ErrUnavailable is returned by Allow when the store fails and the policy is
// PolicyDeny.
var ErrUnavailable = errors.New("ratelimit: limiter store unavailable")

// ErrNotLoaded is returned by Release and ReleaseAmount for a hold whose
// windows are unknown before the first limits document is loaded: there
// is nothing yet to tell which windows hold its member, so the release is
// not made (a caller that owes it keeps it).
var ErrNotLoaded = errors.New("ratelimit: no limits loaded yet to find a hold's windows")

// Options configures a Limiter. The zero value of each field selects the
// documented default.
type Options struct {
	// Timeout bounds each store call. Default 50ms. A call that times out
	// after it may have reached Redis is retried once, with the same member
	// (so it is never counted twice), under RetryTimeout.
	Timeout time.Duration
	// RetryTimeout bounds the retry of a call whose outcome is unknown.
	// Default 4 × Timeout.
	RetryTimeout time.Duration
	// Policy applies while the store fails. Default PolicyLocal.
	Policy Policy
	// LocalShare is the fraction of each limit this instance enforces under
	// PolicyLocal, in (0, 1]: 1/instance count. Default 1. SetLocalShare
	// changes it live.
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
	// Now is the clock for local windows, the near-cache and waiting.
	// Default time.Now.
	Now func() time.Time
	// NotLoaded, when set, makes the error that Check and Peek answer,
	// consuming nothing, until the first SetConfig: payserver serves no
	// payment and no acquisition before its first limits document
	// (fail-safe start), whatever the limiter would answer for a key it
	// knows no rule of. Nil (the default) leaves every key unlimited until
	// then.
	NotLoaded func() error
	// MaxWaiters bounds the requests waiting for room (Request.MaxWait)
	// for one key on this instance, its merchants' queues included; past
	// it a request is refused at once.
	// Default DefaultMaxWaiters.
	MaxWaiters int
	// WaitObserver is told how each wait ended; nil means nobody.
	WaitObserver WaitObserver
	// Checks is told how each Check of a request that names its Caller
	// ended; nil means nobody.
	Checks CheckObserver
}

// CheckObserver is told how each Check of a request that names its caller
// (Request.Caller) ended: once per call, after any wait, with the decision
// and the error the caller got. A check refused before the first limits
// document (Options.NotLoaded) is not told. It is called on the request
// path and must not block.
type CheckObserver interface {
	Checked(r Request, d Decision, err error)
}

// Limiter checks requests against the current Config. It is safe for
// concurrent use.
type Limiter struct {
	store   Store
	names   func(KeyWindow) string // the store's names of its windows
	local   *fallback
	opts    Options
	breaker *breaker.Breaker
	log     *slog.Logger
	near    nearCache
	// reg is what is still to register in a store that keeps the windows
	// each key has had (RunWindowRegistry).
	reg   registration
	waits *waiter
	// holds is the Observer as a HoldObserver; nil when it is not one.
	holds HoldObserver

	limits atomic.Pointer[limits]
	share  atomic.Uint64 // math.Float64bits of the local share in force
}

// limits is one Config in force and its version, which counts SetConfig
// calls from 1; name is its version in decisions (Decision.LimitsVersion),
// keys the store's names of its windows and localKeys the in-process
// store's (Decision.WindowKeys).
type limits struct {
	cfg *Config
	// prev is the Config in force before cfg: a hold with unknown windows
	// is released from its windows too (release).
	prev      *Config
	version   uint64
	name      string
	keys      windowNames
	localKeys windowNames
}

// New returns a Limiter over store. It enforces nothing until SetConfig.
func New(store Store, opts Options) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("ratelimit: nil store")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.RetryTimeout <= 0 {
		opts.RetryTimeout = 4 * opts.Timeout
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
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.MaxWaiters < 0 {
		return nil, errors.New("ratelimit: negative MaxWaiters")
	}
	if opts.MaxWaiters == 0 {
		opts.MaxWaiters = DefaultMaxWaiters
	}
	l := &Limiter{
		store:   store,
		names:   storeNamer(store),
		local:   newFallback(opts.Now),
		opts:    opts,
		breaker: breaker.New(breaker.Options{Failures: opts.BreakerThreshold, Cooldown: opts.BreakerCooldown, Now: opts.Now}),
		log:     opts.Logger,
		holds:   holdObserver(opts.Observer),
	}
	l.waits = newWaiter(l.checkOnce, waitOptions{maxWaiters: opts.MaxWaiters, observer: opts.WaitObserver, now: opts.Now})
	l.reg.wake = make(chan struct{}, 1)
	l.limits.Store(&limits{})
	l.share.Store(math.Float64bits(opts.LocalShare))
	return l, nil
}

// SetConfig swaps in a new limits snapshot, with a new version, for every
// later check. Nothing decided under an older version refuses a request
// under this one: the near-cache serves one version only, and a refusal
// that was in flight across the change is decided again. The in-process
// windows keep what they hold, as Redis does: a new limit applies to the
// admissions already made. Windows that no rule or schedule has any more
// are forgotten. The decisions taken under c carry its version
// (Decision.LimitsVersion).
func (l *Limiter) SetConfig(c *Config) {
	next := &limits{cfg: c, name: limitsVersion(c), keys: namesOf(c, l.names), localKeys: namesOf(c, WindowKey)}
	for {
		old := l.limits.Load()
		next.version, next.prev = old.version+1, old.cfg
		if l.limits.CompareAndSwap(old, next) {
			break
		}
	}
	l.near.clear()
	if _, ok := l.store.(WindowRegistry); ok {
		// A release with unknown windows, on any instance, finds the
		// windows of next.prev and c there (RunWindowRegistry).
		l.reg.queue(next.prev, c, l.opts.Now())
	}
	// next.keys names every window c can check; each merchant's use of one
	// goes with it.
	l.local.retain(next.keys.checks)
}

// Config returns the snapshot in force, or nil before the first SetConfig.
func (l *Limiter) Config() *Config { return l.limits.Load().cfg }

// loaded reports whether a configuration has been set.
func (l *Limiter) loaded() bool { return l.Config() != nil }

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

// Request is one request to check: a member (its requestId) of a key, and
// what it pays. A request without an amount (Amount 0) passes amount
// windows uncounted.
type Request struct {
	Key      Key
	Member   string
	Amount   int64 // minor units
	Currency string
	// Merchant is the merchant the request is made for; windows with
	// merchant limits (Rule.Merchants) count a request that names none as
	// NoMerchant.
	Merchant string
	// MaxWait is how long a refused request may wait for room (cut to
	// MaxWaitCap); 0 refuses at once.
	MaxWait time.Duration
	// Caller names who asks, for Options.Checks (POST /pay's own checks
	// are counted beside the limits service's clients); "" is told to
	// nobody. It changes no decision.
	Caller string
	// Regardless counts the member in every window whatever their limits,
	// learned limits and reservations, a closed key's included: for a
	// payment a channel reported paid after its order ended, money that
	// moved under the slot. Only a conflict (the member held for another
	// amount) still refuses.
	Regardless bool
	// Holding, when set, is called before any decision but the three
	// that can never hold a slot (the near-cache's refusal, a closed key's,
	// an unlimited key's): before the shared store is asked, and before a
	// decision while it is out (the in-process fallback, or the policy).
	// It is called synchronously on the caller's goroutine, and again
	// while the request waits for room or meets a limits change; observers
	// must neither keep nor call it. The pay flow keeps the request on
	// disk from then until its claim (pay's Ledger).
	Holding func()
}

// Allow checks a request without an amount. See Check.
func (l *Limiter) Allow(ctx context.Context, key Key, member string) (Decision, error) {
	return l.Check(ctx, Request{Key: key, Member: member})
}

// Check checks one request, identified by its member (its requestId),
// against every window that applies to it, atomically: its key's, and its
// channel-wide key's ("*:CHANNEL"), with the rules in force now (schedules
// included), and records it if admitted. A refusal is a Decision with
// Allowed false, not an error. A request with a maximum wait
// (Request.MaxWait) that is refused waits its turn for room (wait.go). The
// error is non-nil only when the store failed under PolicyDeny
// (ErrUnavailable), ctx ended, or no SetConfig came yet and
// Options.NotLoaded is set (its error). Before the first SetConfig every
// key is otherwise unlimited.
func (l *Limiter) Check(ctx context.Context, r Request) (Decision, error) {
	if err := l.notLoaded(); err != nil {
		return Decision{Key: r.Key}, err
	}
	d, err := l.waits.run(ctx, r)
	if r.Caller != "" && l.opts.Checks != nil {
		l.opts.Checks.Checked(r, d, err)
	}
	return d, err
}

// notLoaded is Options.NotLoaded's error before the first SetConfig, else
// nil.
func (l *Limiter) notLoaded() error {
	if l.opts.NotLoaded == nil || l.loaded() {
		return nil
	}
	return l.opts.NotLoaded()
}

// Waiters returns how many requests wait for room now, over every key.
func (l *Limiter) Waiters() int { return l.waits.total() }

// checkOnce decides r at once: Check without the wait.
func (l *Limiter) checkOnce(ctx context.Context, r Request) (Decision, error) {
	start := l.opts.Now()
	lim := l.limits.Load()
	p := newPlan(lim.cfg, r, start)
	var end time.Time
	d, err := l.decide(ctx, lim, p, r, start, &end)
	if err == nil && !d.Allowed && !d.Unknown && d.Source == SourceRedis {
		if now := l.limits.Load(); now.version != lim.version {
			// The limits changed while Redis decided: decide again under
			// the new ones (the member was not recorded: it was refused).
			lim = now
			p = newPlan(lim.cfg, r, l.opts.Now())
			d, err = l.decide(ctx, lim, p, r, l.opts.Now(), &end)
		}
	}
	d.LimitsVersion = lim.name
	if err != nil {
		if l.holds != nil && errors.Is(err, ErrUnavailable) {
			l.holds.Unavailable(r, start)
		}
		return d, err
	}
	if !d.Allowed && !d.Conflict && p.shadow {
		d.Allowed, d.Shadow = true, true
		unrecorded(&d, start)
	}
	d.RequestAmount, d.Currency, d.RequestMerchant = r.Amount, r.Currency, r.Merchant
	if d.DecidedAt.IsZero() {
		d.DecidedAt = time.UnixMicro(start.UnixMicro())
	}
	d.Hold = Hold{Key: r.Key, Member: r.Member, amount: r.Amount}
	if d.Allowed && d.WindowKeys != nil || d.Unknown {
		// An admission's windows; for an unknown outcome, the windows the
		// lost call would have recorded the member in.
		d.Hold.windows = p.windows
	}
	d.Hold.inProcess = d.Allowed && d.Source == SourceLocal && !d.Unknown && d.localOnly
	if end.IsZero() {
		end = l.opts.Now()
	}
	l.opts.Observer.Decided(d, end.Sub(start))
	return d, nil
}

// decide takes the decision for Check under one limits version. When the
// store answered, it sets *end to the time read right after the answer (one
// clock read serves the copy of the admission and the elapsed time).
func (l *Limiter) decide(ctx context.Context, lim *limits, p plan, r Request, now time.Time, end *time.Time) (Decision, error) {
	if len(p.windows) == 0 {
		d := Decision{Key: r.Key, Allowed: true, Limit: Unlimited, Remaining: Unlimited, Source: SourceUnlimited}
		unrecorded(&d, now)
		return d, nil
	}
	if i := p.closed(); i >= 0 {
		return p.closedDecision(lim.cfg, r, i, now), nil
	}
	useNear := !l.opts.DisableNearCache && !p.shadow && !r.Regardless
	if useNear {
		if d, ok := l.near.refusal(r.Key, p.merchant, lim.version, now); ok {
			return d, nil
		}
	}
	if r.Holding != nil {
		r.Holding()
	}
	if !l.breaker.Allow() {
		return l.decideDegraded(lim, p, r)
	}
	epoch := l.near.epoch(r.Key.Channel)
	d, err := l.onRedis(ctx, lim, p, r, now, end)
	if err != nil {
		return d, err
	}
	if d.Allowed && d.Source == SourceRedis {
		d.WindowKeys = p.windowKeys(lim.keys, l.names)
	}
	if useNear && !d.Allowed && !d.Conflict && !d.Unknown && d.Source == SourceRedis && !d.Amount {
		// A count window stays full for every request of the key until its
		// retry-after, or until a schedule changes a rule; an amount window
		// may still take a smaller amount. An unknown outcome is its own
		// member's, never another request's answer; a merchant's full use
		// refuses that merchant's requests only (remembered as the
		// merchant's).
		if next := p.nextChange(lim.cfg, r.Key, now); !next.IsZero() && next.Sub(now) < d.RetryAfter {
			d.RetryAfter = next.Sub(now)
		}
		l.near.remember(d, lim.version, epoch, now)
	}
	return d, nil
}

// Release gives back the slot h holds: its member leaves every window that
// recorded it (the hold's, whatever the limits say now), and every window
// the limits in force give its key now (those of the rules in force and of
// the base rules, should a schedule have switched since), in the shared
// store and in the local fallback. A hold whose windows are unknown also
// leaves the windows the limits in force before gave its key, and those
// the shared store registered for it (window_registry.go: every document
// any instance loaded, while its windows may hold a member). The pay flow calls it only when no
// channel call can happen for the request.
func (l *Limiter) Release(ctx context.Context, h Hold) error {
	_, err := l.release(ctx, h, false)
	return err
}

// ReleaseHeld is Release, and reports whether some window held h's member:
// the shared store's or, in process, this instance's own. held is false
// when no window of them held it (the member was never admitted, or was
// released before, or its record was swept after its window passed), and
// when the key has no window. On an error, held is false and says nothing:
// the shared store's part is unknown (the in-process windows have given
// the member back all the same).
func (l *Limiter) ReleaseHeld(ctx context.Context, h Hold) (held bool, err error) {
	return l.release(ctx, h, false)
}

// ReleaseAmount gives back what h's member paid in amount windows, keeping
// its place in count windows: for a payment the channel declined, which
// used a call but moved no money. The windows are Release's.
func (l *Limiter) ReleaseAmount(ctx context.Context, h Hold) error {
	_, err := l.release(ctx, h, true)
	return err
}

// release gives back h (its amounts only, when amountsOnly) and reports
// whether some window held its member: see ReleaseHeld.
func (l *Limiter) release(ctx context.Context, h Hold, amountsOnly bool) (bool, error) {
	key, member := h.Key, h.Member
	if !h.Known() && !l.loaded() {
		return false, ErrNotLoaded
	}
	lim := l.limits.Load()
	windows := releaseWindows(lim.cfg, key, l.opts.Now(), amountsOnly, h.merchant)
	if h.Known() {
		windows = unionWindows(h.held(amountsOnly), windows)
	} else if lim.prev != nil {
		// Its member may have been admitted under the document before
		// (a limits-API acquisition released just after a change that
		// moved its calendar window): released from that one's windows
		// too, it is left in none.
		windows = unionWindows(windows, releaseWindows(lim.prev, key, l.opts.Now(), amountsOnly, h.merchant))
	}
	if !h.Known() {
		// And every window a document gave its key that may still hold
		// it: one loaded before this instance started, or replaced
		// since the one before.
		var err error
		if windows, err = l.registered(ctx, key, windows, amountsOnly); err != nil {
			// Nothing released: a retry finds the member where it is.
			return false, err
		}
	}
	if h.ownKey {
		windows = h.ownKeyWindows(windows)
	}
	if len(windows) == 0 {
		return false, nil
	}
	held := false
	if h.ownRecord && !h.inProcess {
		held, _ = l.local.ReleaseIfAmount(ctx, windows, member, h.amount) // a LocalStore always answers
	} else {
		held, _ = l.local.Release(ctx, windows, member) // a LocalStore always answers
	}
	if !amountsOnly {
		// Its channel-wide windows may have room for other keys too.
		// Forgotten once the store has released (or failed to), so that no
		// refusal decided before the room was made is remembered after the
		// sweep. Amounts given back make no room in count windows, the only
		// refusals the near-cache keeps.
		defer l.near.forgetChannel(key.Channel)
	}
	l.opts.Observer.Released(key)
	if l.holds != nil {
		l.holds.ReleasedHold(h, amountsOnly, l.opts.Now())
	}
	if h.inProcess {
		return held, nil // the shared store never recorded this admission
	}
	if !l.breaker.Allow() {
		return false, ErrUnavailable
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	var found bool
	var err error
	if h.ownRecord {
		found, err = l.store.ReleaseIfAmount(cctx, windows, member, h.amount)
	} else {
		found, err = l.store.Release(cctx, windows, member)
	}
	if err != nil {
		l.breaker.Failure()
		return false, fmt.Errorf("ratelimit: release %s: %w", key, err)
	}
	l.breaker.Success()
	return held || found, nil
}

// Usage returns the current use of each window of key (its own windows, not
// its channel-wide key's), read from the shared store, with the rule in
// force. It consumes nothing.
func (l *Limiter) Usage(ctx context.Context, key Key) (Rule, []int64, error) {
	rule := l.Config().RuleAt(key, l.opts.Now())
	if rule.IsUnlimited() {
		return rule, nil, nil
	}
	windows := make([]KeyWindow, len(rule.Windows))
	for i, w := range rule.Windows {
		windows[i] = KeyWindow{Key: key, Window: w}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	counts, err := l.store.Usage(cctx, windows)
	return rule, counts, err
}

// InProcessUsage returns the use of each window of key (its own windows,
// with the rule in force) in this instance's in-process windows: the
// admissions decided here while the shared store failed, and the copies of
// this instance's shared admissions in sliding count windows. What an
// instance holds that the shared store does not.
func (l *Limiter) InProcessUsage(key Key) []int64 {
	rule := l.Config().RuleAt(key, l.opts.Now())
	if rule.IsUnlimited() {
		return nil
	}
	counts, _ := l.local.Usage(context.Background(), KeyWindows(key, rule.Windows)) // a LocalStore always answers
	return counts
}

// DecidedInProcess returns, for each window of rule on key (in its order),
// the use by admissions this instance decided in process while the shared
// store failed that the window still holds: in a calendar window, those
// since its period began. The shared store does not hold them, so its use
// (Usage) leaves them out. Zero when the instance never decided in
// process; nil for an unlimited rule.
func (l *Limiter) DecidedInProcess(key Key, rule Rule) []int64 {
	if rule.IsUnlimited() {
		return nil
	}
	uses, _ := l.local.LocalOnly(KeyWindows(key, rule.Windows), l.opts.Now())
	return uses
}

// Ping reports whether the shared store answers.
func (l *Limiter) Ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	return l.store.Ping(cctx)
}

// Peek reports whether r would be admitted now, without recording
// anything: every window that applies to it (its key's and its channel-wide
// key's, with the rules in force) has room for its weight. The Decision's
// Windows hold each window's use now, its binding window is the first that
// has no room (else the one with the least room left), and its RetryAfter
// is zero: a peek does not look for when room comes. No member is given, so
// a retry of an admitted requestId is not recognised: a held member peeks
// as a new one. A peek records nothing: its AdmittedAt is zero and its
// WindowKeys nil, whatever it answers. Learned limits apply as in Check
// (Decision.Learned); reading them is a second store call when some
// window learns and the store is a Learner. Before the first SetConfig it
// answers Options.NotLoaded's error, when set, as Check does.
func (l *Limiter) Peek(ctx context.Context, r Request) (Decision, error) {
	if err := l.notLoaded(); err != nil {
		return Decision{Key: r.Key}, err
	}
	now := l.opts.Now()
	lim := l.limits.Load()
	p := newPlan(lim.cfg, r, now)
	if len(p.windows) == 0 {
		return Decision{Key: r.Key, Allowed: true, Limit: Unlimited, Remaining: Unlimited, Source: SourceUnlimited, LimitsVersion: lim.name}, nil
	}
	if i := p.closed(); i >= 0 {
		d := p.closedDecision(lim.cfg, r, i, now)
		d.LimitsVersion = lim.name
		return d, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	uses, err := l.store.Usage(cctx, p.windows)
	if err != nil {
		return Decision{Key: r.Key}, err
	}
	res := StoreResult{Allowed: true, Counts: uses, Window: -1}
	if res.Limits, err = l.peekLearned(cctx, p.windows); err != nil {
		return Decision{Key: r.Key}, err
	}
	limitOf := func(i int) int64 {
		if res.Limits != nil {
			return res.Limits[i]
		}
		return p.windows[i].Limit
	}
	for i, w := range p.windows {
		if w.Track != TrackNone {
			continue // a reservation's use: never refuses
		}
		fits := uses[i]+w.Weight(r.Amount) <= limitOf(i)-w.unmet(uses, limitOf(i))
		switch {
		case !fits && res.Allowed:
			res.Allowed, res.Window = false, i
		case res.Allowed && (res.Window < 0 || limitOf(i)-uses[i] < limitOf(res.Window)-uses[res.Window]):
			res.Window = i
		}
	}
	res.Count = uses[res.Window]
	d := p.decision(r.Key, res, SourceRedis)
	if !d.Allowed && p.shadow {
		d.Allowed, d.Shadow = true, true
	}
	d.LimitsVersion = lim.name
	return d, nil
}

// peekLearned returns the effective limit of each of windows now, as
// StoreResult.Limits gives them (nil when no learned limit is below its
// window's limit), read with a second store call when some window learns
// and the store is a Learner.
func (l *Limiter) peekLearned(ctx context.Context, windows []KeyWindow) ([]int64, error) {
	learner, ok := l.store.(Learner)
	if !ok {
		return nil, nil
	}
	ws := learningOnly(windows)
	if len(ws) == 0 {
		return nil, nil
	}
	learned, err := learner.Learned(ctx, ws)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, ll := range learned {
		for i, w := range windows {
			if !w.Learns() || idOf(w) != idOf(KeyWindow{Key: ll.Key, Window: ll.Window}) || ll.Limit >= w.Limit {
				continue
			}
			if out == nil {
				out = make([]int64, len(windows))
				for j, o := range windows {
					out[j] = o.Limit
				}
			}
			out[i] = ll.Limit
		}
	}
	return out, nil
}
