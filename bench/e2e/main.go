// Command e2e holds the Go parts of scripts/bench-e2e.sh (the HTTP load
// itself is wrk with bench/e2e/pay.lua):
//
//	go run ./bench/e2e batching [-addr HOST:PORT] [-callers 64] [-duration 8s] [-rounds 4]
//	go run ./bench/e2e dataaccess [-conns 64] [-duration 4s] [-rounds 3]
//
// -addr defaults to $PAYSERVER_TEST_REDIS_ADDR, which the testenv command
// sets (go run ./internal/testenv/cmd/testenv -services redis -- go run ./bench/e2e ...).
// Each prints its conditions first and last (bench/benchenv); -header=false
// leaves them out, for a script that prints its own.
//
// batching measures limiter checks per second through payserver's Limiter
// on a real Redis with callers concurrent goroutines: the redisstore.Store with
// one EVALSHA per check on the plain go-redis client ("unbatched"), side by
// side with the store as payserver ships it ("batched": the coalescer, one
// script call per batch of a key's concurrent checks), interleaved in rounds so that all see the same machine. Every
// check has a new member on a roomy key (10,000,000 per 1s), so every check
// admits. It prints checks/s, p50/p99/p99.9 and RATIO lines. The run is
// bounded by duration and by -max-checks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/bench/benchenv"
	"payserver/internal/limits"
	"payserver/internal/netaddr"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
)

func main() {
	cmds := map[string]func([]string) error{"batching": batching, "dataaccess": dataAccess}
	if len(os.Args) < 2 || cmds[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench/e2e batching|dataaccess [flags]")
		os.Exit(2)
	}
	if err := cmds[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench/e2e: FAIL:", err)
		os.Exit(1)
	}
}

type side struct {
	name    string
	lim     *ratelimit.Limiter
	key     ratelimit.Key
	checks  int64
	elapsed time.Duration
	lat     []time.Duration
	errs    int64 // failed checks
	other   int64 // checks not decided by Redis (breaker open) or refused
}

