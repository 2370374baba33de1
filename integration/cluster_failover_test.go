package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// failoverPorts are the nodes of the 3-master + 3-replica cluster that
// `CLUSTER_REPLICAS=1 scripts/services.sh start cluster` runs.
var failoverPorts = []int{17001, 17002, 17003, 17004, 17005, 17006}

// services runs scripts/services.sh with extra environment entries.
func services(t *testing.T, script string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("services.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func nodeClient(port int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
}

// slotMaster asks node port which address serves slot as master.
func slotMaster(port int, slot int64) (string, error) {
	c := nodeClient(port)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d not served", slot)
}

func clusterStateOK(port int) bool {
	c := nodeClient(port)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	return err == nil && strings.Contains(info, "cluster_state:ok")
}

// TestRedisClusterFailover kills the master that owns a key's hash slot under
// load on a 3-master + 3-replica cluster, and measures how long the replica
// takes to be promoted and payserver to decide on Redis again, how many
// payments were admitted around the failover, and that nothing answered 5xx.
// Long and opt-in: `make failover` runs it.
func TestRedisClusterFailover(t *testing.T) {
	if os.Getenv("PAYSERVER_IT_FAILOVER") != "1" {
		t.Skip("opt-in long test (about 90 s, reshapes the Redis Cluster): `make failover` runs it (PAYSERVER_IT_FAILOVER=1)")
	}
	script := testutil.Env(t, "PAYSERVER_TEST_SERVICES_SCRIPT")
	seconds := 60
	if v := os.Getenv("PAYSERVER_IT_FAILOVER_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 20 {
			t.Fatalf("PAYSERVER_IT_FAILOVER_SECONDS=%q: want a whole number >= 20", v)
		}
		seconds = n
	}
	const (
		perSecond = 100
		perMinute = 4500 // binds too: demand is far above 100/s, 100/s would be 6000/min
		workers   = 24
	)

	// Shape: 6 nodes with replicas. Remember the shape to put back: the
	// other tests and `make test` use the default 3 masters.
	stateDir := os.Getenv("PAYSERVER_SERVICES_DIR")
	if stateDir == "" {
		stateDir = "/tmp/payserver-services"
	}
	origShape := "0"
	if b, err := os.ReadFile(filepath.Join(stateDir, "cluster", "replicas")); err == nil {
		origShape = strings.TrimSpace(string(b))
	}
	killedPort := 0
	restarted := false
	t.Cleanup(func() { // registered first, so it runs after the servers stopped
		if killedPort != 0 && !restarted {
			services(t, script, nil, "start", "cluster-node:"+strconv.Itoa(killedPort))
		}
		if origShape != "1" {
			services(t, script, []string{"CLUSTER_REPLICAS=0"}, "start", "cluster")
			t.Logf("cluster put back to its default shape (3 masters, 127.0.0.1:17001..17003)")
		}
	})
	shapeStart := time.Now()
	services(t, script, []string{"CLUSTER_REPLICAS=1"}, "start", "cluster")
	t.Logf("cluster with replicas up in %v (was CLUSTER_REPLICAS=%s)", time.Since(shapeStart).Round(time.Millisecond), origShape)

	var addrs []string
	for _, p := range failoverPorts {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	biz := testutil.UniqueName("FAILOVER")
	tag := "{" + biz + ":ALIPAY}"
	c := nodeClient(17001)
	defer c.Close()
	slot, err := c.ClusterKeySlot(context.Background(), tag).Result()
	if err != nil {
		t.Fatal(err)
	}
	master, err := slotMaster(17001, slot)
	if err != nil {
		t.Fatal(err)
	}
	killedPort, _ = strconv.Atoi(master[strings.LastIndex(master, ":")+1:])
	killedPortValue := killedPort
	killedPort = 0 // not killed yet
	t.Logf("key %s: slot %d, master %s", tag, slot, master)

	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: %d, window: 1s}, {limit: %d, window: 1m}]\n", biz, perSecond, perMinute)
	dsn := testutil.MustFreshMySQL(t)
	env := map[string]string{
		"PAYSERVER_REDIS_ADDR":     "",
		"PAYSERVER_REDIS_ADDRS":    strings.Join(addrs, ","),
		"PAYSERVER_INSTANCE_COUNT": "3",
	}
	var servers []*server
	for i := 0; i < 3; i++ {
		servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: dsn, Fast: true, Env: env}))
	}

	// Load: each worker paces itself to one request per 60 ms (about 400/s in
	// all, 4x the limit) on instance w%3, and records status, when the
	// request was sent and when its answer was complete. The admission
	// happened somewhere in [sent, end].
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
				i := n.Add(1)
				sent := time.Now()
				r := servers[w%3].pay(t, payBody(fmt.Sprintf("fo-%d-%d", w, i), biz, "ALIPAY"))
				end := time.Now()
				mu.Lock()
				samples = append(samples, loadSample{inst: w % 3, status: r.Status, sent: sent, end: end})
				if r.Status >= 500 {
					t.Logf("instance %d answered %d: %s", w%3, r.Status, r.Body)
				}
				mu.Unlock()
			}
		}(w)
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// Redis's own record of its admissions: every admission is a member of
	// the key's 1 m sorted set, scored with the Redis time (µs) of the
	// admission. Entries stay 60 s, so reading the set every 2 s (and once
	// at the end) collects them all, except writes the killed master had not
	// replicated yet.
	rs, err := ratelimit.NewRedisStore(c, "")
	if err != nil {
		t.Fatal(err)
	}
	minuteKey := rs.RedisKey(ratelimit.Key{BizType: biz, Channel: "ALIPAY"}, ratelimit.Window{Limit: perMinute, Size: time.Minute})
	var (
		redisMu       sync.Mutex
		redisAdmitted = map[string]time.Time{}
		redisPolls    [2]int // ok, failed
	)
	pollRedis := func() {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: 300 * time.Millisecond,
			ReadTimeout: time.Second, MaxRetries: 2})
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		zs, err := cc.ZRangeWithScores(ctx, minuteKey, 0, -1).Result()
		redisMu.Lock()
		defer redisMu.Unlock()
		if err != nil {
			redisPolls[1]++
			return
		}
		redisPolls[0]++
		for _, z := range zs {
			if m, ok := z.Member.(string); ok {
				redisAdmitted[m] = time.UnixMicro(int64(z.Score))
			}
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

	// When each instance admitted in process (policy local): its counter of
	// local admissions, read every 250 ms. Besides the failover, an instance
	// decides in process whenever a Redis call fails or times out (50 ms),
	// which a loaded VM can cause at any time.
	type span struct{ from, to time.Time }
	var (
		localMu    sync.Mutex
		localSpans []span
	)
	localDone := make(chan struct{})
	go func() {
		defer close(localDone)
		last := make([]float64, len(servers))
		lastAt := start
		for {
			done := false
			select {
			case <-stop:
				done = true
			case <-time.After(250 * time.Millisecond):
			}
			for i := range servers {
				v := servers[i].metric(t, "payserver_limiter_decisions_total", `source="local"`, `result="admitted"`)
				if v > last[i] {
					localMu.Lock()
					localSpans = append(localSpans, span{lastAt, time.Now()})
					localMu.Unlock()
				}
				last[i] = v
			}
			lastAt = time.Now()
			if done {
				return
			}
		}
	}()

	redisDecisions := func(i int) float64 {
		return servers[i].metric(t, "payserver_limiter_decisions_total", `source="redis"`)
	}
	killAfter := time.Duration(seconds) * time.Second / 3
	time.Sleep(time.Until(start.Add(killAfter)))
	degradedBefore := make([]float64, 3)
	for i := range servers {
		if redisDecisions(i) == 0 {
			t.Fatalf("instance %d took no decision on Redis before the kill", i)
		}
		degradedBefore[i] = servers[i].metric(t, "payserver_limiter_degraded_total")
	}

	// Kill the slot's master.
	killedPort = killedPortValue
	services(t, script, nil, "kill", "cluster-node:"+strconv.Itoa(killedPort))
	killAt := time.Now()
	t.Logf("SIGKILLed master 127.0.0.1:%d at +%v", killedPort, killAt.Sub(start).Round(time.Millisecond))
	var survivor int
	for _, p := range failoverPorts {
		if p != killedPort {
			survivor = p
			break
		}
	}
	var newMaster string
	waitFor(t, "a replica to be promoted for the slot", 30*time.Second, func() bool {
		m, err := slotMaster(survivor, slot)
		if err != nil || m == master || !clusterStateOK(survivor) {
			return false
		}
		newMaster = m
		return true
	})
	promoted := time.Since(killAt)
	t.Logf("slot %d served by %s, cluster_state ok, %v after the kill", slot, newMaster, promoted.Round(time.Millisecond))

	// payserver on Redis again: the redis decision counter grows on every
	// instance after the promotion. Watched until the end of the load, so
	// that a recovery that only comes with the killed node's return is
	// measured too.
	atPromotion := make([]float64, 3)
	for i := range servers {
		atPromotion[i] = redisDecisions(i)
	}
	var (
		backMu     sync.Mutex
		back       = make([]time.Duration, 3)
		lastBackAt time.Time
		allBack    = make(chan struct{})
	)
	go func() {
		defer close(allBack)
		for {
			done := true
			for i := range servers {
				backMu.Lock()
				seen := back[i] != 0
				backMu.Unlock()
				if seen {
					continue
				}
				if servers[i].metric(t, "payserver_limiter_decisions_total", `source="redis"`) > atPromotion[i] {
					now := time.Now()
					backMu.Lock()
					back[i] = now.Sub(killAt)
					lastBackAt = now
					backMu.Unlock()
				} else {
					done = false
				}
			}
			if done {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	restartBy := start.Add(time.Duration(seconds) * time.Second * 3 / 4)
	select {
	case <-allBack:
	case <-time.After(time.Until(restartBy)):
	}
	backMu.Lock()
	backBeforeRestart := append([]time.Duration(nil), back...)
	backMu.Unlock()
	t.Logf("instances back on Redis %v after the kill (0 = not yet) before the killed node is restarted", backBeforeRestart)
	for i := range servers {
		if backBeforeRestart[i] == 0 {
			t.Errorf("instance %d still not deciding on Redis %v after the promotion, before the killed node returned; decisions by source: redis %v local %v near_cache %v; redis errors %v",
				i, time.Since(killAt)-promoted, redisDecisions(i), servers[i].metric(t, "payserver_limiter_decisions_total", `source="local"`),
				servers[i].metric(t, "payserver_limiter_decisions_total", `source="near_cache"`),
				servers[i].metric(t, "payserver_limiter_redis_errors_total"))
		}
	}

	// The killed node comes back as a replica.
	services(t, script, nil, "start", "cluster-node:"+strconv.Itoa(killedPort))
	restarted = true
	restartAt := time.Now()
	waitFor(t, "the killed node to rejoin as a replica", 30*time.Second, func() bool {
		k := nodeClient(killedPort)
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, err := k.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	})
	t.Logf("127.0.0.1:%d restarted at +%v, rejoined as a replica of the new master in %v", killedPort,
		restartAt.Sub(start).Round(time.Millisecond), time.Since(restartAt).Round(time.Millisecond))

	time.Sleep(time.Until(start.Add(time.Duration(seconds) * time.Second)))
	close(stop)
	wg.Wait()
	<-allBack
	<-pollDone
	<-localDone
	end := time.Now()
	pollRedis()
	backMu.Lock()
	t.Logf("instances back on Redis %v after the kill (0 = never during the load)", back)
	backMu.Unlock()

	degraded := make([]float64, 3)
	redisTotal := make([]float64, 3)
	localAdmitted := make([]float64, 3)
	nearCache := make([]float64, 3)
	redisErrors := make([]float64, 3)
	for i := range servers {
		degraded[i] = servers[i].metric(t, "payserver_limiter_degraded_total") - degradedBefore[i]
		redisTotal[i] = redisDecisions(i)
		localAdmitted[i] = servers[i].metric(t, "payserver_limiter_decisions_total", `source="local"`, `result="admitted"`)
		nearCache[i] = servers[i].metric(t, "payserver_limiter_decisions_total", `source="near_cache"`)
		redisErrors[i] = servers[i].metric(t, "payserver_limiter_redis_errors_total")
		// When each instance left Redis and came back (the breaker's
		// transitions, logged at warn), relative to the start of the load.
		var transitions []string
		for _, line := range strings.Split(servers[i].logs(), "\n") {
			var e struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
				Err  string    `json:"err"`
			}
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			switch {
			case strings.HasPrefix(e.Msg, "limiter store failing"):
				transitions = append(transitions, fmt.Sprintf("off +%.2fs (%s)", e.Time.Sub(start).Seconds(), e.Err))
			case strings.HasPrefix(e.Msg, "limiter store answers again"):
				transitions = append(transitions, fmt.Sprintf("back +%.2fs", e.Time.Sub(start).Seconds()))
			}
		}
		t.Logf("instance %d: Redis errors %v; breaker %s", i, redisErrors[i], strings.Join(transitions, ", "))
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
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].end.Before(admitted[j].end) })
	ends := make([]time.Time, len(admitted))
	for i, a := range admitted {
		ends[i] = a.end
	}
	redisMu.Lock()
	inRedis := make([]time.Time, 0, len(redisAdmitted))
	for _, at := range redisAdmitted {
		inRedis = append(inRedis, at)
	}
	polls := redisPolls
	redisMu.Unlock()
	sort.Slice(inRedis, func(i, j int) bool { return inRedis[i].Before(inRedis[j]) })

	// Fixed 1 s buckets by completion second since the start of the load.
	buckets := make([]int, int(end.Sub(start)/time.Second)+1)
	for _, a := range ends {
		buckets[int(a.Sub(start)/time.Second)]++
	}
	maxBucket := 0
	var over []string
	for sec, k := range buckets {
		maxBucket = max(maxBucket, k)
		if k > perSecond {
			over = append(over, fmt.Sprintf("+%ds:%d", sec, k))
		}
	}
	killSec := killAt.Sub(start).Seconds()
	t.Logf("admitted per 1 s bucket (limit %d; kill at +%.1fs): %v", perSecond, killSec, buckets)
	t.Logf("max per 1 s bucket %d; buckets over %d: %v", maxBucket, perSecond, over)

	// Sliding 1 s windows, in three classes:
	//
	//   - failover: touching the failover (3 s before the kill until 1 s
	//     after the last instance was back on Redis, at least 3 s after the
	//     kill). Writes the dead master had not yet replicated are lost, and
	//     the instances decide in process for a while.
	//   - in process: elsewhere, touching an instant when some instance
	//     admitted in process (policy local) because a Redis call failed or
	//     timed out. Such an instance admits up to its share (1/3 of the
	//     limit) less its own recent admissions, on top of what the others
	//     admit on Redis, which does not know.
	//   - on Redis: the others, where every decision was Redis's.
	exemptFrom := killAt.Add(-3 * time.Second)
	exemptTo := lastBackAt.Add(time.Second)
	if t3 := killAt.Add(3 * time.Second); t3.After(exemptTo) {
		exemptTo = t3
	}
	localMu.Lock()
	spans := append([]span(nil), localSpans...)
	localMu.Unlock()
	const (
		onRedis = iota
		inProcess
		inFailover
	)
	classes := []string{"on Redis", "in process", "failover"}
	class := func(x time.Time, width time.Duration) int {
		if x.Add(width).After(exemptFrom) && x.Before(exemptTo) {
			return inFailover
		}
		for _, sp := range spans {
			if x.Add(width).After(sp.from) && !x.After(sp.to) {
				return inProcess
			}
		}
		return onRedis
	}
	at := func(x time.Time) string {
		if x.IsZero() {
			return "-"
		}
		return fmt.Sprintf("+%.2fs", x.Sub(start).Seconds())
	}
	var spanList []string
	for _, sp := range spans {
		if !(sp.to.After(exemptFrom) && sp.from.Before(exemptTo)) {
			spanList = append(spanList, fmt.Sprintf("(%s, %s]", at(sp.from), at(sp.to)))
		}
	}
	t.Logf("failover span [%s, %s]; in-process admissions outside it in the 250 ms reads %v", at(exemptFrom), at(exemptTo), spanList)
	// Three measures of the same admissions:
	//
	//   - by completion time (when the client had the answer): what this test
	//     used to assert on (with a tolerance of 5). It is NOT the admission
	//     time: the answer comes after the order is written and the channel
	//     called, and the client validates the body before it notes the
	//     time, so a stall of some answers (a GC pause, a slow commit, a
	//     worker descheduled on this 2-core VM) moves admissions of one
	//     second into the next, and a 1 s window of completions can hold
	//     more than 100 admissions that were made over more than 1 s.
	//     Reported, not asserted.
	//   - by Redis time (the score of each member, read back from Redis): the
	//     exact instant of every admission Redis made. Admissions decided in
	//     process are not there.
	//   - by certain containment: a window [x, x+1s) counts only the requests
	//     sent at or after x whose answer was complete before x+1s, so each
	//     counted admission certainly happened inside the window. A lower
	//     bound of the truth that covers every admission, in-process ones
	//     too: above the limit is a real over-admission.
	//
	// Outside the failover span, Redis must hold the limit exactly, and where
	// every decision was Redis's, so must the certain count.
	measures := []struct {
		name string
		ws   []countedWindow
	}{
		{"by completion time", windowCounts(ends, time.Second)},
		{"by Redis admission time", windowCounts(inRedis, time.Second)},
		{"certainly inside", containedCounts(admitted, time.Second)},
	}
	var worst [3][3]countedWindow // measure, class
	t.Logf("max admitted in a sliding 1 s window (limit %d), where: %v; windows over the limit", perSecond, classes)
	for m, ms := range measures {
		var runs [3][]string
		var run []countedWindow
		flush := func() {
			if len(run) == 0 {
				return
			}
			top := run[0]
			for _, w := range run {
				if w.n > top.n {
					top = w
				}
			}
			c := class(top.at, time.Second)
			runs[c] = append(runs[c], fmt.Sprintf("%s..%s max %d at %s", at(run[0].at), at(run[len(run)-1].at), top.n, at(top.at)))
			run = run[:0]
		}
		for _, w := range ms.ws {
			c := class(w.at, time.Second)
			if w.n > worst[m][c].n {
				worst[m][c] = w
			}
			if w.n > perSecond {
				if len(run) > 0 && class(run[0].at, time.Second) != c {
					flush()
				}
				run = append(run, w)
			} else {
				flush()
			}
		}
		flush()
		t.Logf("  %-24s %d at %s | %d at %s | %d at %s; over: on Redis %v, in process %v, failover %v", ms.name+":",
			worst[m][onRedis].n, at(worst[m][onRedis].at), worst[m][inProcess].n, at(worst[m][inProcess].at),
			worst[m][inFailover].n, at(worst[m][inFailover].at), runs[onRedis], runs[inProcess], runs[inFailover])
	}
	redisPoll := fmt.Sprintf("%d admissions read back from Redis in %d reads, %d failed reads", len(inRedis), polls[0], polls[1])
	t.Log(redisPoll)

	// Per minute.
	var perMin []int
	for _, a := range ends {
		m := int(a.Sub(start) / time.Minute)
		for len(perMin) <= m {
			perMin = append(perMin, 0)
		}
		perMin[m]++
	}
	mc := maxCount(windowCounts(ends, time.Minute))
	mr := maxCount(windowCounts(inRedis, time.Minute))
	ms := maxCount(containedCounts(admitted, time.Minute))
	maxMin := mc
	t.Logf("admitted per minute bucket %v (limit %d/1m); max in a sliding 1 min window: %d by completion time, %d certainly inside, %d by Redis time (Redis-decided only); %d requests in %v, statuses %v",
		perMin, perMinute, mc, ms, mr, len(samples), end.Sub(start).Round(time.Millisecond), statuses)
	t.Logf("degraded decisions during/after the kill per instance %v; admitted in process %v; near-cache refusals %v; redis decisions per instance %v; promoted %v, back on Redis %v after the kill",
		degraded, localAdmitted, nearCache, redisTotal, promoted.Round(time.Millisecond), back)

	for st, k := range statuses {
		if st >= 500 {
			t.Errorf("%d answers with status %d during the failover", k, st)
		}
	}
	if statuses[429] == 0 {
		t.Error("no 429s: the load did not exceed the limit")
	}
	for _, c := range []int{onRedis, inProcess} {
		if w := worst[1][c]; w.n > perSecond {
			t.Errorf("outside the failover span, Redis admitted %d within 1 s at %s (limit %d; %s)", w.n, at(w.at), perSecond, redisPoll)
		}
	}
	if w := worst[2][onRedis]; w.n > perSecond {
		t.Errorf("where every decision was Redis's, %d requests were certainly admitted within 1 s at %s (limit %d)", w.n, at(w.at), perSecond)
	}
	if maxMin > perMinute+perSecond {
		t.Errorf("%d admitted within 1 min (limit %d)", maxMin, perMinute)
	}
}

