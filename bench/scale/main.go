// Command scale prints payserver's cost curves as tables (make
// bench-scale): how the cost of a limiter check, of a limits document and
// of a payment grows with what it scales with.
//
//  1. members: a check against 1k to 1M members already in its window,
//     for a sliding count window, a sliding amount window and a calendar
//     day window; admitted and refused, unbatched and coalesced; with the
//     Redis memory per member.
//  2. windows: a check against 1, 2, 4 and 8 windows on its key, with and
//     without a channel-wide key ("*:CHANNEL") of as many windows beside.
//  3. keys: a limits document of 1k and 10k keys (parse, SetConfig, the
//     parsed config's memory; GET /limits, /dashboard and the reports of a
//     payserver holding it), and the Redis memory of 100k keys that traffic
//     made.
//  4. pay: POST /pay at 1, 2 and 3 instances on one durable MariaDB and one
//     Redis, by scripts/bench-e2e.sh (E2E_SCALE); SCALE_PAY=0 skips it.
//  5. merchants: a check on a key with limits per merchant whose window's
//     members are spread over 1 merchant, over 64 (a coalesced batch's
//     checks are then of distinct merchants, as with more) and over
//     10,000, side by side, with the Redis memory per merchant and per
//     member.
//  6. whatif: the replay of 1M and 10M recorded decisions of one busy key
//     (decisions/s, peak heap), and the decision log's bytes per decision.
//
// Checks go through ratelimit.Limiter as payserver makes them (the plan of
// the rules in force, learning windows included), with the near-cache off
// so that every refusal is Redis's, over a redisstore.Store without coalescing
// ("unbatched": one caller, one script call per check) or with it
// ("coalesced": -callers concurrent callers, the store as shipped). The
// Redis time of a check is the script commands' usec in INFO commandstats
// (EVALSHA and EVAL, whichever the store sends) over the checks, read
// before and after; the client time is Limiter.Check's, p50 and p99.
//
// Usage (make bench-scale runs it under the testenv command, which starts
// the Redis and the durable MariaDB):
//
//	go run ./bench/scale [-only members,windows,keys,pay,merchants] [-sizes 1000,10000,100000,1000000] [-checks 5000] [-merchants 1,64,10000] [-whatif-decisions 1000000]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/bench/benchenv"
	"payserver/bench/internal/redisinfo"
	"payserver/internal/netaddr"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
)

type options struct {
	addr        string
	only        map[string]bool
	sizes       []int
	checks      int
	callers     int
	redisKeys   int
	httpKeys    []int
	payDuration time.Duration
	// merchants are the merchants the merchants table spreads
	// merchantMembers members over, smallest first.
	merchants       []int
	merchantMembers int
	// whatIfDecisions are the recorded decisions the what-if table
	// replays, one run each.
	whatIfDecisions []int
	// whatIfDB is the database the what-if table records into: sqlite,
	// or mariadb (the testenv's durable one when it runs, else its
	// MariaDB).
	whatIfDB string
}

// parts are the tables, in the order they print.
var parts = []string{"members", "windows", "keys", "pay", "merchants", "whatif"}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var o options
	var only, sizes, httpKeys, merchants, whatIfDecisions string
	fs.StringVar(&o.addr, "addr", os.Getenv("PAYSERVER_TEST_REDIS_ADDR"), "Redis address (loopback only); default $PAYSERVER_TEST_REDIS_ADDR")
	fs.StringVar(&only, "only", strings.Join(parts, ","), "the tables to print: "+strings.Join(parts, ", ")+" (SCALE_PAY=0 also leaves out pay)")
	fs.StringVar(&sizes, "sizes", "1000,10000,100000,1000000", "members already in the window (members table)")
	fs.IntVar(&o.checks, "checks", 5000, "checks per measured point and mode")
	fs.IntVar(&o.callers, "callers", 64, "concurrent callers of the coalesced mode")
	fs.IntVar(&o.redisKeys, "redis-keys", 100_000, "distinct keys checked once each for Redis memory per key (keys table)")
	fs.StringVar(&httpKeys, "http-keys", "1000,10000", "keys of the limits documents (keys table; at most 10000, limits.MaxKeys)")
	fs.DurationVar(&o.payDuration, "pay-duration", 10*time.Second, "wrk time per instance count (pay table: E2E_DURATION)")
	fs.StringVar(&merchants, "merchants", "1,64,10000", "merchants the members of the merchants table's window are spread over")
	fs.StringVar(&whatIfDecisions, "whatif-decisions", "1000000", "recorded decisions the what-if table replays (10000000 takes over 25 minutes on 2 cores)")
	fs.IntVar(&o.merchantMembers, "merchant-members", 10_000, "members in the merchants table's window")
	fs.StringVar(&o.whatIfDB, "whatif-db", "sqlite", "the database the what-if table records into: sqlite, or mariadb ($PAYSERVER_TEST_MYSQL_DURABLE_DSN, else $PAYSERVER_TEST_MYSQL_DSN)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.only = map[string]bool{}
	for _, p := range strings.Split(only, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(parts, p) {
			return o, fmt.Errorf("-only %q: want some of %s", p, strings.Join(parts, ","))
		}
		o.only[p] = true
	}
	if os.Getenv("SCALE_PAY") == "0" {
		delete(o.only, "pay")
	}
	var err error
	if o.sizes, err = positiveInts("-sizes", sizes); err != nil {
		return o, err
	}
	if o.httpKeys, err = positiveInts("-http-keys", httpKeys); err != nil {
		return o, err
	}
	if o.merchants, err = positiveInts("-merchants", merchants); err != nil {
		return o, err
	}
	if o.whatIfDecisions, err = positiveInts("-whatif-decisions", whatIfDecisions); err != nil {
		return o, err
	}
	if o.whatIfDB != "sqlite" && o.whatIfDB != "mariadb" {
		return o, fmt.Errorf("-whatif-db %q: want sqlite or mariadb", o.whatIfDB)
	}
	slices.Sort(o.merchants)
	if o.merchantMembers < slices.Max(o.merchants) {
		return o, errors.New("need -merchant-members >= the most -merchants, so that every merchant is in the window")
	}
	if o.checks < 100 || o.callers < 1 || o.redisKeys < 1 || o.payDuration < time.Second {
		return o, errors.New("need -checks >= 100, -callers >= 1, -redis-keys >= 1, -pay-duration >= 1s")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale: FAIL:", err)
		os.Exit(1)
	}
}

