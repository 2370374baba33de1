package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"payserver/internal/ratelimit"
)

// quotaWindows are the rules of the quota measurements: a count-only rule
// as most keys have, the same with money caps (a sliding one and a calendar
// day), and the same with a channel-wide key checked in the same call.
// Limits are so large that every check is admitted: the cost measured is
// the full admission path.
func quotaWindows() map[string][]ratelimit.KeyWindow {
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		sh = time.UTC
	}
	own := ratelimit.Key{BizType: "BENCH", Channel: "QUOTA"}
	count := []ratelimit.Window{{Limit: 1 << 40, Size: time.Second}, {Limit: 1 << 40, Size: time.Minute}}
	money := append(append([]ratelimit.Window(nil), count...),
		ratelimit.Window{Limit: 1 << 50, Size: time.Minute, Amount: true},
		ratelimit.Window{Limit: 1 << 50, Amount: true, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: sh}})
	wide := append(ratelimit.KeyWindows(own, count), ratelimit.KeyWindow{Key: ratelimit.ChannelWide("QUOTA"), Window: count[0]})
	return map[string][]ratelimit.KeyWindow{
		"q-count": ratelimit.KeyWindows(own, count),
		"q-money": ratelimit.KeyWindows(own, money),
		"q-wide":  wide,
	}
}

// quota measures the check cost of money caps and channel-wide keys against
// a count-only rule, in interleaved rounds (redisstore.Store.Check unbatched, one
// EVALSHA per check), and the Redis memory per member of calendar and
// amount windows against a sorted set.
func (b *bench) quota() error {
	ws := quotaWindows()
	names := map[string]string{
		"q-count": "count 1s + 1m (2 windows)",
		"q-money": "count 1s + 1m, amount 1m + amount/day (4 windows)",
		"q-wide":  "count 1s + 1m, channel-wide 1s (3 windows, 2 keys)",
	}
	ids := []string{"q-count", "q-money", "q-wide"}
	if b.only != nil {
		for _, id := range ids {
			b.only[id] = true // -only quota runs them all
		}
	}
	byID := map[string][]result{}
	for round := 0; round < b.o.rounds; round++ {
		for _, id := range ids {
			windows := ws[id]
			keys := make([]string, 0, 2*len(windows))
			for _, w := range windows {
				k := b.store.RedisKey(w)
				keys = append(keys, k, k+":v")
			}
			r, err := b.goRun(contender{id: id, name: names[id], keys: keys, wantCallsPerCheck: 1,
				op: func(ctx context.Context, m string) (bool, error) {
					res, err := b.store.Check(ctx, windows, m, 1234)
					return res.Allowed, err
				}})()
			if err != nil {
				return err
			}
			if r.id != "" {
				byID[id] = append(byID[id], r)
			}
		}
	}
	fmt.Printf("QUOTA check cost, redisstore.Store.Check unbatched, %d callers, median of %d rounds:\n", b.o.conc, b.o.rounds)
	med := map[string]result{}
	for _, id := range ids {
		rs := byID[id]
		if len(rs) == 0 {
			continue
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].rate < rs[j].rate })
		r := rs[len(rs)/2]
		med[id] = r
		fmt.Printf("QUOTA %-8s %-52s %8.0f checks/s  p50 %6.2f ms  p99 %6.2f ms  Redis CPU %5.1f µs/check\n",
			id, names[id], r.rate, ms(r.p50), ms(r.p99), r.srvCPUPerCheck)
	}
	if c, ok := med["q-count"]; ok {
		for _, id := range ids[1:] {
			if r, ok := med[id]; ok {
				fmt.Printf("RATIO %s ÷ q-count: throughput %.2f, Redis CPU per check %.2f\n", id, r.rate/c.rate, r.srvCPUPerCheck/c.srvCPUPerCheck)
			}
		}
	}
	return b.quotaMemory()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quotaMemory fills windows of each kind with 10,000 and 100 members and
// prints MEMORY USAGE per member, the marginal cost of one more member.
func (b *bench) quotaMemory() error {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	day := ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: sh}
	kinds := []struct {
		name string
		w    ratelimit.Window
	}{
		{"sliding count 1d (sorted set)", ratelimit.Window{Limit: 1 << 40, Size: 24 * time.Hour}},
		{"calendar count day (hash)", ratelimit.Window{Limit: 1 << 40, Calendar: day}},
		{"calendar amount day (hash)", ratelimit.Window{Limit: 1 << 50, Amount: true, Calendar: day}},
		{"sliding amount 1d (sorted set + hash)", ratelimit.Window{Limit: 1 << 50, Size: 24 * time.Hour, Amount: true}},
	}
	const memberFmt = "req-%016d" // 20 bytes, like a requestId
	for _, kind := range kinds {
		var sizes [2]int64
		for i, n := range []int{100, 10_000} {
			w := ratelimit.KeyWindow{Key: ratelimit.Key{BizType: "BENCH", Channel: fmt.Sprintf("QMEM%d", n)}, Window: kind.w}
			key := b.store.RedisKey(w)
			keys := []string{key, key + ":v"}
			if err := b.del(keys...); err != nil {
				return err
			}
			// Batches of 100 members per call, as the coalescer sends them.
			for from := 0; from < n; from += 100 {
				for j := from; j < from+100 && j < n; j++ {
					if _, err := b.store.Check(b.ctx, []ratelimit.KeyWindow{w}, fmt.Sprintf(memberFmt, j), 12345); err != nil {
						return err
					}
				}
			}
			for _, k := range keys {
				if u, err := b.client.MemoryUsage(b.ctx, k, 0).Result(); err == nil {
					sizes[i] += u
				}
			}
			if err := b.del(keys...); err != nil {
				return err
			}
		}
		per := float64(sizes[1]-sizes[0]) / (10_000 - 100)
		fmt.Printf("MEM   %-40s 10,000 members: %8d B; marginal %6.1f B/member\n", kind.name, sizes[1], per)
	}
	return nil
}
