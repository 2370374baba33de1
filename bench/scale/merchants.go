package main

import (
	"fmt"
	"time"

	"payserver/internal/ratelimit"
)

// merchantsRun is one row group of the merchants table: a key whose
// window holds the same members, spread over some number of merchants.
type merchantsRun struct {
	merchants int
	key       ratelimit.Key
	// used is the used_memory delta and keys the keys added over the fill;
	// usage the MEMORY USAGE of the window's key, and merchantUsage the mean
	// MEMORY USAGE of a merchant's window key (of up to 100 merchants).
	used, keys, usage int64
	merchantUsage     float64
	got               map[string]point // by outcome and mode
}

// merchantOf is the merchant of the i-th member of a key whose window
// holds n merchants: every merchant has as many members, give or take one.
func merchantOf(i, n int) string { return fmt.Sprintf("M%06d", i%n) }

// merchants measures a check on one key whose window has limits per
// merchant, with its members spread over 1 merchant and over many, side
// by side: the cost of a check and the Redis memory per merchant and per
// member.
func (b *bench) merchants() error {
	fmt.Println("== 5. check cost against merchants active in a window with limits per merchant")
	fmt.Printf("One key with one sliding count window of 1d with perMerchant, filled through the coalescing store (%d callers) with %d 20-byte members\n", fillCallers, b.o.merchantMembers)
	fmt.Println("spread evenly over the merchants (each merchant's use is its own sorted set beside the window's, in the key's hash slot).")
	fmt.Println("Every check names one of those merchants, in turn. refused: perMerchant equals each merchant's use, so the merchant's limit refuses")
	fmt.Println("every check and nothing is recorded; admitted: the window and every merchant have room, and the admitted members are released as in")
	fmt.Printf("table 1. %d checks per row; client = Limiter.Check p50 and p99; Redis = the script commands' usec (INFO commandstats) per check.\n", b.o.checks)
	fmt.Println()
	fmt.Println("| merchants in the window | members | outcome | mode | client p50 µs | client p99 µs | Redis µs/check | checks/call |")
	fmt.Println("|---:|---:|---|---|---:|---:|---:|---:|")
	var runs []merchantsRun
	for _, n := range b.o.merchants {
		r, err := b.merchantsPoint(n)
		if err != nil {
			return fmt.Errorf("%d merchants: %w", n, err)
		}
		runs = append(runs, r)
	}
	if len(runs) > 1 {
		// The most merchants against each fewer: against 1 is the goal's
		// ratio; against as many as the callers, whose batches hold one
		// check per merchant too, it is what the active set alone costs.
		fmt.Println()
		hi := runs[len(runs)-1]
		for _, lo := range runs[:len(runs)-1] {
			for _, outcome := range []string{"refused", "admitted"} {
				for _, m := range b.modes() {
					a, z := lo.got[outcome+"/"+m.name], hi.got[outcome+"/"+m.name]
					r := z.redisUs / a.redisUs
					verdict := "met"
					if r > goal {
						verdict = "MISSED"
					}
					fmt.Printf("RATIO cost(%d) / cost(%d) merchants, %s, %s: Redis µs/check %.2f (goal <= %.1f: %s), client p50 %.2f\n",
						hi.merchants, lo.merchants, outcome, m.name, r, goal, verdict, float64(z.p50)/float64(a.p50))
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("Redis memory, measured right after the fill: the used_memory delta over the fill (the window, the merchants' windows and the hashes of")
	fmt.Println("the members' amounts beside each), per member and per merchant; MEMORY USAGE (SAMPLES 0) of the window's sorted set and of a merchant's (mean of up to 100).")
	fmt.Println()
	fmt.Println("| merchants | members | used_memory delta B/member | used_memory delta B/merchant | window MEMORY USAGE B/member | merchant's window MEMORY USAGE B | Redis keys added |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range runs {
		m := float64(b.o.merchantMembers)
		fmt.Printf("| %d | %d | %.1f | %.1f | %.1f | %.1f | %d |\n", r.merchants, b.o.merchantMembers, float64(r.used)/m, float64(r.used)/float64(r.merchants), float64(r.usage)/m, r.merchantUsage, r.keys)
	}
	if len(runs) > 1 {
		lo, hi := runs[0], runs[len(runs)-1]
		fmt.Printf("MEMORY per merchant beyond the first (same members, %d merchants against %d): %.1f B\n",
			hi.merchants, lo.merchants, float64(hi.used-lo.used)/float64(hi.merchants-lo.merchants))
	}
	return nil
}

// merchantsPoint fills a fresh key with the members spread over n
// merchants, measures its memory and the checks against it, and deletes
// it.
func (b *bench) merchantsPoint(n int) (merchantsRun, error) {
	members := b.o.merchantMembers
	run := merchantsRun{merchants: n, key: ratelimit.Key{BizType: "SCALE", Channel: fmt.Sprintf("MER%d", n)}, got: map[string]point{}}
	key := run.key
	perMerchant := (members + n - 1) / n
	entry := func(per int) string {
		return fmt.Sprintf("%s: {limit: %d, window: 1d, perMerchant: %d}", key, 2*(members+b.o.checks), per)
	}
	// The fill's and the admitted checks' merchant limit: room for the
	// members and every check.
	roomy, err := document(entry(perMerchant + b.o.checks))
	if err != nil {
		return run, err
	}
	full, err := document(entry(members / n))
	if err != nil {
		return run, err
	}
	defer b.deleteChannel(key.Channel)
	used0, keys0, err := b.redisMemory()
	if err != nil {
		return run, err
	}
	b.setConfig(roomy)
	if err := parallel(0, members, fillCallers, func(i int) error {
		d, err := b.coalesced.Check(b.ctx, ratelimit.Request{Key: key, Member: member("req", i), Merchant: merchantOf(i, n)})
		if err == nil && !d.Allowed {
			err = fmt.Errorf("fill: member %d refused (window %s: %d of %d)", i, d.Rule, d.Count, d.Limit)
		}
		return err
	}); err != nil {
		return run, err
	}
	used1, keys1, err := b.redisMemory()
	if err != nil {
		return run, err
	}
	run.used, run.keys = used1-used0, keys1-keys0
	w := roomy.Rules[key].Windows[0]
	if run.usage, err = b.client.MemoryUsage(b.ctx, b.plain.RedisKey(ratelimit.KeyWindow{Key: key, Window: w}), 0).Result(); err != nil {
		return run, fmt.Errorf("MEMORY USAGE of the window: %w", err)
	}
	sample := min(n, 100)
	var sum int64
	for j := range sample {
		mk := b.plain.RedisKey(ratelimit.KeyWindow{Key: ratelimit.MerchantKey(key, merchantOf(j*n/sample, n)), Window: w})
		u, err := b.client.MemoryUsage(b.ctx, mk, 0).Result()
		if err != nil {
			return run, fmt.Errorf("MEMORY USAGE %s: %w", mk, err)
		}
		sum += u
	}
	run.merchantUsage = float64(sum) / float64(sample)
	err = b.outcomes(full, roomy, members, func(tag string, i int) ratelimit.Request {
		return ratelimit.Request{Key: key, Member: member(tag, i), Merchant: merchantOf(i, n)}
	}, func(outcome string, m mode, p point) error {
		if outcome == "refused" {
			if err := b.refusedByMerchant(m.lim, key, n); err != nil {
				return err
			}
		}
		run.got[outcome+"/"+m.name] = p
		fmt.Printf("| %d | %d | %s | %s | %s | %s | %.1f | %.1f |\n", n, members, outcome, m.name, us(p.p50), us(p.p99), p.redisUs, p.perCall)
		return nil
	})
	return run, err
}

// refusedByMerchant checks that a refusal of the merchants table is the
// merchant limit's, not the window's: the table measures the merchant's
// check.
func (b *bench) refusedByMerchant(lim *ratelimit.Limiter, key ratelimit.Key, n int) error {
	d, err := lim.Check(b.ctx, ratelimit.Request{Key: key, Member: member("probe", int(time.Now().UnixNano()%1e9)), Merchant: merchantOf(0, n)})
	switch {
	case err != nil:
		return err
	case d.Allowed || d.Merchant == "":
		return fmt.Errorf("refused phase: a check of %s was allowed %v by %q (merchant %q), want refused by the merchant limit", merchantOf(0, n), d.Allowed, d.Rule, d.Merchant)
	}
	return nil
}
