// Command limiter benchmarks payserver's Redis rate limiter against a real
// Redis, side by side in one run with:
//
//   - redis-benchmark running EVALSHA of the very same Lua script,
//     unpipelined, at the same concurrency (the ceiling for one EVALSHA per
//     check: a C client that costs far less per request than go-redis);
//   - github.com/go-redis/redis_rate/v10 AllowN (GCRA, one EVALSHA);
//   - the naive three-command sliding window (redisstoretest.NaiveStore).
//
// Each contender runs for a fixed duration with the same number of
// concurrent callers against one key, first with a limit so large that
// every check is admitted ("open"), then with a limit of 100 per second that
// refuses almost every check ("saturated"). It prints a table, RATIO lines
// against the targets, Redis CPU per check from INFO commandstats, Redis
// memory per window member, and allocations per check.
//
// A ratio under its target prints MISS but does not fail the run: shared
// 2-core machines are noisy. Any error (Redis unreachable, an error reply,
// redis-benchmark failing) exits non-zero.
//
// Usage (from the module root; make bench does this):
//
//	go run ./bench/limiter [-duration 3s] [-rounds 3] [-concurrency 64] [-addr 127.0.0.1:16379]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"payserver/bench/benchenv"
	"payserver/bench/internal/redisinfo"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/ratelimit/redisstore/redisstoretest"
)

type options struct {
	addr           string
	duration       time.Duration
	warmup         time.Duration
	conc           int
	pool           int
	maxRequests    int
	rounds         int
	allocN         int
	only           string
	skipMemory     bool
	skipAllocs     bool
	scripts        string
	redisBenchmark string
	redisCLI       string
	cpuProfile     string
}

func parseFlags() options {
	var o options
	defAddr := os.Getenv("PAYSERVER_TEST_REDIS_ADDR")
	if defAddr == "" {
		defAddr = "127.0.0.1:16379"
	}
	flag.StringVar(&o.addr, "addr", defAddr, "Redis address (loopback only); default $PAYSERVER_TEST_REDIS_ADDR")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "measured time per contender")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up per contender")
	flag.IntVar(&o.conc, "concurrency", 64, "concurrent callers (goroutines / redis-benchmark -c)")
	flag.IntVar(&o.pool, "pool", 128, "go-redis PoolSize (payserver's own client uses 128); 0 = go-redis default 10*GOMAXPROCS")
	flag.IntVar(&o.maxRequests, "max-requests", 3_000_000, "upper bound on checks per contender")
	flag.IntVar(&o.rounds, "rounds", 3, "run the ratio contenders this many times, interleaved; the table shows medians, RATIO lines the median of paired rounds")
	flag.IntVar(&o.allocN, "alloc-checks", 2000, "serial checks per allocation measurement")
	flag.StringVar(&o.only, "only", "", "comma-separated contender ids to run (see the table); empty = all")
	flag.BoolVar(&o.skipMemory, "skip-memory", false, "skip the MEMORY USAGE measurement")
	flag.BoolVar(&o.skipAllocs, "skip-allocs", false, "skip the allocations-per-check measurement")
	flag.StringVar(&o.scripts, "scripts", "", "directory of the Redis store's Lua scripts, internal/ratelimit/redisstore (default: found from the working directory)")
	flag.StringVar(&o.redisBenchmark, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	flag.StringVar(&o.redisCLI, "redis-cli", "redis-cli", "redis-cli binary")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	flag.Parse()
	return o
}

func main() {
	o := parseFlags()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/limiter: FAIL: -cpuprofile:", err)
			os.Exit(1)
		}
	}
	err := run(o)
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/limiter: FAIL:", err)
		os.Exit(1)
	}
}

// tableOrder is the order of the table's rows.
var tableOrder = []string{
	"co-open", "store-open", "store-open-learn", "rb-open", "rr-open", "naive-open", "limiter-open",
	"co-full", "store-full", "limiter-full", "limiter-merchant-full", "rb-full", "rr-full", "naive-full",
}

