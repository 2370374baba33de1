package main

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// Documents of the keys table: keysChannels channels, each with a
// channel-wide key and bizTypes B000… of two windows each.
const (
	keysChannels = 100
	keyRule      = "[{limit: 1000, window: 1s}, {amount: 100000000, calendar: day}]"
	wideRule     = "{limit: 100000, window: 1s}"
)

// keysDocument returns a limits document of n keys: per channel C00…C99,
// "*:Cnn" and n/100 - 1 bizTypes.
func keysDocument(n int) []byte {
	var sb strings.Builder
	sb.WriteString("window: 1s\nlimits:\n")
	for c := range keysChannels {
		fmt.Fprintf(&sb, "  \"*:C%02d\": %s\n", c, wideRule)
		for biz := range n/keysChannels - 1 {
			fmt.Fprintf(&sb, "  B%03d:C%02d: %s\n", biz, c, keyRule)
		}
	}
	return []byte(sb.String())
}

// repeats is how many times a step of the keys table is timed; the table
// shows the median.
const repeats = 5

func (b *bench) keys() error {
	fmt.Println("== 3. cost against keys")
	fmt.Printf("A limits document of N keys: %d channels, each with a channel-wide key %s and N/%d - 1 bizTypes of %s.\n", keysChannels, wideRule, keysChannels, keyRule)
	fmt.Printf("limits.Parse and Limiter.SetConfig: median of %d; memory: runtime.MemStats HeapAlloc delta after a GC, the result kept.\n", repeats)
	fmt.Println()
	fmt.Println("| keys | document bytes | limits.Parse ms | parsed config MB | SetConfig ms | SetConfig adds MB |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	for _, n := range b.o.httpKeys {
		if err := b.keysConfig(n); err != nil {
			return fmt.Errorf("%d keys: %w", n, err)
		}
	}
	fmt.Println()
	if err := b.redisKeys(); err != nil {
		return err
	}
	fmt.Println()
	return b.endpoints()
}

// keysConfig prints one row of the document table.
func (b *bench) keysConfig(n int) error {
	doc := keysDocument(n)
	var parsed *limits.Document
	parse := timed(func() error {
		var err error
		parsed, err = limits.Parse(doc)
		return err
	})
	took, err := parse()
	if err != nil {
		return err
	}
	if got := len(parsed.Config.Rules); got != n {
		return fmt.Errorf("the document has %d keys, want %d", got, n)
	}
	parsed = nil
	parsedMB := heapDelta(func() { parsed, _ = limits.Parse(doc) })
	lim, err := ratelimit.New(b.plain, ratelimit.Options{})
	if err != nil {
		return err
	}
	set, _ := timed(func() error { lim.SetConfig(parsed.Config); return nil })()
	fresh, err := ratelimit.New(b.plain, ratelimit.Options{})
	if err != nil {
		return err
	}
	setMB := heapDelta(func() { fresh.SetConfig(parsed.Config) })
	fmt.Printf("| %d | %d | %.1f | %.1f | %.1f | %.1f |\n", n, len(doc), ms(took), parsedMB, ms(set), setMB)
	runtime.KeepAlive(lim)
	runtime.KeepAlive(fresh)
	return nil
}

// timed returns a function that runs fn repeats times and returns the
// median time, or fn's first error.
func timed(fn func() error) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		ts := make([]time.Duration, repeats)
		for i := range ts {
			start := time.Now()
			if err := fn(); err != nil {
				return 0, err
			}
			ts[i] = time.Since(start)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		return ts[repeats/2], nil
	}
}

// heapDelta returns how many MB of heap fn leaves allocated (what it
// keeps must stay reachable after it returns).
func heapDelta(fn func()) float64 {
	var a, z runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.GC()
	runtime.ReadMemStats(&z)
	return float64(int64(z.HeapAlloc)-int64(a.HeapAlloc)) / (1 << 20)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// redisKeys checks -redis-keys distinct keys once each, with two windows,
// and prints the Redis memory they take.
func (b *bench) redisKeys() error {
	n := b.o.redisKeys
	windows := []ratelimit.Window{
		{Limit: 1000, Size: time.Hour},
		{Limit: 100_000_000, Amount: true, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC, Cutoff: cutoff()}},
	}
	const channel = "RK"
	defer b.deleteChannel(channel)
	used0, keys0, err := b.redisMemory()
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(0, n, 64, func(i int) error {
		key := ratelimit.Key{BizType: fmt.Sprintf("K%07d", i), Channel: channel}
		r, err := b.plain.Check(b.ctx, ratelimit.KeyWindows(key, windows), member("rk", i), checkAmount)
		if err == nil && !r.Allowed {
			err = fmt.Errorf("key %s refused", key)
		}
		return err
	})
	if err != nil {
		return err
	}
	took := time.Since(start)
	used1, keys1, err := b.redisMemory()
	if err != nil {
		return err
	}
	fmt.Printf("Redis memory of keys made by traffic: %d distinct keys (BIZTYPE:RK), one admitted check each through the unbatched store on 64 callers (%.0f checks/s),\n",
		n, float64(n)/took.Seconds())
	fmt.Println("two windows each (count 1h, calendar day amount), one member each; redisstore.Store.Check directly, as a limits document holds at most 10,000 keys.")
	fmt.Println()
	fmt.Println("| keys | Redis keys added | used_memory delta MB | B per key |")
	fmt.Println("|---:|---:|---:|---:|")
	fmt.Printf("| %d | %d | %.1f | %.0f |\n", n, keys1-keys0, float64(used1-used0)/(1<<20), float64(used1-used0)/float64(n))
	return nil
}
