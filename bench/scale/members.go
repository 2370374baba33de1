package main

import (
	"fmt"
	"slices"
	"time"

	"payserver/bench/internal/redisinfo"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"

	"github.com/redis/go-redis/v9"
)

// checkAmount is what every check of the tables pays: 10.00 CNY.
const checkAmount = 1000

// goal is the most cost(largest) ÷ cost(smallest) the members table aims
// for.
const goal = 1.5

// kind is one kind of window of the members table.
type kind struct {
	name string
	code string // the channel code's start
	// entry is the window's entry in the limits document with limit l (a
	// count, or an amount in minor units).
	entry func(l int64) string
	// weight is what one check adds to the window's use.
	weight int64
}

// kinds are the windows of the members table: a day long (or a calendar
// day whose period ends half a day from now), so that no member leaves
// while the run lasts.
func kinds() []kind {
	cutoff := calendarCutoff()
	return []kind{
		{"sliding count 1d", "CNT", func(l int64) string { return fmt.Sprintf("{limit: %d, window: 1d}", l) }, 1},
		{"sliding amount 1d", "AMT", func(l int64) string { return fmt.Sprintf("{amount: %d, window: 1d}", l) }, checkAmount},
		{"calendar day count", "DAY", func(l int64) string {
			return fmt.Sprintf("{limit: %d, calendar: day, zone: UTC, cutoff: %q}", l, cutoff)
		}, 1},
	}
}

// cutoff is a time of day at which calendar day and month periods (UTC)
// change about 12 hours from now, so never while the run lasts.
func cutoff() time.Duration {
	return time.Duration((time.Now().UTC().Hour()+12)%24) * time.Hour
}

// calendarCutoff is cutoff as the limits document writes it.
func calendarCutoff() string { return fmt.Sprintf("%02d:00", int(cutoff()/time.Hour)) }

// member is the i-th member of a series tagged tag: 20 bytes, like a
// requestId.
func member(tag string, i int) string { return fmt.Sprintf("%s-%0*d", tag, 19-len(tag), i) }

// document parses a limits document of the given "KEY: ENTRY" lines.
func document(lines ...string) (*ratelimit.Config, error) {
	doc := "limits:\n"
	for _, l := range lines {
		doc += "  " + l + "\n"
	}
	d, err := limits.Parse([]byte(doc))
	if err != nil {
		return nil, err
	}
	return d.Config, nil
}

func (b *bench) setConfig(cfg *ratelimit.Config) {
	b.unbatched.SetConfig(cfg)
	b.coalesced.SetConfig(cfg)
}

// memory is what filling one window took in Redis.
type memory struct {
	kind    string
	members int
	// usage is MEMORY USAGE of the window's keys (the sorted set or hash,
	// and a sliding amount window's amounts hash); identity, for a sliding
	// count window, the MEMORY USAGE of the hashes holding its members'
	// amounts, per member.
	usage, identity float64
	// used is the used_memory delta; keys the keys added (DBSIZE).
	used, keys int64
	// fill is how long the fill took.
	fill time.Duration
}

