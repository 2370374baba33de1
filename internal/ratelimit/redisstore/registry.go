package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
)

// The windows each key has had (ratelimit.WindowRegistry): one sorted set
// per key, of its windows' names scored by when they were last in force.

// registryHorizon is how long a registered window is kept: the longest
// retention (a calendar month's).
const registryHorizon = 33 * 24 * time.Hour

// retention is how long after a window was last in force it may still
// hold a member admitted then: its size for a sliding window, the longest
// period (a DST day, a 31-day month) with a margin for a calendar window.
func retention(w ratelimit.Window) time.Duration {
	switch {
	case !w.IsCalendar():
		return w.Size
	case w.Calendar.Unit == ratelimit.CalendarMonth:
		return registryHorizon
	default:
		return 26 * time.Hour
	}
}

// registryKey is the Redis key of the windows k has had: in k's hash slot,
// ending ":#windows" (no window key has a ':' after its ID, and ":#" is the
// mark of the hashes of a window's members' amounts, which every reader of
// windows skips).
func (s *Store) registryKey(k ratelimit.Key) string {
	return s.prefix + "{" + k.Channel + "}:" + k.BizType + ":#windows"
}

// RegisterWindows implements ratelimit.WindowRegistry: it records each key's windows (their names,
// ratelimit.WindowKey) with
// at as the time they were last in force, and drops what is past
// registryHorizon.
func (s *Store) RegisterWindows(ctx context.Context, byKey map[ratelimit.Key][]ratelimit.KeyWindow, at time.Time) error {
	if len(byKey) == 0 {
		return nil
	}
	score := float64(at.UnixMicro())
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, ws := range byKey {
			if len(ws) == 0 {
				continue
			}
			rk := s.registryKey(k)
			zs := make([]redis.Z, len(ws))
			for i, w := range ws {
				zs[i] = redis.Z{Score: score, Member: ratelimit.WindowKey(w)}
			}
			p.ZAdd(ctx, rk, zs...)
			p.ZRemRangeByScore(ctx, rk, "-inf", fmt.Sprint(at.Add(-registryHorizon).UnixMicro()))
			p.Expire(ctx, rk, registryHorizon)
		}
		return nil
	})
	return err
}

// RegisteredWindows implements ratelimit.WindowRegistry: the windows
// recorded for keys that may still
// hold a member: last in force no longer ago than their retention.
func (s *Store) RegisteredWindows(ctx context.Context, keys []ratelimit.Key, now time.Time) ([]ratelimit.KeyWindow, error) {
	cmds := make([]*redis.ZSliceCmd, len(keys))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.ZRangeWithScores(ctx, s.registryKey(k), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []ratelimit.KeyWindow
	for _, c := range cmds {
		for _, z := range c.Val() {
			name, _ := z.Member.(string)
			w, err := ratelimit.ParseWindowKey(name)
			if err != nil {
				continue // not a name this version writes
			}
			if time.UnixMicro(int64(z.Score)).Add(retention(w.Window)).Before(now) {
				continue
			}
			out = append(out, w)
		}
	}
	return out, nil
}