// Keys, limits and windows of the two cases.
const (
	benchPrefix = "payserver:bench:rl:"
	openLimit   = limits.MaxLimit // 10M per 1s: every check admitted
	fullLimit   = 100             // 100 per 1s: nearly every check refused
	rbRandRange = 100_000_000     // redis-benchmark -r: members m-<12 digits>
)

var (
	window   = time.Second
	openRule = ratelimit.Rule{Windows: []ratelimit.Window{{Limit: openLimit, Size: window}}}
	fullRule = ratelimit.Rule{Windows: []ratelimit.Window{{Limit: fullLimit, Size: window}}}
	// merchantFullRule leaves the window open and limits each merchant to
	// fullLimit per window: every merchant of limiter-merchant-full is
	// saturated while the key is not.
	merchantFullRule = ratelimit.Rule{Windows: []ratelimit.Window{{Limit: openLimit, Size: window}},
		Merchants: []*ratelimit.Merchants{{PerMerchant: fullLimit}}}
)

// benchMerchants is how many merchants limiter-merchant-full's checks
// are spread over.
const benchMerchants = 8

func redisRateOpen() redis_rate.Limit {
	return redis_rate.Limit{Rate: openLimit, Burst: openLimit, Period: window}
}

type bench struct {
	o      options
	ctx    context.Context
	host   string
	port   string
	client *redis.Client
	store  *redisstore.Store
	// co is the store as payserver ships it: coalesced checks
	// (limiter.coalesce on).
	co    *redisstore.Store
	naive *redisstoretest.NaiveStore
	rr    *redis_rate.Limiter
	lim   *ratelimit.Limiter
	sha   string
	seq   atomic.Uint64
	only  map[string]bool
}

// result is one row of the table.
type result struct {
	id, name string
	checks   uint64
	elapsed  time.Duration
	rate     float64
	p50, p99 time.Duration
	// admitted is the fraction of checks admitted (NaN if unknown).
	admitted float64
	// Redis side, from INFO commandstats and INFO cpu around the run.
	callsPerCheck  float64 // top-level limiter commands per check
	cmdUsPerCheck  float64 // command execution time per check
	evalshaPerCall float64 // cmdstat_evalsha usec_per_call, NaN without EVALSHA
	srvCPUPerCheck float64 // Redis process CPU (user+sys) per check
	cliCPUPerCheck float64 // client process CPU (user+sys) per check
	notes          []string
}

type contender struct {
	id, name string
	keys     []string // Redis keys to clear first
	// op runs one check; it reports whether the check was admitted.
	op func(ctx context.Context, member string) (bool, error)
	// wantCallsPerCheck is the top-level commands one check sends (0: no
	// expectation, as behind the near-cache); a different count means other
	// traffic on the Redis during the run.
	wantCallsPerCheck float64
}

