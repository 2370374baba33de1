package integration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testenv"
	"payserver/internal/testutil"
)

func commandCalls(c *redis.Client, cmd string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// TestRedisSentinelFailover runs two payserver instances on Redis through
// Sentinel (PAYSERVER_REDIS_MODE=sentinel; the sentinels require a password,
// PAYSERVER_REDIS_SENTINEL_PASSWORD), SIGKILLs the master under load
// and lets the sentinels promote the replica. It checks: no 5xx under the
// local policy; every instance decides on Redis again within 5 s of the
// promotion (the figure is logged); the limits hold by Redis's own
// timestamps (the scores of the window's sorted set), outside the failover
// span for the 1 s window and over the whole run for the 1 min window; and
// the new master, whose script cache was emptied before the kill, got the
// script through go-redis's EVAL fallback on NOSCRIPT before deciding.
// The master, its replica and the sentinels are the test's own
// (internal/testenv).
func TestRedisSentinelFailover(t *testing.T) {
	const sentinelPassword = "payserver-sentinel"
	set := testenv.StartSentinel(t, testenv.SentinelOptions{Password: sentinelPassword})
	sentinels, masterName := set.Addrs(), testenv.SentinelMaster
	sentinelMaster := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return set.Master(ctx)
	}
	const (
		seconds   = 30
		perSecond = 50
		perMinute = 1000 // binds from about +20 s
		workers   = 12   // one request per 60 ms each: about 200/s, 4x the 1 s limit
	)
	master, err := sentinelMaster()
	if err != nil {
		t.Fatal(err)
	}
	var replica string
	for _, a := range set.DataAddrs() {
		if a != master {
			replica = a
		}
	}
	// The replica, once master, must not have the scripts: payserver has to
	// load them there (EVAL after NOSCRIPT) before its first decision.
	rc := redis.NewClient(&redis.Options{Addr: replica})
	defer rc.Close()
	if err := rc.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH on the replica %s: %v", replica, err)
	}
	evalBefore := commandCalls(rc, "eval")

	biz := testutil.UniqueName("SENTINEL")
	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: %d, window: 1s}, {limit: %d, window: 1m}]\n", biz, perSecond, perMinute)
	dsn := testutil.MustFreshMySQL(t)
	env := map[string]string{
		"PAYSERVER_REDIS_ADDR": "", "PAYSERVER_REDIS_MODE": "sentinel",
		"PAYSERVER_REDIS_SENTINELS": strings.Join(sentinels, ","), "PAYSERVER_REDIS_MASTER": masterName,
		"PAYSERVER_REDIS_SENTINEL_PASSWORD": sentinelPassword,
		"PAYSERVER_INSTANCE_COUNT":          "2", "PAYSERVER_LIMITER_POLICY": "local",
	}
	servers := []*server{
		startServer(t, serverOptions{Limits: limits, DSN: dsn, Fast: true, Env: env}),
		startServer(t, serverOptions{Limits: limits, DSN: dsn, Fast: true, Env: env}),
	}

	var (
		mu      sync.Mutex
		samples []loadSample
		n       atomic.Int64
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			tick := time.NewTicker(60 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				sent := time.Now()
				r := servers[w%2].pay(t, payBody(fmt.Sprintf("sf-%d-%d", w, n.Add(1)), biz, "ALIPAY"))
				mu.Lock()
				samples = append(samples, loadSample{inst: w % 2, status: r.Status, sent: sent, end: time.Now()})
				if r.Status >= 500 {
					t.Logf("instance %d answered %d: %s", w%2, r.Status, r.Body)
				}
				mu.Unlock()
			}
		}(w)
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	// Redis's record of its admissions, read through Sentinel every 2 s.
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: masterName, SentinelAddrs: sentinels, SentinelPassword: sentinelPassword,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: 2})
	defer fc.Close()
	rs, err := redisstore.New(fc, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	minuteKey := rs.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: biz, Channel: "ALIPAY"}, Window: ratelimit.Window{Limit: perMinute, Size: time.Minute}})
	var (
		redisMu       sync.Mutex
		redisAdmitted = map[string]time.Time{}
		polls         [2]int
	)
	pollRedis := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		zs, err := fc.ZRangeWithScores(ctx, minuteKey, 0, -1).Result()
		redisMu.Lock()
		defer redisMu.Unlock()
		if err != nil {
			polls[1]++
			return
		}
		polls[0]++
		for _, z := range zs {
			redisAdmitted[z.Member.(string)] = time.UnixMicro(int64(z.Score))
		}
	}
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			pollRedis()
		}
	}()

	redisDecisions := func(i int) float64 {
		return servers[i].metric(t, "payserver_limiter_decisions_total", `source="redis"`)
	}
	time.Sleep(time.Until(start.Add(seconds * time.Second / 3)))
	for i := range servers {
		if redisDecisions(i) == 0 {
			t.Fatalf("instance %d took no decision on Redis before the kill", i)
		}
	}
	set.Node(master).Kill()
	killAt := time.Now()
	t.Logf("SIGKILLed master %s at +%v", master, killAt.Sub(start).Round(time.Millisecond))
	var newMaster string
	waitFor(t, "the sentinels to promote the replica", 30*time.Second, func() bool {
		m, err := sentinelMaster()
		newMaster = m
		return err == nil && m != master
	})
	promotedAt := time.Now()
	t.Logf("sentinels named %s master %v after the kill", newMaster, promotedAt.Sub(killAt).Round(time.Millisecond))
	atPromotion := []float64{redisDecisions(0), redisDecisions(1)}
	back := make([]time.Duration, len(servers))
	waitFor(t, "every instance deciding on Redis again", 15*time.Second, func() bool {
		done := true
		for i := range servers {
			if back[i] == 0 && redisDecisions(i) > atPromotion[i] {
				back[i] = time.Since(promotedAt)
			}
			done = done && back[i] != 0
		}
		return done
	})
	lastBack := promotedAt.Add(max(back[0], back[1]))
	t.Logf("back on Redis after the promotion: instance 0 %v, instance 1 %v", back[0].Round(time.Millisecond), back[1].Round(time.Millisecond))
	for i, b := range back {
		if b > 5*time.Second {
			t.Errorf("instance %d back on Redis %v after the promotion, want within 5 s", i, b)
		}
	}

	time.Sleep(time.Until(start.Add(seconds * time.Second)))
	stopLoad()
	<-pollDone
	pollRedis()
	end := time.Now()

	nm := redis.NewClient(&redis.Options{Addr: newMaster})
	defer nm.Close()
	evalAfter := commandCalls(nm, "eval")
	t.Logf("EVAL calls on the new master %s: %d before the failover, %d after", newMaster, evalBefore, evalAfter)
	if evalAfter <= evalBefore {
		t.Errorf("the new master ran no EVAL: the scripts were not (re)loaded there through the NOSCRIPT fallback")
	}

	mu.Lock()
	defer mu.Unlock()
	statuses := map[int]int{}
	var admitted []loadSample
	for _, s := range samples {
		statuses[s.status]++
		if s.status == 200 {
			admitted = append(admitted, s)
		}
	}
	for st, k := range statuses {
		if st >= 500 {
			t.Errorf("%d answers with status %d during the Sentinel failover (policy local)", k, st)
		}
	}
	if statuses[429] == 0 {
		t.Error("no 429s: the load did not exceed the limit")
	}
	redisMu.Lock()
	inRedis := make([]time.Time, 0, len(redisAdmitted))
	for _, at := range redisAdmitted {
		inRedis = append(inRedis, at)
	}
	redisMu.Unlock()
	sort.Slice(inRedis, func(i, j int) bool { return inRedis[i].Before(inRedis[j]) })

	exemptFrom, exemptTo := killAt.Add(-3*time.Second), lastBack.Add(time.Second)
	worstOutside, worstInside := countedWindow{}, countedWindow{}
	for _, w := range windowCounts(inRedis, time.Second) {
		worst := &worstOutside
		if w.at.Add(time.Second).After(exemptFrom) && w.at.Before(exemptTo) {
			worst = &worstInside
		}
		if w.n > worst.n {
			*worst = w
		}
	}
	at := func(x time.Time) string { return fmt.Sprintf("+%.2fs", x.Sub(start).Seconds()) }
	minuteRedis := maxCount(windowCounts(inRedis, time.Minute))
	minuteCertain := maxCount(containedCounts(admitted, time.Minute))
	t.Logf("statuses %v over %v; %d admissions read back from Redis (%d reads, %d failed)", statuses, end.Sub(start).Round(time.Millisecond), len(inRedis), polls[0], polls[1])
	t.Logf("by Redis time: max in 1 s %d at %s outside the failover span [%s, %s], %d at %s inside it; max in 1 min %d (limit %d); certainly inside 1 min %d",
		worstOutside.n, at(worstOutside.at), at(exemptFrom), at(exemptTo), worstInside.n, at(worstInside.at), minuteRedis, perMinute, minuteCertain)
	t.Logf("admitted in process: instance 0 %v, instance 1 %v", servers[0].metric(t, "payserver_limiter_decisions_total", `source="local"`, `result="admitted"`),
		servers[1].metric(t, "payserver_limiter_decisions_total", `source="local"`, `result="admitted"`))
	if worstOutside.n > perSecond {
		t.Errorf("outside the failover span Redis admitted %d within 1 s at %s (limit %d)", worstOutside.n, at(worstOutside.at), perSecond)
	}
	if minuteRedis > perMinute {
		t.Errorf("Redis admitted %d within 1 min (limit %d)", minuteRedis, perMinute)
	}
	if minuteCertain > perMinute+perSecond {
		t.Errorf("%d requests certainly admitted within 1 min (limit %d, failover allowance %d)", minuteCertain, perMinute, perSecond)
	}
	if len(inRedis) == 0 {
		t.Error("no admission read back from Redis")
	}
}
