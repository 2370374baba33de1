package main

import (
	"fmt"
	"strings"

	"payserver/internal/ratelimit"
)

// windowEntries are the windows of the windows table, in the order a key
// gets them: a mix of sliding count and amount windows and calendar ones,
// every one roomy, so that every check is admitted.
func windowEntries() []string {
	c := calendarCutoff()
	return []string{
		"{limit: 10000000, window: 1m}",
		"{amount: 1000000000000, window: 1h}",
		fmt.Sprintf("{limit: 10000000, calendar: day, zone: UTC, cutoff: %q}", c),
		"{limit: 10000000, window: 1h}",
		fmt.Sprintf("{amount: 1000000000000, calendar: day, zone: UTC, cutoff: %q}", c),
		"{limit: 10000000, window: 1d}",
		fmt.Sprintf("{limit: 10000000, calendar: month, zone: UTC, cutoff: %q}", c),
		"{amount: 1000000000000, window: 1d}",
	}
}

func (b *bench) windows() error {
	fmt.Println("== 2. check cost against windows per key")
	fmt.Println("Windows on the key, in this order: count 1m, amount 1h, calendar day count, count 1h, calendar day amount, count 1d, calendar month count,")
	fmt.Println("amount 1d; with a channel-wide key, \"*:CHANNEL\" has the same windows, and one script call checks both keys' windows.")
	fmt.Printf("Every check admitted (roomy limits), paying %d minor units, a new member each; %d checks per row.\n", checkAmount, b.o.checks)
	fmt.Println()
	type config struct {
		n    int
		wide bool
		key  ratelimit.Key
	}
	var configs []config
	var lines []string
	entries := windowEntries()
	for _, n := range []int{1, 2, 4, 8} {
		for _, wide := range []bool{false, true} {
			ch := fmt.Sprintf("WIN%d", n)
			if wide {
				ch += "W"
			}
			c := config{n, wide, ratelimit.Key{BizType: "SCALE", Channel: ch}}
			list := "[" + strings.Join(entries[:n], ", ") + "]"
			lines = append(lines, fmt.Sprintf("%s: %s", c.key, list))
			if wide {
				lines = append(lines, fmt.Sprintf("%q: %s", ratelimit.ChannelWide(ch).String(), list))
			}
			configs = append(configs, c)
			defer b.deleteChannel(ch)
		}
	}
	cfg, err := document(lines...)
	if err != nil {
		return err
	}
	b.setConfig(cfg)
	fmt.Println("| windows on the key | channel-wide key | windows per check | mode | client p50 µs | client p99 µs | Redis µs/check | checks/call |")
	fmt.Println("|---:|---|---:|---|---:|---:|---:|---:|")
	type at struct {
		n    int
		wide bool
		mode string
	}
	got := map[at]point{}
	for _, c := range configs {
		for mi, m := range b.modes() {
			key, tag := c.key, fmt.Sprintf("w%d", mi)
			p, err := b.measure(series{lim: m.lim, n: b.o.checks, callers: m.callers, admit: true,
				req: func(i int) ratelimit.Request {
					return ratelimit.Request{Key: key, Member: member(tag, i), Amount: checkAmount, Currency: "CNY"}
				}})
			if err != nil {
				return fmt.Errorf("%s, %s: %w", c.key, m.name, err)
			}
			got[at{c.n, c.wide, m.name}] = p
			wide, per := "no", c.n
			if c.wide {
				wide, per = "yes", 2*c.n
			}
			fmt.Printf("| %d | %s | %d | %s | %s | %s | %.1f | %.1f |\n", c.n, wide, per, m.name, us(p.p50), us(p.p99), p.redisUs, p.perCall)
		}
	}
	fmt.Println()
	for _, m := range b.modes() {
		one, eight, wide := got[at{1, false, m.name}], got[at{8, false, m.name}], got[at{8, true, m.name}]
		fmt.Printf("RATIO 8 / 1 windows, %s: Redis µs/check %.2f, client p50 %.2f; 8 windows with a channel-wide key of 8 / without: Redis µs/check %.2f\n",
			m.name, eight.redisUs/one.redisUs, float64(eight.p50)/float64(one.p50), wide.redisUs/eight.redisUs)
	}
	return nil
}