func run(o options) error {
	if o.conc < 1 || o.duration <= 0 || o.maxRequests < o.conc || o.rounds < 1 {
		return errors.New("need -concurrency >= 1, -duration > 0, -max-requests >= concurrency, -rounds >= 1")
	}
	host, port, err := net.SplitHostPort(o.addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", o.addr, err)
	}
	if err := requireLoopback(host); err != nil {
		return err
	}
	for _, bin := range []string{o.redisBenchmark, o.redisCLI} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (Debian package redis-tools): %w", bin, err)
		}
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{
		Addr: o.addr,
		// As payserver's own client (cmd/payserver/app.go), except for
		// timeouts generous enough that a busy 2-core machine does not turn
		// a slow reply into an error, and no retries, so errors show.
		PoolSize:              o.pool,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		PoolTimeout:           5 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	defer client.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err = client.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s unreachable (scripts/bench.sh starts one: internal/testenv): %w", o.addr, err)
	}
	store, err := redisstore.New(client, redisstore.Options{Prefix: benchPrefix})
	if err != nil {
		return err
	}
	co, err := redisstore.New(client, redisstore.Options{Prefix: benchPrefix, Coalesce: true})
	if err != nil {
		return err
	}
	b := &bench{
		o: o, ctx: ctx, host: host, port: port, client: client, store: store, co: co,
		naive: &redisstoretest.NaiveStore{Client: client, Prefix: "payserver:bench:naive:"},
		rr:    redis_rate.NewLimiter(client),
	}
	if o.only != "" {
		b.only = map[string]bool{}
		for _, id := range strings.Split(o.only, ",") {
			b.only[strings.TrimSpace(id)] = true
		}
	}
	b.lim, err = ratelimit.New(co, ratelimit.Options{
		// Deny on failure so that a store error surfaces as an error
		// instead of a fast local decision that would flatter the numbers.
		Policy:  ratelimit.PolicyDeny,
		Timeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	b.lim.SetConfig(&ratelimit.Config{DefaultWindow: window, Rules: map[ratelimit.Key]ratelimit.Rule{
		{BizType: "BENCH", Channel: "LOPEN"}:  openRule,
		{BizType: "BENCH", Channel: "LFULL"}:  fullRule,
		{BizType: "BENCH", Channel: "LMFULL"}: merchantFullRule,
	}})
	if err := b.loadScript(); err != nil {
		return err
	}
	defer b.cleanup()
	b.cleanup()
	env := b.header()

	// The contenders of the ratios run in rounds, interleaved, so that slow
	// drifts in machine load hit them alike; the table shows each one's
	// median round. The Limiter rows run once.
	inRounds := []func() (result, error){
		b.goRun(b.coContender("co-open", "payserver redisstore.Store.Check as shipped (coalesced: 1 EVALSHA per batch)", "COPEN", openRule)),
		b.goRun(b.storeContender("store-open", "payserver redisstore.Store.Check unbatched (1 EVALSHA per check)", "OPEN", openRule)),
		b.goRun(b.learningContender("store-open-learn", "the same, the window learning from throttles (none in force)", "OPENL", openRule)),
		b.rbRun("rb-open", "redis-benchmark EVALSHA same script, -P 1", "RBOPEN", openRule),
		b.goRun(b.rrContender("rr-open", "go-redis/redis_rate v10 AllowN (GCRA)", "open", redisRateOpen())),
		b.goRun(b.naiveContender("naive-open", "naive 3 commands (redisstoretest.NaiveStore)", "OPEN", openRule)),
		b.goRun(b.coContender("co-full", "payserver redisstore.Store.Check as shipped (coalesced: 1 EVALSHA per batch)", "CFULL", fullRule)),
		b.goRun(b.storeContender("store-full", "payserver redisstore.Store.Check unbatched (1 EVALSHA per check)", "FULL", fullRule)),
		b.rbRun("rb-full", "redis-benchmark EVALSHA same script, -P 1", "RBFULL", fullRule),
		b.goRun(b.rrContender("rr-full", "go-redis/redis_rate v10 AllowN (GCRA)", "full", redis_rate.PerSecond(fullLimit))),
		b.goRun(b.naiveContender("naive-full", "naive 3 commands (redisstoretest.NaiveStore)", "FULL", fullRule)),
	}
	once := []func() (result, error){
		b.goRun(b.limiterContender("limiter-open", "payserver Limiter.Allow (near-cache on)", "LOPEN")),
		b.goRun(b.limiterContender("limiter-full", "payserver Limiter.Allow (near-cache on)", "LFULL")),
		b.goRun(b.merchantContender("limiter-merchant-full", fmt.Sprintf("payserver Limiter.Check, %d merchants each at its own limit (near-cache on)", benchMerchants), "LMFULL")),
	}
	byID := map[string][]result{}
	var order []string
	add := func(r result) {
		if r.id == "" {
			return // skipped by -only
		}
		if _, ok := byID[r.id]; !ok {
			order = append(order, r.id)
		}
		byID[r.id] = append(byID[r.id], r)
	}
	for round := 0; round < o.rounds; round++ {
		for _, f := range inRounds {
			r, err := f()
			if err != nil {
				return err
			}
			add(r)
		}
	}
	for _, f := range once {
		r, err := f()
		if err != nil {
			return err
		}
		add(r)
	}
	var rows []result
	for _, id := range tableOrder {
		if rs, ok := byID[id]; ok {
			rows = append(rows, median(rs))
		}
	}

	fmt.Println()
	printTable(rows, o.conc)
	if o.rounds > 1 {
		for _, id := range order {
			if len(byID[id]) < 2 {
				continue
			}
			var s []string
			for _, r := range byID[id] {
				s = append(s, fmt.Sprintf("%.0f", r.rate))
			}
			fmt.Printf("rounds %-12s checks/s: %s (median in table)\n", id, strings.Join(s, ", "))
		}
	}
	fmt.Println()
	printRatios(rows, byID)
	printCPUModel(rows)
	var lua ref
	if b.only == nil {
		if lua, err = b.reference(); err != nil {
			return err
		}
	}
	printServerCPU(rows, lua)
	fmt.Println("(MISS does not fail the run: see docs/PERFORMANCE.md for why a target can miss on a shared 2-core machine.)")

	if b.only == nil || b.only["quota"] {
		fmt.Println()
		if err := b.quota(); err != nil {
			return err
		}
	}
	if !o.skipMemory {
		fmt.Println()
		if err := b.memory(); err != nil {
			return err
		}
	}
	if !o.skipAllocs {
		fmt.Println()
		if err := b.allocs(); err != nil {
			return err
		}
	}
	fmt.Println()
	env.End(os.Stdout)
	return nil
}

func requireLoopback(host string) error {
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("resolve %q: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("-addr host %q resolves to %s: this benchmark only targets loopback addresses", host, ip)
		}
	}
	return nil
}

