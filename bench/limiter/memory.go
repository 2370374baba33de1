package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"payserver/internal/ratelimit"
)

// memory fills one window key with 100 and with 10,000 distinct members
// through redisstore.Store.Check (a 1h window, so nothing expires) and prints
// MEMORY USAGE per member.
func (b *bench) memory() error {
	const memberFmt = "req-%016d" // 20 bytes, like a requestId
	w := ratelimit.Window{Limit: 1_000_000, Size: time.Hour}
	type point struct {
		n     int
		bytes int64
	}
	var pts []point
	for _, n := range []int{100, 10_000} {
		k := ratelimit.Key{BizType: "BENCH", Channel: fmt.Sprintf("MEM%d", n)}
		key := b.store.RedisKey(ratelimit.KeyWindow{Key: k, Window: w})
		if err := b.del(key); err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := g; i < n; i += 16 {
					r, err := b.store.Check(b.ctx, ratelimit.KeyWindows(k, []ratelimit.Window{w}), fmt.Sprintf(memberFmt, i), 0)
					if err == nil && !r.Allowed {
						err = fmt.Errorf("fill %s: member %d refused", key, i)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		card, err := b.client.ZCard(b.ctx, key).Result()
		if err != nil {
			return err
		}
		if card != int64(n) {
			return fmt.Errorf("%s holds %d members, want %d", key, card, n)
		}
		used, err := b.client.MemoryUsage(b.ctx, key, 0).Result()
		if err != nil {
			return fmt.Errorf("MEMORY USAGE %s: %w", key, err)
		}
		enc, _ := b.client.ObjectEncoding(b.ctx, key).Result()
		fmt.Printf("MEM   window key with %6d members (20-byte members, %s): MEMORY USAGE %8d B = %6.1f B/member\n",
			n, enc, used, float64(used)/float64(n))
		pts = append(pts, point{n, used})
		if err := b.del(key); err != nil {
			return err
		}
	}
	if len(pts) == 2 {
		d := float64(pts[1].bytes-pts[0].bytes) / float64(pts[1].n-pts[0].n)
		fmt.Printf("MEM   marginal cost of an in-window member: %.1f B (so a window admitting L per period holds about L*%.0f B)\n", d, d)
	}
	return nil
}

// allocs measures heap allocations per check, one caller at a time, with
// members built beforehand so that only the check itself is counted.
func (b *bench) allocs() error {
	n := b.o.allocN
	openKey := ratelimit.Key{BizType: "BENCH", Channel: "AOPEN"}
	limOpen := ratelimit.Key{BizType: "BENCH", Channel: "LOPEN"}
	limFull := ratelimit.Key{BizType: "BENCH", Channel: "LFULL"}
	wOpen := openRule.Windows
	redisKey := b.store.RedisKey(ratelimit.KeyWindow{Key: openKey, Window: wOpen[0]})
	rrLimit := redisRateOpen()
	stubLim, err := ratelimit.New(stubStore{}, ratelimit.Options{Policy: ratelimit.PolicyDeny, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	stubLim.SetConfig(b.lim.Config())
	cases := []struct {
		name string
		keys []string
		fn   func(ctx context.Context, m string) error
	}{
		{"go-redis floor: client.EvalSha(sha, keys, the check scripts' ARGV for one count window) + Int64Slice", []string{redisKey}, func(ctx context.Context, m string) error {
			return b.client.EvalSha(ctx, b.sha, []string{redisKey}, oneCountWindowArgs(openLimit, time.Second, m)...).Err()
		}},
		{"payserver redisstore.Store.Check unbatched", []string{redisKey}, func(ctx context.Context, m string) error {
			_, err := b.store.Check(ctx, ratelimit.KeyWindows(openKey, wOpen), m, 0)
			return err
		}},
		{"payserver redisstore.Store.Check as shipped (coalesced; serial, so one member per call)", []string{redisKey}, func(ctx context.Context, m string) error {
			_, err := b.co.Check(ctx, ratelimit.KeyWindows(openKey, wOpen), m, 0)
			return err
		}},
		{"payserver Limiter.Allow, open (Redis call)", []string{b.store.RedisKey(ratelimit.KeyWindow{Key: limOpen, Window: wOpen[0]})}, func(ctx context.Context, m string) error {
			_, err := b.lim.Allow(ctx, limOpen, m)
			return err
		}},
		{"payserver Limiter.Allow over a no-op store (the Limiter's own cost)", nil, func(ctx context.Context, m string) error {
			_, err := stubLim.Allow(ctx, limOpen, m)
			return err
		}},
		{"payserver Limiter.Allow, saturated (near-cache hit, no Redis call)", []string{b.store.RedisKey(ratelimit.KeyWindow{Key: limFull, Window: wOpen[0]})}, func(ctx context.Context, m string) error {
			d, err := b.lim.Allow(ctx, limFull, m)
			if err == nil && d.Source != ratelimit.SourceNearCache && !strings.HasPrefix(m, "fill-") {
				err = fmt.Errorf("decided by %s, not the near-cache", d.Source)
			}
			return err
		}},
		{"go-redis/redis_rate AllowN", []string{"rate:payserver:bench:rr:alloc"}, func(ctx context.Context, m string) error {
			_, err := b.rr.AllowN(ctx, "payserver:bench:rr:alloc", rrLimit, 1)
			return err
		}},
		{"naive 3 commands", nil, func(ctx context.Context, m string) error {
			_, err := b.naive.Check(ctx, ratelimit.KeyWindows(openKey, wOpen), m, 0)
			return err
		}},
	}
	members := make([]string, n+10)
	for i := range members {
		members[i] = fmt.Sprintf("a-%012d", i)
	}
	fmt.Printf("Allocations per check (one caller, %d checks each, runtime.MemStats; members prebuilt):\n", n)
	for _, c := range cases {
		if err := b.del(c.keys...); err != nil {
			return err
		}
		if strings.Contains(c.name, "near-cache") {
			// Forget what earlier runs left in the near-cache, then fill the
			// window in Redis so that its last refusal is remembered.
			b.lim.SetConfig(b.lim.Config())
			for i := 0; i <= fullLimit; i++ {
				if err := c.fn(b.ctx, fmt.Sprintf("fill-%d", i)); err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
			}
		}
		for i := 0; i < 10; i++ { // warm up: connection, script cache
			if err := c.fn(b.ctx, members[n+i]); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for i := 0; i < n; i++ {
			if err := c.fn(b.ctx, members[i]); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
		runtime.ReadMemStats(&m1)
		fmt.Printf("ALLOC %-75s %5.1f allocs/check %6.0f B/check\n", c.name,
			float64(m1.Mallocs-m0.Mallocs)/float64(n), float64(m1.TotalAlloc-m0.TotalAlloc)/float64(n))
		if err := b.del(c.keys...); err != nil {
			return err
		}
	}
	return nil
}

// stubStore admits everything without any I/O, to isolate the Limiter's own
// allocations from the store's.
type stubStore struct{}

func (stubStore) Check(context.Context, []ratelimit.KeyWindow, string, int64) (ratelimit.StoreResult, error) {
	return ratelimit.StoreResult{Allowed: true, Count: 1}, nil
}
func (stubStore) Release(context.Context, []ratelimit.KeyWindow, string) (bool, error) {
	return false, nil
}
func (stubStore) ReleaseIfAmount(context.Context, []ratelimit.KeyWindow, string, int64) (bool, error) {
	return false, nil
}
func (stubStore) Usage(_ context.Context, ws []ratelimit.KeyWindow) ([]int64, error) {
	return make([]int64, len(ws)), nil
}
func (stubStore) Ping(context.Context) error { return nil }
