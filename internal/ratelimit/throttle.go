package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Throttled tells the limiter that the channel throttled the call h was
// admitted for, with the channel's retry-after (zero when it gave none):
// each learning window h was admitted into (its key's and its channel-wide
// key's sliding count windows whose rules learn, as the limits in force
// now give them; all of the key's when h does not know its windows) drops
// its learned limit to a fraction of what it admitted, and admits nothing
// until the retry-after has passed (learned.go). Call it before releasing
// h's slot, so that the throttled call counts among what the channel was
// sent.
//
// The shared store learns in one atomic call at its own time, and every
// instance applies what it learned in its next check. The in-process
// fallback learns too, on its own windows (this instance's admissions), so
// that a throttle during an outage is not lost to degraded decisions. A
// Store that is not a Learner learns nothing. The error is ErrUnavailable
// while the breaker is open, or the store's.
func (l *Limiter) Throttled(ctx context.Context, h Hold, retryAfter time.Duration) error {
	retryAfter = min(max(retryAfter, 0), MaxThrottleWait)
	cfg, now := l.Config(), l.opts.Now()
	windows := learningWindows(cfg, h, now)
	if len(windows) == 0 {
		return nil
	}
	_ = l.local.Throttle(ctx, windows, retryAfter) // a LocalStore always answers (nil)
	learner, ok := l.store.(Learner)
	if !ok {
		return nil
	}
	if !l.breaker.Allow() {
		return ErrUnavailable
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	if err := learner.Throttle(cctx, windows, retryAfter); err != nil {
		l.breaker.Failure()
		return fmt.Errorf("ratelimit: throttle %s: %w", h.Key, err)
	}
	l.breaker.Success()
	if l.holds != nil {
		l.holds.Throttled(h, retryAfter, cfg.Version, now)
	}
	return nil
}

// ThrottleKey records in m a throttle by the channel at now, with its
// retry-after, of a call admitted for member of key under cfg: on the
// learning windows of key and, when it counts there, of its channel-wide
// key, as cfg gives them at now (Limiter.Throttled with a hold that does
// not know its windows). A replay of the decision log learns with it what
// the store learned.
func (m *Model) ThrottleKey(cfg *Config, key Key, member string, now time.Time, retryAfter time.Duration) {
	m.Throttle(learningWindows(cfg, Hold{Key: key, Member: member}, now), now, retryAfter)
}

// MaxThrottleWait is the longest retry-after a throttle is honoured for
// (Limiter.Throttled cuts a longer one to it): it bounds how long a
// learned limit admits nothing, and how far back a replay of the decision
// log must start to see every throttle still in force (Rule.LearnedReach).
const MaxThrottleWait = time.Hour

// learningWindows returns the learning windows of h's key and, when it
// counts there, its channel-wide key, under cfg at now; only those h was
// admitted into when it knows its windows.
func learningWindows(cfg *Config, h Hold, now time.Time) []KeyWindow {
	p := newPlan(cfg, Request{Key: h.Key, Member: h.Member}, now)
	var held map[windowID]bool
	if h.Known() {
		held = make(map[windowID]bool, len(h.windows))
		for _, w := range h.windows {
			held[idOf(w)] = true
		}
	}
	var out []KeyWindow
	for _, w := range p.windows {
		if w.Learns() && (held == nil || held[idOf(w)]) {
			w.Reserved, w.OwnReserve = nil, 0
			out = append(out, w)
		}
	}
	return out
}

// Learned returns the learned limits in force of key's own windows (its
// rule in force now; a channel-wide key's are its own), read from the
// shared store: for GET /limits. None when the store is not a Learner.
func (l *Limiter) Learned(ctx context.Context, key Key) ([]LearnedLimit, error) {
	windows := ownLearningWindows(key, l.Config().RuleAt(key, l.opts.Now()))
	learner, ok := l.store.(Learner)
	if !ok || len(windows) == 0 {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	return learner.Learned(cctx, windows)
}

// ownLearningWindows returns key's own windows under rule that learn.
func ownLearningWindows(key Key, rule Rule) []KeyWindow {
	var windows []KeyWindow
	for i, w := range rule.Windows {
		if kw := (KeyWindow{Key: key, Window: w, Learn: rule.learning(i)}); kw.Learns() {
			windows = append(windows, kw)
		}
	}
	return windows
}

// ResetLearned forgets the learned limits of key's own sliding count
// windows (under its base rule and every schedule's, learning or not), in
// the shared store and in the in-process fallback: its windows go back to
// their configured limits at once.
func (l *Limiter) ResetLearned(ctx context.Context, key Key) error {
	cfg := l.Config()
	windows := resetWindows(cfg, key)
	if len(windows) == 0 {
		return nil
	}
	now := l.opts.Now()
	_ = l.local.ResetLearned(ctx, windows) // a LocalStore always answers (nil)
	l.local.forgetLearned(windows)
	// Refusals by the learned limits must not outlive them.
	defer l.near.forgetChannel(key.Channel)
	learner, ok := l.store.(Learner)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
	defer cancel()
	if err := learner.ResetLearned(cctx, windows); err != nil {
		return fmt.Errorf("ratelimit: reset learned limits of %s: %w", key, err)
	}
	if l.holds != nil {
		l.holds.LearnedReset(key, cfg.Version, now)
	}
	return nil
}

// resetWindows are the windows whose learned limits a reset of key forgets
// under cfg: key's own sliding count windows under its base rule and every
// schedule's, learning or not.
func resetWindows(cfg *Config, key Key) []KeyWindow {
	var windows []KeyWindow
	seen := map[windowID]bool{}
	add := func(r Rule) {
		for _, w := range r.Windows {
			// Default learning, whatever the rule says: a window whose
			// rule stopped learning may still hold a learned limit.
			kw := KeyWindow{Key: key, Window: w, Learn: Adaptive{}.learning(w)}
			if kw.Learns() && !seen[idOf(kw)] {
				seen[idOf(kw)] = true
				windows = append(windows, kw)
			}
		}
	}
	if cfg != nil {
		add(cfg.Rules[key])
		for _, sc := range cfg.Schedules {
			if sc.Key == key {
				add(sc.Rule)
			}
		}
	}
	return windows
}

// ResetKeyLearned forgets in m the learned limits a reset of key under cfg
// forgets (Limiter.ResetLearned).
func (m *Model) ResetKeyLearned(cfg *Config, key Key) {
	m.ResetLearned(resetWindows(cfg, key))
}