// loadScript loads benchScript into Redis with redis-cli SCRIPT LOAD, as the
// redis-benchmark contender will call it by SHA, and checks that the SHA is
// the one go-redis computes for the same text.
func (b *bench) loadScript() error {
	scripts, err := findScripts(b.o.scripts)
	if err != nil {
		return err
	}
	src, err := checkScriptSource(scripts, benchScript)
	if err != nil {
		return err
	}
	out, err := exec.Command(b.o.redisCLI, "-h", b.host, "-p", b.port, "SCRIPT", "LOAD", src).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli SCRIPT LOAD: %v: %s", err, out)
	}
	sha := strings.TrimSpace(string(out))
	if want := redis.NewScript(src).Hash(); sha != want || sha != sha1Hex(src) {
		return fmt.Errorf("redis-cli SCRIPT LOAD returned %q, want %s", sha, want)
	}
	b.sha = sha
	// The store should now run by EVALSHA of this SHA without a NOSCRIPT
	// fallback to EVAL. (The text comes from the very source of the script,
	// so this is a sanity check of the plumbing, not the proof.)
	if err := b.client.ConfigResetStat(b.ctx).Err(); err != nil {
		return err
	}
	if _, err := b.store.Check(b.ctx, ratelimit.KeyWindows(ratelimit.Key{BizType: "BENCH", Channel: "PROBE"}, openRule.Windows), "probe", 0); err != nil {
		return fmt.Errorf("redisstore.Store.Check probe: %w", err)
	}
	st, err := redisinfo.CommandStats(b.ctx, b.client)
	if err != nil {
		return err
	}
	if st["evalsha"].Calls == 0 {
		return fmt.Errorf("redisstore.Store.Check sent no EVALSHA (commandstats %v)", st)
	}
	if st["evalsha"].Calls != 1 || st["evalsha"].Failed != 0 || st["eval"].Calls != 0 {
		// Another client may have been busy on this Redis at the same time.
		fmt.Fprintf(os.Stderr, "warning: could not confirm that redisstore.Store.Check ran EVALSHA %s alone (evalsha %+v, eval %+v)\n", sha, st["evalsha"], st["eval"])
	}
	return nil
}

