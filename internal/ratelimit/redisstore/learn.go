package redisstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"payserver/internal/ratelimit"
)

// learnedKey is the Redis key of the learned limit of the window whose key
// is windowKey: a hash {l, t, nb, e} (ratelimit's learned.go), in the
// window's slot.
func learnedKey(windowKey string) string { return windowKey + ":L" }

// The operations of learnScript.
const (
	learnThrottle = 1
	learnRead     = 2
	learnReset    = 3
)

// Throttle implements ratelimit.Learner with one learnScript call, at
// Redis's time.
func (s *Store) Throttle(ctx context.Context, windows []ratelimit.KeyWindow, retryAfter time.Duration) error {
	nowMicros, _ := s.at()
	_, err := s.learnAt(ctx, nowMicros, learnThrottle, windows, retryAfter)
	return err
}

// Learned implements ratelimit.Learner.
func (s *Store) Learned(ctx context.Context, windows []ratelimit.KeyWindow) ([]ratelimit.LearnedLimit, error) {
	nowMicros, _ := s.at()
	return s.learnAt(ctx, nowMicros, learnRead, windows, 0)
}

// ResetLearned implements ratelimit.Learner.
func (s *Store) ResetLearned(ctx context.Context, windows []ratelimit.KeyWindow) error {
	nowMicros, _ := s.at()
	_, err := s.learnAt(ctx, nowMicros, learnReset, windows, 0)
	return err
}

// learnAt runs learnScript: op on the learning windows of windows, at
// nowMicros (0: Redis TIME), and returns the learned limits in force after
// it.
func (s *Store) learnAt(ctx context.Context, nowMicros int64, op int, windows []ratelimit.KeyWindow, retryAfter time.Duration) ([]ratelimit.LearnedLimit, error) {
	ws := learning(windows)
	if len(ws) == 0 {
		return nil, nil
	}
	keys, args := s.learnCall(nowMicros, op, ws, retryAfter)
	res, err := learnScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	return learnedIn(ws, res)
}

// learning returns the windows of windows that learn.
func learning(windows []ratelimit.KeyWindow) []ratelimit.KeyWindow {
	return slices.DeleteFunc(slices.Clone(windows), func(w ratelimit.KeyWindow) bool { return !w.Learns() })
}

// learnCall returns the keys and arguments of a learnScript call of op on
// ws, learning windows all.
func (s *Store) learnCall(nowMicros int64, op int, ws []ratelimit.KeyWindow, retryAfter time.Duration) ([]string, []any) {
	keys := make([]string, 0, 2*len(ws))
	args := make([]any, 0, 5+5*len(ws))
	args = append(args, nowMicros, op, ttlMargin.Milliseconds(), retryAfter.Microseconds(), len(ws))
	for _, w := range ws {
		k := s.RedisKey(w)
		keys = append(keys, k, learnedKey(k))
		args = append(args, w.Size.Microseconds(), w.Limit, w.Learn.Step, w.Learn.Decrease, w.Learn.Floor)
	}
	return keys, args
}

// learnedIn reads learnScript's reply res for ws: the learned limits in
// force, in ws's order.
func learnedIn(ws []ratelimit.KeyWindow, res []int64) ([]ratelimit.LearnedLimit, error) {
	if len(res) != 1+4*len(ws) {
		return nil, fmt.Errorf("redisstore: learn script replied %d values for %d windows", len(res), len(ws))
	}
	var out []ratelimit.LearnedLimit
	for i, w := range ws {
		r := res[1+4*i : 1+4*(i+1)]
		if r[0] >= 0 {
			out = append(out, ratelimit.ReportLearned(w, r[0], r[1], r[2], r[3], res[0]))
		}
	}
	return out, nil
}

// LearnedOfKeys implements ratelimit.KeysReader: Learned of each group,
// pipelined per node (pipelined).
func (s *Store) LearnedOfKeys(ctx context.Context, groups [][]ratelimit.KeyWindow) ([][]ratelimit.LearnedLimit, []error) {
	nowMicros, _ := s.at()
	ws := make([][]ratelimit.KeyWindow, len(groups))
	for i, g := range groups {
		ws[i] = learning(g)
	}
	cmds := s.pipelined(ctx, learnScript, ws, func(g []ratelimit.KeyWindow) ([]string, []any) {
		return s.learnCall(nowMicros, learnRead, g, 0)
	})
	out, errs := make([][]ratelimit.LearnedLimit, len(groups)), make([]error, len(groups))
	for i, c := range cmds {
		if c == nil {
			continue
		}
		res, err := c.Int64Slice()
		if err == nil {
			out[i], err = learnedIn(ws[i], res)
		}
		errs[i] = err
	}
	return out, errs
}