func (b *bench) members() error {
	fmt.Println("== 1. check cost against members already in the window")
	fmt.Printf("One key with one window, filled through the coalescing store (%d callers, up to 128 members per script call) with 20-byte members of %d minor units each.\n", fillCallers, checkAmount)
	fmt.Println("refused: the limit equals the window's use, so every check is refused and the window keeps its members. admitted: the limit is twice")
	fmt.Println("the members and checks; the admitted members are released, unmeasured, after every max(1, members/10) checks (unbatched) or")
	fmt.Println("max(4 x callers, members/10) checks (coalesced), so the window never holds more than that many members above its size.")
	fmt.Printf("%d checks per row; client = Limiter.Check p50 and p99; Redis = the script commands' usec (INFO commandstats) per check.\n", b.o.checks)
	fmt.Println()
	fmt.Println("| window | members | outcome | mode | client p50 µs | client p99 µs | Redis µs/check | checks/call |")
	fmt.Println("|---|---:|---|---|---:|---:|---:|---:|")
	type at struct {
		kind, outcome, mode string
		members             int
	}
	got := map[at]point{}
	var mems []memory
	for _, k := range kinds() {
		for _, n := range b.o.sizes {
			mem, pts, err := b.membersPoint(k, n)
			if err != nil {
				return fmt.Errorf("%s, %d members: %w", k.name, n, err)
			}
			mems = append(mems, mem)
			for _, p := range pts {
				got[at{k.name, p.outcome, p.mode, n}] = p.point
				fmt.Printf("| %s | %d | %s | %s | %s | %s | %.1f | %.1f |\n", k.name, n, p.outcome, p.mode, us(p.p50), us(p.p99), p.redisUs, p.perCall)
			}
		}
	}
	lo, hi := slices.Min(b.o.sizes), slices.Max(b.o.sizes)
	if hi != lo {
		fmt.Println()
		for _, k := range kinds() {
			for _, outcome := range []string{"refused", "admitted"} {
				for _, m := range b.modes() {
					a, z := got[at{k.name, outcome, m.name, lo}], got[at{k.name, outcome, m.name, hi}]
					r := z.redisUs / a.redisUs
					verdict := "met"
					if r > goal {
						verdict = "MISSED"
					}
					fmt.Printf("RATIO cost(%d) / cost(%d) members, %s, %s, %s: Redis µs/check %.2f (goal <= %.1f: %s), client p50 %.2f\n",
						hi, lo, k.name, outcome, m.name, r, goal, verdict, float64(z.p50)/float64(a.p50))
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("Redis memory per member, measured right after the fill: MEMORY USAGE (SAMPLES 0) of the window's keys (a sliding amount window's amounts hash")
	fmt.Println("included), the hashes of its members' amounts a sliding count window keeps beside it (one per slice of admission time), and the used_memory delta over the fill (the honest figure).")
	fmt.Println()
	fmt.Println("| window | members | MEMORY USAGE B/member | + amounts' hashes B/member | used_memory delta B/member | Redis keys added | fill s |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, m := range mems {
		id := "-"
		if m.identity > 0 {
			id = fmt.Sprintf("%.1f", m.identity)
		}
		fmt.Printf("| %s | %d | %.1f | %s | %.1f | %d | %.1f |\n", m.kind, m.members, m.usage, id, float64(m.used)/float64(m.members), m.keys, m.fill.Seconds())
	}
	return nil
}

// measured is one row of the members table.
type measured struct {
	outcome, mode string
	point
}

// fillCallers fill a window through the coalescing store: twice its
// largest batch, so that every script call carries a full one.
const fillCallers = 256

// membersPoint fills a fresh window of kind k with n members, measures its
// memory and the checks against it, and deletes it.
func (b *bench) membersPoint(k kind, n int) (memory, []measured, error) {
	key := ratelimit.Key{BizType: "SCALE", Channel: fmt.Sprintf("%s%d", k.code, n)}
	roomy, err := document(fmt.Sprintf("%s: %s", key, k.entry(2*int64(n+b.o.checks)*k.weight)))
	if err != nil {
		return memory{}, nil, err
	}
	full, err := document(fmt.Sprintf("%s: %s", key, k.entry(int64(n)*k.weight)))
	if err != nil {
		return memory{}, nil, err
	}
	defer b.deleteChannel(key.Channel)
	windows := ratelimit.KeyWindows(key, roomy.Rules[key].Windows)
	mem := memory{kind: k.name, members: n}
	used0, keys0, err := b.redisMemory()
	if err != nil {
		return mem, nil, err
	}
	start := time.Now()
	if err := b.fill(windows, n); err != nil {
		return mem, nil, err
	}
	mem.fill = time.Since(start)
	used1, keys1, err := b.redisMemory()
	if err != nil {
		return mem, nil, err
	}
	mem.used, mem.keys = used1-used0, keys1-keys0
	if err := b.memoryUsage(windows[0], n, &mem); err != nil {
		return mem, nil, err
	}
	var out []measured
	err = b.outcomes(full, roomy, n, func(tag string, i int) ratelimit.Request {
		return ratelimit.Request{Key: key, Member: member(tag, i), Amount: checkAmount, Currency: "CNY"}
	}, func(outcome string, m mode, p point) error {
		out = append(out, measured{outcome, m.name, p})
		return nil
	})
	return mem, out, err
}

// outcomes measures the checks req makes under full (every one refused)
// and then under roomy (every one admitted), in every mode, against a
// window of n members, and passes each row to row. req gets a tag that
// makes each row's members its own.
func (b *bench) outcomes(full, roomy *ratelimit.Config, n int, req func(tag string, i int) ratelimit.Request, row func(outcome string, m mode, p point) error) error {
	for _, phase := range []struct {
		outcome string
		cfg     *ratelimit.Config
	}{{"refused", full}, {"admitted", roomy}} {
		b.setConfig(phase.cfg)
		for mi, m := range b.modes() {
			tag := fmt.Sprintf("%c%d", phase.outcome[0], mi)
			p, err := b.measure(series{lim: m.lim, n: b.o.checks, callers: m.callers, admit: phase.outcome == "admitted", chunk: m.chunk(n),
				req: func(i int) ratelimit.Request { return req(tag, i) }})
			if err != nil {
				return fmt.Errorf("%s, %s: %w", phase.outcome, m.name, err)
			}
			if err := row(phase.outcome, m, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// fill admits members 0..n-1 into windows through the coalescing store.
func (b *bench) fill(windows []ratelimit.KeyWindow, n int) error {
	return parallel(0, n, fillCallers, func(i int) error {
		r, err := b.co.Check(b.ctx, windows, member("req", i), checkAmount)
		if err == nil && !r.Allowed {
			err = fmt.Errorf("fill: member %d refused (%d in the window)", i, r.Count)
		}
		return err
	})
}

// redisMemory returns Redis's used_memory and its number of keys.
func (b *bench) redisMemory() (used, keys int64, err error) {
	if used, err = redisinfo.UsedMemory(b.ctx, b.client); err != nil {
		return 0, 0, err
	}
	keys, err = b.client.DBSize(b.ctx).Result()
	return used, keys, err
}

// memoryUsage reads MEMORY USAGE of w's keys, as the store names them
// (redisstore.Store.RedisKey; a sliding amount window's amounts hash is its key
// with ":v", a sliding count window's hashes of its members' amounts its key
// with ":#~" and a slice number: internal/ratelimit/redisstore/identity.lua).
func (b *bench) memoryUsage(w ratelimit.KeyWindow, n int, mem *memory) error {
	k := b.plain.RedisKey(w)
	keys := []string{k}
	if w.Amount && !w.IsCalendar() {
		keys = append(keys, k+":v")
	}
	for _, key := range keys {
		u, err := b.client.MemoryUsage(b.ctx, key, 0).Result()
		if err != nil {
			return fmt.Errorf("MEMORY USAGE %s: %w", key, err)
		}
		mem.usage += float64(u) / float64(n)
	}
	if w.Amount || w.IsCalendar() {
		return nil
	}
	var sum int64
	var cursor uint64
	for {
		ids, next, err := b.client.Scan(b.ctx, cursor, k+":#~*", 10_000).Result()
		if err != nil {
			return err
		}
		cmds := make([]*redis.IntCmd, len(ids))
		if _, err := b.client.Pipelined(b.ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.MemoryUsage(b.ctx, id, 0)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("MEMORY USAGE of %s:#~*: %w", k, err)
		}
		for _, c := range cmds {
			sum += c.Val()
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	mem.identity = float64(sum) / float64(n)
	return nil
}

// deleteChannel deletes every key this run wrote for channel, at once
// (DEL, not UNLINK: the next used_memory reading must not count them).
func (b *bench) deleteChannel(channel string) {
	var cursor uint64
	for {
		keys, next, err := b.client.Scan(b.ctx, cursor, b.prefix+"{"+channel+"}:*", 10_000).Result()
		if err != nil {
			fmt.Printf("warning: scanning %s's keys to delete them: %v\n", channel, err)
			return
		}
		for len(keys) > 0 {
			part := keys[:min(len(keys), 1000)]
			keys = keys[len(part):]
			if err := b.client.Del(b.ctx, part...).Err(); err != nil {
				fmt.Printf("warning: deleting %s's keys: %v\n", channel, err)
				return
			}
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}