// header prints the run's conditions (bench/benchenv: commit, machine,
// load, what else runs), the Redis and the settings, and returns the Run
// whose End closes the report.
func (b *bench) header() *benchenv.Run {
	rbVersion, _ := exec.Command(b.o.redisBenchmark, "--version").Output()
	env := benchenv.Begin(os.Stdout, "payserver limiter micro-benchmarks (bench/limiter)")
	fmt.Printf("redis: redis-server %s (%s, io-threads %s) at %s; %s\n",
		redisinfo.Field(b.ctx, b.client, "server", "redis_version"), redisinfo.Field(b.ctx, b.client, "server", "redis_mode"),
		b.client.ConfigGet(b.ctx, "io-threads").Val()["io-threads"], b.o.addr, strings.TrimSpace(string(rbVersion)))
	pool := strconv.Itoa(b.o.pool)
	if b.o.pool == 0 {
		pool = fmt.Sprintf("default (%d)", 10*runtime.GOMAXPROCS(0))
	}
	fmt.Printf("settings: %d concurrent callers, %s measured + %s warm-up per contender, one key per contender, "+
		"window %s, open limit %d, saturated limit %d; go-redis PoolSize %s\n",
		b.o.conc, b.o.duration, b.o.warmup, window, openLimit, fullLimit, pool)
	fmt.Printf("script: %s from internal/ratelimit/redisstore (what the Redis store's Check runs for these one-window keys), SHA %s (loaded with redis-cli SCRIPT LOAD)\n", benchScript, b.sha)
	return env
}

func (b *bench) skip(id string) bool { return b.only != nil && !b.only[id] }

func (b *bench) storeContender(id, name, channel string, rule ratelimit.Rule) contender {
	k := ratelimit.Key{BizType: "BENCH", Channel: channel}
	return contender{
		id: id, name: name, keys: []string{b.store.RedisKey(ratelimit.KeyWindow{Key: k, Window: rule.Windows[0]})}, wantCallsPerCheck: 1,
		op: func(ctx context.Context, m string) (bool, error) {
			r, err := b.store.Check(ctx, ratelimit.KeyWindows(k, rule.Windows), m, 0)
			return r.Allowed, err
		},
	}
}

// learningContender is storeContender with its window learning from the
// channel's throttles (the default for a sliding count window), no learned
// limit in force: the cost of the adaptive rule on the check, side by side
// with storeContender's window that does not learn (adaptive: off).
func (b *bench) learningContender(id, name, channel string, rule ratelimit.Rule) contender {
	c := b.storeContender(id, name, channel, rule)
	k := ratelimit.Key{BizType: "BENCH", Channel: channel}
	ws := ratelimit.KeyWindows(k, rule.Windows)
	for i := range ws {
		ws[i].Learn = ratelimit.Learning{Step: max(1, ws[i].Limit/20), Decrease: ratelimit.DefaultDecrease, Floor: max(1, ws[i].Limit/100)}
	}
	c.op = func(ctx context.Context, m string) (bool, error) {
		r, err := b.store.Check(ctx, ws, m, 0)
		return r.Allowed, err
	}
	return c
}

// coContender is storeContender on the store as payserver ships it. Its
// Redis calls per check are below 1 (one call per batch), so they are not
// checked.
func (b *bench) coContender(id, name, channel string, rule ratelimit.Rule) contender {
	c := b.storeContender(id, name, channel, rule)
	k := ratelimit.Key{BizType: "BENCH", Channel: channel}
	c.wantCallsPerCheck = 0
	c.op = func(ctx context.Context, m string) (bool, error) {
		r, err := b.co.Check(ctx, ratelimit.KeyWindows(k, rule.Windows), m, 0)
		return r.Allowed, err
	}
	return c
}

func (b *bench) limiterContender(id, name, channel string) contender {
	k := ratelimit.Key{BizType: "BENCH", Channel: channel}
	rule := b.lim.Config().RuleAt(k, time.Now())
	return contender{
		id: id, name: name, keys: []string{b.store.RedisKey(ratelimit.KeyWindow{Key: k, Window: rule.Windows[0]})},
		op: func(ctx context.Context, m string) (bool, error) {
			d, err := b.lim.Allow(ctx, k, m)
			if err == nil && d.Source != ratelimit.SourceRedis && d.Source != ratelimit.SourceNearCache {
				err = fmt.Errorf("limiter decided from %q, not Redis", d.Source)
			}
			return d.Allowed, err
		},
	}
}

