package httpapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"payserver/internal/ratelimit"
)

// LearnedSource reads the learned limits in force of keys' windows: what
// the channel's throttles taught the limiter. *ratelimit.Limiter
// implements it.
type LearnedSource interface {
	// Learned reads one key's.
	Learned(ctx context.Context, key ratelimit.Key) ([]ratelimit.LearnedLimit, error)
	// LearnedOf reads those of each of keys, one answer per key in their
	// order; a key none of whose windows learns costs no store call and
	// has none.
	LearnedOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyLearned
}

// learnedTimeout bounds reading every shown key's learned limits for one
// answer; a key not read by then says so in learnedError.
const learnedTimeout = time.Second

// ReadLearned reads the learned limits of every key of keys from src
// within learnedTimeout. It returns nil when src is nil (not wired) or
// there is no document.
func ReadLearned(ctx context.Context, src LearnedSource, cfg *ratelimit.Config, keys []ratelimit.Key) []ratelimit.KeyLearned {
	if src == nil || cfg == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, learnedTimeout)
	defer cancel()
	return src.LearnedOf(ctx, keys)
}

// learnedFor returns the learned limit of w among ls, matched by the
// window's identity (a sliding count window of w's size), or false.
func learnedFor(ls []ratelimit.LearnedLimit, w ratelimit.Window) (ratelimit.LearnedLimit, bool) {
	if w.Amount || w.IsCalendar() {
		return ratelimit.LearnedLimit{}, false
	}
	for _, l := range ls {
		if l.Window.ID() == w.ID() {
			return l, true
		}
	}
	return ratelimit.LearnedLimit{}, false
}

// learnedJSON is a window's learned limit in GET /limits; every field is
// absent when none is in force.
type learnedJSON struct {
	// Learned is the learned value now: it climbs back by a step per
	// window without a throttle.
	Learned *int64 `json:"learned,omitempty"`
	// EffectiveLimit is what the window enforces now: min(limit,
	// learned), 0 until NotBefore.
	EffectiveLimit *int64 `json:"effectiveLimit,omitempty"`
	// LearnedSince is the channel's last throttle.
	LearnedSince string `json:"learnedSince,omitempty"`
	// NotBefore, when set, is the channel's retry-after: the window
	// admits nothing until then.
	NotBefore string `json:"notBefore,omitempty"`
	// LearnedUntil is when the learned limit ends at the latest.
	LearnedUntil string `json:"learnedUntil,omitempty"`
	// ReserveInForce, on a window with reservations whose effective limit
	// is below their sum, is each reservation shrunk to its part of the
	// effective limit: what the window keeps for each name now.
	ReserveInForce map[string]int64 `json:"reserveInForce,omitempty"`
}

// newLearnedJSON describes l at now.
func newLearnedJSON(l ratelimit.LearnedLimit, now time.Time) learnedJSON {
	learned, effective := l.Learned, l.Limit
	out := learnedJSON{Learned: &learned, EffectiveLimit: &effective,
		LearnedSince: formatInstantNano(l.Since), LearnedUntil: formatInstantNano(l.Until)}
	if l.NotBefore.After(now) {
		out.NotBefore = formatInstantNano(l.NotBefore)
	}
	return out
}

func formatInstantNano(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// LearnedText renders the window's learned limit for people, "" when none
// is in force: "learned 70 of 100 since 10:03:17 UTC", with ", nothing
// before 10:03:20 UTC" while the channel's retry-after holds it.
func (w WindowNow) LearnedText() string {
	if w.Learned == nil {
		return ""
	}
	since, err := time.Parse(time.RFC3339Nano, w.LearnedSince)
	if err != nil {
		return ""
	}
	s := fmt.Sprintf("learned %d of %d since %s UTC", min(*w.Learned, w.Limit), w.Limit, since.UTC().Format("15:04:05"))
	if nb, err := time.Parse(time.RFC3339Nano, w.NotBefore); err == nil {
		s += fmt.Sprintf(", nothing before %s UTC", nb.UTC().Format("15:04:05"))
	}
	if len(w.ReserveInForce) > 0 {
		names := slices.Sorted(maps.Keys(w.ReserveInForce))
		for i, name := range names {
			names[i] = fmt.Sprintf("%s: %d", name, w.ReserveInForce[name])
		}
		s += "; kept now for " + strings.Join(names, ", ")
	}
	return s
}