func batching(args []string) error {
	fs := flag.NewFlagSet("batching", flag.ExitOnError)
	addr := fs.String("addr", os.Getenv("PAYSERVER_TEST_REDIS_ADDR"), "Redis address (loopback only); default $PAYSERVER_TEST_REDIS_ADDR")
	callers := fs.Int("callers", 64, "concurrent callers")
	duration := fs.Duration("duration", 8*time.Second, "measured time per side, split over the rounds")
	rounds := fs.Int("rounds", 4, "interleaved rounds (unbatched, batched, ...)")
	maxChecks := fs.Int64("max-checks", 5_000_000, "upper bound on checks per round and side")
	target := fs.Float64("target", 2.5, "ratio target batched/unbatched")
	p99Max := fs.Duration("p99-max", 2*time.Millisecond, "batched p99 target")
	only := fs.String("only", "", "run one side only: batched or unbatched (for profiling)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured rounds to this file")
	header := fs.Bool("header", true, "print the conditions (commit, machine, load, what else runs) first and last")
	_ = fs.Parse(args)
	defer conditions(*header, "limiter batching (bench/e2e batching)")()
	if *callers < 1 || *rounds < 1 || *duration <= 0 {
		return errors.New("need -callers >= 1, -rounds >= 1, -duration > 0")
	}
	client, err := dial(*addr)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	made := 0
	mk := func(name string, o redisstore.Options) (*side, error) {
		o.Prefix = "payserver:bench-e2e:"
		st, err := redisstore.New(client, o)
		if err != nil {
			return nil, err
		}
		// A roomy timeout: a loaded machine should show up as latency here,
		// not as degraded (local) decisions.
		lim, err := ratelimit.New(st, ratelimit.Options{Timeout: time.Second})
		if err != nil {
			return nil, err
		}
		made++ // one key per side, so that no two sides share members
		key := ratelimit.Key{BizType: "ROOMY" + strconv.Itoa(made), Channel: "ALIPAY"}
		parsed, err := limits.Parse([]byte(fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 10000000, window: 1s}\n", key.BizType)))
		if err != nil {
			return nil, err
		}
		cfg := parsed.Config
		lim.SetConfig(cfg)
		return &side{name: name, lim: lim, key: key}, nil
	}
	plain, err := mk("unbatched (plain client)", redisstore.Options{})
	if err != nil {
		return err
	}
	// As payserver ships: limiter.coalesce on.
	batched, err := mk("batched (as shipped)", redisstore.Options{Coalesce: true})
	if err != nil {
		return err
	}
	per := *duration / time.Duration(*rounds)
	fmt.Printf("limiter checks through ratelimit.Limiter on Redis %s: %d callers, %d rounds of %v per side, interleaved\n", *addr, *callers, *rounds, per)
	sides := []*side{plain, batched}
	switch *only {
	case "unbatched":
		sides = sides[:1]
	case "batched":
		sides = sides[1:]
	}
	for _, s := range sides { // warm-up: connections, script cache
		measure(ctx, s, *callers, 300*time.Millisecond, *maxChecks, run+"w", false)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	for r := 0; r < *rounds; r++ {
		for _, s := range sides {
			measure(ctx, s, *callers, per, *maxChecks, run+strconv.Itoa(r), true)
		}
	}
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if len(sides) == 1 {
		s := sides[0]
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
		fmt.Printf("  %s: %.0f checks/s, p99 %.3f ms\n", s.name, s.rate(), ms(q(s.lat, 0.99)))
		return nil
	}
	fmt.Printf("  %-26s %12s %9s %9s %9s %7s %9s\n", "", "checks/s", "p50 ms", "p99 ms", "p99.9 ms", "errors", "not-redis")
	for _, s := range sides {
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
		fmt.Printf("  %-26s %12.0f %9.3f %9.3f %9.3f %7d %9d\n", s.name, s.rate(), ms(q(s.lat, 0.50)), ms(q(s.lat, 0.99)), ms(q(s.lat, 0.999)), s.errs, s.other)
	}
	ratio := batched.rate() / plain.rate()
	p99 := q(batched.lat, 0.99)
	verdict := "PASS"
	if ratio < *target || p99 >= *p99Max {
		verdict = "MISS"
	}
	fmt.Printf("RATIO batched/unbatched limiter checks c=%d = %.2f (target >= %.1f, batched p99 %.3f ms < %.0f ms) %s\n",
		*callers, ratio, *target, ms(p99), ms(*p99Max), verdict)
	for _, s := range sides {
		if s.errs > 0 {
			return fmt.Errorf("%s: %d checks failed", s.name, s.errs)
		}
	}
	return nil
}

// measure runs callers goroutines of Allow for d (at most maxChecks) and
// adds to s when record is set.
func measure(ctx context.Context, s *side, callers int, d time.Duration, maxChecks int64, tag string, record bool) {
	var n, errs, other atomic.Int64
	lats := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			member := tag + "-" + strconv.Itoa(c) + "-"
			for i := 0; time.Now().Before(deadline) && n.Add(1) <= maxChecks; i++ {
				t0 := time.Now()
				dec, err := s.lim.Allow(ctx, s.key, member+strconv.Itoa(i))
				lats[c] = append(lats[c], time.Since(t0))
				switch {
				case err != nil:
					errs.Add(1)
				case !dec.Allowed || dec.Source != ratelimit.SourceRedis:
					other.Add(1)
				}
			}
		}(c)
	}
	wg.Wait()
	if !record {
		return
	}
	s.elapsed += time.Since(start)
	for _, l := range lats {
		s.checks += int64(len(l))
		s.lat = append(s.lat, l...)
	}
	s.errs += errs.Load()
	s.other += other.Load()
}

// conditions prints the benchmark's conditions (bench/benchenv) now, and
// again when the function it returns is called; nothing when header is
// false.
func conditions(header bool, title string) func() {
	if !header {
		return func() {}
	}
	r := benchenv.Begin(os.Stdout, title)
	return func() { r.End(os.Stdout) }
}

// dial connects with payserver's own client options (cmd/payserver/app.go),
// to a loopback address only.
func dial(addr string) (*redis.Client, error) {
	if addr == "" {
		return nil, fmt.Errorf("no Redis: -addr, or PAYSERVER_TEST_REDIS_ADDR (the testenv command sets it)")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, err
	}
	if !netaddr.IsLoopback(addr) {
		return nil, fmt.Errorf("-addr %s: loopback only", addr)
	}
	client := redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: 250 * time.Millisecond, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond, ContextTimeoutEnabled: true, PoolSize: 128,
		MinIdleConns: 8, PoolTimeout: 100 * time.Millisecond, MaxRetries: 2,
	})
	if err := client.Ping(context.Background()).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	return client, nil
}

func (s *side) rate() float64 { return float64(s.checks) / s.elapsed.Seconds() }

func q(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