// merchantContender checks key BENCH:channel through the Limiter, each
// check naming one of benchMerchants merchants (by its member's last
// byte), and requires every refusal to be a merchant's limit's.
func (b *bench) merchantContender(id, name, channel string) contender {
	k := ratelimit.Key{BizType: "BENCH", Channel: channel}
	rule := b.lim.Config().RuleAt(k, time.Now())
	keys := []string{b.store.RedisKey(ratelimit.KeyWindow{Key: k, Window: rule.Windows[0]})}
	for i := range benchMerchants {
		mk := ratelimit.MerchantKey(k, "M"+strconv.Itoa(i))
		keys = append(keys, b.store.RedisKey(ratelimit.KeyWindow{Key: mk, Window: rule.Windows[0]}))
	}
	return contender{
		id: id, name: name, keys: keys,
		op: func(ctx context.Context, m string) (bool, error) {
			merchant := "M" + strconv.Itoa(int(m[len(m)-1])%benchMerchants)
			d, err := b.lim.Check(ctx, ratelimit.Request{Key: k, Member: m, Merchant: merchant})
			switch {
			case err != nil:
			case d.Source != ratelimit.SourceRedis && d.Source != ratelimit.SourceNearCache:
				err = fmt.Errorf("limiter decided from %q, not Redis", d.Source)
			case !d.Allowed && d.Merchant != merchant:
				err = fmt.Errorf("refused by %q (merchant %q), want %s's own limit", d.Rule, d.Merchant, merchant)
			}
			return d.Allowed, err
		},
	}
}

func (b *bench) rrContender(id, name, key string, limit redis_rate.Limit) contender {
	key = "payserver:bench:rr:" + key
	return contender{
		id: id, name: name, keys: []string{"rate:" + key}, wantCallsPerCheck: 1,
		op: func(ctx context.Context, m string) (bool, error) {
			r, err := b.rr.AllowN(ctx, key, limit, 1)
			if err != nil {
				return false, err
			}
			return r.Allowed > 0, nil
		},
	}
}

func (b *bench) naiveContender(id, name, channel string, rule ratelimit.Rule) contender {
	k := ratelimit.Key{BizType: "BENCH", Channel: channel}
	return contender{
		id: id, name: name,
		keys: []string{b.naive.Prefix + k.BizType + k.Channel + ":" + strconv.FormatInt(window.Milliseconds(), 10)},
		op: func(ctx context.Context, m string) (bool, error) {
			r, err := b.naive.Check(ctx, ratelimit.KeyWindows(k, rule.Windows), m, 0)
			return r.Allowed, err
		},
	}
}

// probe is the state of Redis and this process before a measured run.
type probe struct {
	srvCPU float64
	self   syscall.Rusage
}