// loadSample is one request of the failover load.
type loadSample struct {
	inst      int
	status    int
	sent, end time.Time
}

// countedWindow is one sliding window and how many admissions it holds.
type countedWindow struct {
	at time.Time // the window is [at, at+width)
	n  int
}

func maxCount(ws []countedWindow) int {
	m := 0
	for _, w := range ws {
		m = max(m, w.n)
	}
	return m
}

// windowCounts returns the windows [x, x+width) that start at each instant
// of ts (sorted), with how many of ts each holds. The fullest window of any
// start is among them.
func windowCounts(ts []time.Time, width time.Duration) []countedWindow {
	out := make([]countedWindow, len(ts))
	j := 0
	for i, x := range ts {
		for j < len(ts) && ts[j].Before(x.Add(width)) {
			j++
		}
		out[i] = countedWindow{x, j - i}
	}
	return out
}

// containedCounts is windowCounts for admissions known only to lie in
// [sent, end]: a window [x, x+width) counts the samples with x <= sent and
// end < x+width, each certainly admitted inside it. The fullest such window
// starts at some sample's sent time, so only those are tried.
func containedCounts(samples []loadSample, width time.Duration) []countedWindow {
	bySent := append([]loadSample(nil), samples...)
	sort.Slice(bySent, func(i, j int) bool { return bySent[i].sent.Before(bySent[j].sent) })
	out := make([]countedWindow, len(bySent))
	for i, s := range bySent {
		y := s.sent.Add(width)
		k := 0
		for _, o := range bySent[i:] {
			if !o.sent.Before(y) {
				break
			}
			if o.end.Before(y) {
				k++
			}
		}
		out[i] = countedWindow{s.sent, k}
	}
	return out
}