// bench is what every table measures with.
type bench struct {
	o      options
	ctx    context.Context
	client *redis.Client
	// prefix starts every Redis key this run writes.
	prefix string
	// plain is the store without coalescing; co is the store as payserver
	// ships it (coalescing concurrent checks of a key).
	plain, co *redisstore.Store
	// unbatched and coalesced are Limiters over plain and co.
	unbatched, coalesced *ratelimit.Limiter
}

func run(o options) error {
	needRedis := o.only["members"] || o.only["windows"] || o.only["keys"] || o.only["merchants"]
	var b *bench
	if needRedis {
		var err error
		if b, err = newBench(o); err != nil {
			return err
		}
		defer b.client.Close()
	}
	env := benchenv.Begin(os.Stdout, "payserver scale curves (bench/scale)")
	if b != nil {
		fmt.Printf("redis:    %s at %s (%s, maxmemory %s)\n", redisinfo.Field(b.ctx, b.client, "server", "redis_version"), o.addr,
			redisinfo.Field(b.ctx, b.client, "server", "redis_mode"), redisinfo.Field(b.ctx, b.client, "memory", "maxmemory_human"))
	}
	fmt.Printf("settings: -only %s -sizes %s -checks %d -callers %d -redis-keys %d -http-keys %s -pay-duration %s -merchants %s -merchant-members %d -whatif-decisions %s\n",
		strings.Join(selected(o.only), ","), joinInts(o.sizes), o.checks, o.callers, o.redisKeys, joinInts(o.httpKeys), o.payDuration, joinInts(o.merchants), o.merchantMembers, joinInts(o.whatIfDecisions))
	steps := []struct {
		name string
		fn   func() error
	}{
		{"members", func() error { return b.members() }},
		{"windows", func() error { return b.windows() }},
		{"keys", func() error { return b.keys() }},
		{"pay", func() error { return pay(o) }},
		{"merchants", func() error { return b.merchants() }},
		{"whatif", func() error { return whatIf(o) }},
	}
	for _, s := range steps {
		if !o.only[s.name] {
			continue
		}
		fmt.Println()
		start := time.Now()
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Printf("(%s took %s)\n", s.name, time.Since(start).Round(time.Second))
	}
	fmt.Println()
	env.End(os.Stdout)
	return nil
}

func newBench(o options) (*bench, error) {
	if o.addr == "" {
		return nil, errors.New("no Redis: -addr, or PAYSERVER_TEST_REDIS_ADDR (make bench-scale starts one with the testenv command)")
	}
	if !netaddr.IsLoopback(o.addr) {
		return nil, fmt.Errorf("-addr %s: loopback only (the run fills and deletes keys)", o.addr)
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{
		// As payserver's own client (cmd/payserver/app.go) but with
		// timeouts a busy machine and MEMORY USAGE of a million members
		// stay within, and no retries, so that errors show.
		Addr: o.addr, PoolSize: 256, DialTimeout: 2 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, PoolTimeout: 30 * time.Second,
		ContextTimeoutEnabled: true, MaxRetries: -1,
	})
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis at %s: %w", o.addr, err)
	}
	b := &bench{o: o, ctx: ctx, client: client, prefix: "payserver:bench-scale:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"}
	var err error
	if b.plain, err = redisstore.New(client, redisstore.Options{Prefix: b.prefix}); err != nil {
		return nil, err
	}
	if b.co, err = redisstore.New(client, redisstore.Options{Prefix: b.prefix, Coalesce: true}); err != nil {
		return nil, err
	}
	for _, st := range []*redisstore.Store{b.plain, b.co} {
		if err := st.Warm(ctx); err != nil {
			return nil, err
		}
	}
	opts := ratelimit.Options{
		// Deny on failure and a roomy timeout, so that a slow or failed
		// call shows as an error, never as a fast local decision; no
		// near-cache, so that every refusal is Redis's.
		Policy: ratelimit.PolicyDeny, Timeout: 5 * time.Second, DisableNearCache: true,
	}
	if b.unbatched, err = ratelimit.New(b.plain, opts); err != nil {
		return nil, err
	}
	if b.coalesced, err = ratelimit.New(b.co, opts); err != nil {
		return nil, err
	}
	return b, b.warm()
}

// warm opens the connections the tables use (a check on 256 callers),
// so that their client buffers are in Redis's used_memory before any
// table reads it.
func (b *bench) warm() error {
	const channel = "WARM"
	defer b.deleteChannel(channel)
	windows := ratelimit.KeyWindows(ratelimit.Key{BizType: "SCALE", Channel: channel}, []ratelimit.Window{{Limit: 1 << 20, Size: time.Minute}})
	return parallel(0, fillCallers, fillCallers, func(i int) error {
		_, err := b.plain.Check(b.ctx, windows, member("warm", i), checkAmount)
		return err
	})
}

func positiveInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s %q: want comma-separated whole numbers of at least 1", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func selected(only map[string]bool) []string {
	var out []string
	for _, p := range parts {
		if only[p] {
			out = append(out, p)
		}
	}
	return out
}