func (b *bench) begin() (probe, error) {
	var p probe
	if err := b.client.ConfigResetStat(b.ctx).Err(); err != nil {
		return p, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	var err error
	if p.srvCPU, err = redisinfo.ServerCPU(b.ctx, b.client); err != nil {
		return p, err
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &p.self); err != nil {
		return p, err
	}
	return p, nil
}

// end fills in the Redis-side columns of r. client is the CPU the client
// spent, or nil for this process.
func (b *bench) end(p probe, r *result, want float64, client *syscall.Rusage) error {
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		return err
	}
	st, err := redisinfo.CommandStats(b.ctx, b.client)
	if err != nil {
		return err
	}
	cpu, err := redisinfo.ServerCPU(b.ctx, b.client)
	if err != nil {
		return err
	}
	n := float64(r.checks)
	var calls, usec, failed int64
	if es := st["evalsha"]; es.Calls > 0 {
		calls, usec = es.Calls+st["eval"].Calls, es.Usec+st["eval"].Usec
		r.evalshaPerCall = float64(es.Usec) / float64(es.Calls)
	} else {
		r.evalshaPerCall = math.NaN()
		for name, s := range st {
			if !redisinfo.AdminCommand(name) {
				calls += s.Calls
				usec += s.Usec
			}
		}
	}
	for name, s := range st {
		if !redisinfo.AdminCommand(name) {
			failed += s.Failed
		}
	}
	r.callsPerCheck = float64(calls) / n
	r.cmdUsPerCheck = float64(usec) / n
	r.srvCPUPerCheck = (cpu - p.srvCPU) * 1e6 / n
	if client == nil {
		r.cliCPUPerCheck = float64(rusageCPU(&self)-rusageCPU(&p.self)) / n
	} else {
		r.cliCPUPerCheck = float64(rusageCPU(client)) / n
	}
	if failed > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d failed Redis calls", failed))
	}
	if want > 0 && (r.callsPerCheck > want*1.005 || r.callsPerCheck < want*0.995) {
		r.notes = append(r.notes, fmt.Sprintf("%.3f Redis calls per check, want %.0f: other traffic on this Redis during the run?", r.callsPerCheck, want))
	}
	if math.IsNaN(r.admitted) && st["evalsha"].Calls > 0 {
		// Inside the script an admission is one ZADD (one window).
		r.admitted = float64(st["zadd"].Calls) / float64(st["evalsha"].Calls)
	}
	return nil
}

func rusageCPU(u *syscall.Rusage) int64 { // microseconds
	return u.Utime.Sec*1e6 + int64(u.Utime.Usec) + u.Stime.Sec*1e6 + int64(u.Stime.Usec)
}

func (b *bench) del(keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	return b.client.Del(b.ctx, keys...).Err()
}

// cleanup deletes every key this benchmark writes.
func (b *bench) cleanup() {
	for _, pat := range []string{"payserver:bench:*", "rate:payserver:bench:*"} {
		iter := b.client.Scan(b.ctx, 0, pat, 1000).Iterator()
		for iter.Next(b.ctx) {
			b.client.Del(b.ctx, iter.Val())
		}
	}
}

// goRun returns a run of a Go contender: warm-up, then a measured run of
// o.duration (or o.maxRequests checks) from o.conc goroutines.
func (b *bench) goRun(c contender) func() (result, error) {
	return func() (result, error) {
		if b.skip(c.id) {
			return result{}, nil
		}
		fmt.Fprintf(os.Stderr, "running %-13s %s ...\n", c.id, c.name)
		if err := b.del(c.keys...); err != nil {
			return result{}, err
		}
		if b.o.warmup > 0 {
			if _, err := b.drive(c, b.o.warmup); err != nil {
				return result{}, fmt.Errorf("%s warm-up: %w", c.id, err)
			}
		}
		p, err := b.begin()
		if err != nil {
			return result{}, err
		}
		r, err := b.drive(c, b.o.duration)
		if err != nil {
			return result{}, fmt.Errorf("%s: %w", c.id, err)
		}
		if err := b.end(p, &r, c.wantCallsPerCheck, nil); err != nil {
			return result{}, err
		}
		return r, b.del(c.keys...)
	}
}

// drive runs c from o.conc goroutines for d (each stops at its share of
// o.maxRequests) and returns throughput, latency and admissions.
func (b *bench) drive(c contender, d time.Duration) (result, error) {
	conc := b.o.conc
	per := b.o.maxRequests / conc
	seq := b.seq.Add(1)
	hs := make([]hist, conc)
	type tally struct {
		n, ok uint64
		_     [48]byte // keep goroutines' counters off each other's cache lines
	}
	tallies := make([]tally, conc)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			// Members m<run>-<goroutine>-<i>: distinct, 8-16 bytes like
			// redis-benchmark's m-<12 digits>.
			buf := make([]byte, 0, 40)
			buf = append(buf, 'm')
			buf = strconv.AppendUint(buf, seq, 10)
			buf = append(buf, '-')
			buf = strconv.AppendInt(buf, int64(g), 10)
			buf = append(buf, '-')
			plen := len(buf)
			h := &hs[g]
			var n, ok uint64
			t := time.Now()
			for i := 0; i < per && t.Before(deadline) && ctx.Err() == nil; i++ {
				m := string(strconv.AppendInt(buf[:plen], int64(i), 10))
				allowed, err := c.op(ctx, m)
				t2 := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = err })
					}
					cancel()
					break
				}
				h.record(t2.Sub(t))
				n++
				if allowed {
					ok++
				}
				t = t2
			}
			tallies[g].n, tallies[g].ok = n, ok
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	var all hist
	var n, ok uint64
	for g := range hs {
		all.merge(&hs[g])
		n += tallies[g].n
		ok += tallies[g].ok
	}
	if n == 0 {
		return result{}, errors.New("no check completed")
	}
	return result{
		id: c.id, name: c.name, checks: n, elapsed: elapsed,
		rate: float64(n) / elapsed.Seconds(), p50: all.quantile(0.50), p99: all.quantile(0.99),
		admitted: float64(ok) / float64(n),
	}, nil
}

// rbRun returns a run of redis-benchmark calling EVALSHA of benchScript on
// its own key of the same shape as the store's, unpipelined, with random
// members. A short calibration run (which also warms up) sizes -n so that
// the measured run lasts about o.duration.
func (b *bench) rbRun(id, name, channel string, rule ratelimit.Rule) func() (result, error) {
	return func() (result, error) {
		if b.skip(id) {
			return result{}, nil
		}
		fmt.Fprintf(os.Stderr, "running %-13s %s ...\n", id, name)
		w := rule.Windows[0]
		key := b.store.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: "BENCH", Channel: channel}, Window: w})
		if err := b.del(key); err != nil {
			return result{}, err
		}
		args := func(n int) []string {
			return []string{"-h", b.host, "-p", b.port, "-c", strconv.Itoa(b.o.conc), "-n", strconv.Itoa(n),
				"-r", strconv.Itoa(rbRandRange), "-P", "1", "--csv",
				// the check scripts' KEYS and ARGV for one sliding count window
				// (oneCountWindowArgs)
				"EVALSHA", b.sha, "1", key,
				"2000", "0", "1", "0", strconv.FormatInt(w.Limit, 10), strconv.FormatInt(w.Size.Microseconds(), 10), "0", "0", "0", "0", "0", "0", "0",
				"m-__rand_int__", "0"}
		}
		calN := max(b.o.conc*50, 5000)
		cal, _, err := b.redisBenchmark(args(calN))
		if err != nil {
			return result{}, err
		}
		n := int(cal.rate * b.o.duration.Seconds())
		n = min(max(n, 2*calN), b.o.maxRequests)
		p, err := b.begin()
		if err != nil {
			return result{}, err
		}
		r, ru, err := b.redisBenchmark(args(n))
		if err != nil {
			return result{}, err
		}
		r.id, r.name = id, name
		r.admitted = math.NaN()
		if err := b.end(p, &r, 1, ru); err != nil {
			return result{}, err
		}
		r.notes = append(r.notes, "redis-benchmark "+strings.Join(args(n), " "))
		return r, b.del(key)
	}
}

func (b *bench) redisBenchmark(args []string) (result, *syscall.Rusage, error) {
	cmd := exec.Command(b.o.redisBenchmark, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	elapsed := time.Since(start)
	if err != nil {
		return result{}, nil, fmt.Errorf("redis-benchmark %s: %v: %s%s", strings.Join(args, " "), err, stderr.String(), out)
	}
	r, err := parseRBCSV(string(out))
	if err != nil {
		return result{}, nil, fmt.Errorf("redis-benchmark output: %w\n%s", err, out)
	}
	n, _ := strconv.Atoi(args[indexOf(args, "-n")+1])
	r.checks = uint64(n)
	r.elapsed = elapsed
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return r, ru, nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func median(rs []result) result {
	s := append([]result(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].rate < s[j].rate })
	return s[(len(s)-1)/2]
}
