package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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

func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
}

// slotMaster asks node addr which address serves slot as master.
func slotMaster(addr string, slot int64) (string, error) {
	c := nodeClient(addr)
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

func clusterStateOK(addr string) bool {
	c := nodeClient(addr)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	return err == nil && strings.Contains(info, "cluster_state:ok")
}

func portOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// Failover run shape. The minute limit binds within the run (100/s would
// be 2,400 in 24 s), so that what a failover adds shows in the minute too.
const (
	foPerSecond = 100
	foPerMinute = 2000
	foWorkers   = 24 // one request per 60 ms each: about 400/s, 4x the 1 s limit
)

// TestRedisClusterFailover kills the master that owns a key's hash slot under
// load, on a cluster of its own (3 masters + 3 replicas, started by
// internal/testenv), once per limiter policy:
//
//   - local (the default): Redis's own record (every member ever read back
//     from the key's sorted set, with its Redis timestamp) holds the limit
//     in every sliding second and minute, lost writes aside; the in-process
//     admissions (no Redis timestamp: counted from each instance's metrics)
//     come on top, within the bound of docs/RELIABILITY.md; no 5xx.
//   - deny: no in-process admission at all, and Redis's record holds the
//     limit exactly in every sliding second and minute; the requests decided
//     while Redis failed answer 503 DEPENDENCY_UNAVAILABLE, counted.
//   - deny, replica behind: the same, but the killed master's replica has
//     missed its last second of writes (stopped, its replication link cut),
//     as on a lagging network. Those admissions are lost with the master and
//     the new master admits as many again: what is guaranteed is Redis's
//     record within the limit plus the lost writes, which is asserted, and
//     the lost writes are counted (the gap that WAIT would close:
//     docs/RELIABILITY.md).
//
// It also measures the promotion and how long payserver takes to decide on
// Redis again. PAYSERVER_IT_FAILOVER_SECONDS sets the load length (default
// 40).
func TestRedisClusterFailover(t *testing.T) {
	seconds := 40
	if v := os.Getenv("PAYSERVER_IT_FAILOVER_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 30 {
			t.Fatalf("PAYSERVER_IT_FAILOVER_SECONDS=%q: want a whole number >= 30", v)
		}
		seconds = n
	}
	dsn := testutil.MustFreshMySQL(t)
	cluster := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: 1})
	for _, run := range []failoverRun{
		{name: "local", policy: "local"},
		{name: "deny", policy: "deny"},
		{name: "deny_replica_behind", policy: "deny", replicaBehind: time.Second},
	} {
		t.Run(run.name, func(t *testing.T) {
			run.cluster, run.addrs, run.dsn, run.length = cluster, cluster.Addrs(), dsn, time.Duration(seconds)*time.Second
			runFailover(t, run)
		})
	}
}

type failoverRun struct {
	name   string
	policy string
	// replicaBehind, when set, stops the killed master's replica and cuts
	// its replication link this long before the kill.
	replicaBehind time.Duration
	cluster       *testenv.Cluster
	addrs         []string
	dsn           string
	length        time.Duration
}

func runFailover(t *testing.T, run failoverRun) {
	// Up and healthy, every master with its replica linked (after the
	// previous run's killed node rejoined).
	shapeStart := time.Now()
	if err := run.cluster.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover cluster %s healthy in %v", strings.Join(run.addrs, ","), time.Since(shapeStart).Round(time.Millisecond))

	biz := testutil.UniqueName("FAILOVER")
	// Every limiter key of a channel carries the channel's hash tag
	// (payserver:rl:{ALIPAY}:BIZTYPE:…): the slot to fail over is its slot.
	tag := "{ALIPAY}"
	c := nodeClient(run.addrs[0])
	defer c.Close()
	slot, err := c.ClusterKeySlot(context.Background(), tag).Result()
	if err != nil {
		t.Fatal(err)
	}
	master, err := slotMaster(run.addrs[0], slot)
	if err != nil {
		t.Fatal(err)
	}
	var killed string
	t.Cleanup(func() { // registered first, so it runs after the servers stopped
		if killed != "" {
			run.cluster.Node(killed).Start()
		}
	})
	t.Logf("policy %s; key %s: slot %d, master %s", run.policy, tag, slot, master)

	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: %d, window: 1s}, {limit: %d, window: 1m}]\n", biz, foPerSecond, foPerMinute)
	env := map[string]string{
		"PAYSERVER_REDIS_ADDR":     strings.Join(run.addrs, ","),
		"PAYSERVER_REDIS_MODE":     "cluster",
		"PAYSERVER_INSTANCE_COUNT": "3",
		"PAYSERVER_LIMITER_POLICY": run.policy,
	}
	var servers []*server
	for i := 0; i < 3; i++ {
		servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: run.dsn, Fast: true, Env: env}))
	}

	rs, err := redisstore.New(c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRedisRecord(run.addrs, rs.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: biz, Channel: "ALIPAY"}, Window: ratelimit.Window{Limit: foPerMinute, Size: time.Minute}}))
	defer rec.close()

	// Load: each worker paces itself to one request per 60 ms on instance
	// w%3, and records the answer and when the request was sent and its
	// answer complete (the admission happened in between).
	var (
		mu      sync.Mutex
		samples []loadSample
		n       atomic.Int64
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()
	start := time.Now()
	for w := 0; w < foWorkers; w++ {
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
				id := fmt.Sprintf("%s-%d-%d", biz, w, n.Add(1)) // unique across runs: they share the database
				sent := time.Now()
				r := servers[w%3].pay(t, payBody(id, biz, "ALIPAY"))
				s := loadSample{id: id, inst: w % 3, status: r.Status, sent: sent, end: time.Now()}
				if r.Status >= 400 {
					var e struct {
						Code string `json:"code"`
					}
					_ = json.Unmarshal(r.Body, &e)
					s.code = e.Code
				}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
				if r.Status >= 500 && (run.policy != "deny" || s.code != "DEPENDENCY_UNAVAILABLE") {
					t.Logf("instance %d answered %d: %s", w%3, r.Status, r.Body)
				}
			}
		}(w)
	}

	// Redis's own record: the key's 1 min sorted set, read every 50 ms. Its
	// members stay 60 s, longer than the run, so nothing leaves unseen; only
	// a write the killed master had not replicated can vanish, and it is
	// counted if a read saw it before the kill.
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			rec.read()
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// In-process admissions (policy local): each instance's counter of
	// them, read every 250 ms; a growth is a span with its count.
	var (
		localMu sync.Mutex
		spans   []localSpan
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
					spans = append(spans, localSpan{inst: i, from: lastAt, to: time.Now(), n: int(v - last[i])})
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
	killAfter := run.length / 5
	time.Sleep(time.Until(start.Add(killAfter)))
	for i := range servers {
		if redisDecisions(i) == 0 {
			t.Fatalf("instance %d took no decision on Redis before the kill", i)
		}
	}

	// Kill the slot's master, its replica first made to miss the last
	// writes when asked.
	var cont func()
	if run.replicaBehind > 0 {
		cont = stopReplicaOf(t, run.cluster, master)
		time.Sleep(run.replicaBehind)
	}
	rec.read()
	killed = master
	run.cluster.Node(killed).Kill()
	killAt := time.Now()
	if cont != nil {
		cont()
	}
	t.Logf("SIGKILLed master %s at +%v", killed, killAt.Sub(start).Round(time.Millisecond))
	var survivor string
	for _, a := range run.addrs {
		if a != killed {
			survivor = a
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
	// instance after the promotion.
	atPromotion := make([]float64, 3)
	for i := range servers {
		atPromotion[i] = redisDecisions(i)
	}
	back := make([]time.Duration, 3)
	waitFor(t, "every instance deciding on Redis again", 20*time.Second, func() bool {
		all := true
		for i := range servers {
			if back[i] == 0 && redisDecisions(i) > atPromotion[i] {
				back[i] = time.Since(killAt)
			}
			all = all && back[i] != 0
		}
		return all
	})
	t.Logf("instances back on Redis %v after the kill", back)

	// The killed node comes back as a replica at three quarters of the run.
	time.Sleep(time.Until(start.Add(run.length * 3 / 4)))
	run.cluster.Node(killed).Start()
	restartAt := time.Now()
	waitFor(t, "the killed node to rejoin as a replica", 30*time.Second, func() bool {
		k := nodeClient(killed)
		defer k.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, err := k.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	})
	killed = ""
	t.Logf("%s restarted at +%v, rejoined as a replica in %v", master,
		restartAt.Sub(start).Round(time.Millisecond), time.Since(restartAt).Round(time.Millisecond))

	time.Sleep(time.Until(start.Add(run.length)))
	stopLoad()
	<-pollDone
	<-localDone
	end := time.Now()
	rec.read()

	for i := range servers {
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
		t.Logf("instance %d: decisions redis %v, local admitted %v, local refused %v, near_cache %v; Redis errors %v; breaker %s", i,
			redisDecisions(i), servers[i].metric(t, "payserver_limiter_decisions_total", `source="local"`, `result="admitted"`),
			servers[i].metric(t, "payserver_limiter_decisions_total", `source="local"`, `result="refused"`),
			servers[i].metric(t, "payserver_limiter_decisions_total", `source="near_cache"`),
			servers[i].metric(t, "payserver_limiter_redis_errors_total"), strings.Join(transitions, ", "))
	}

	mu.Lock()
	defer mu.Unlock()
	statuses := map[string]int{}
	ok := map[string]bool{}
	var admitted []loadSample
	var ends []time.Time
	for _, s := range samples {
		statuses[fmt.Sprintf("%d %s", s.status, s.code)]++
		if s.status == 200 {
			admitted = append(admitted, s)
			ok[s.id] = true
			ends = append(ends, s.end)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	localMu.Lock()
	local := append([]localSpan(nil), spans...)
	localMu.Unlock()
	localTotal := 0
	for _, sp := range local {
		localTotal += sp.n
	}
	lost := rec.lost()
	allRedis := rec.times(func(string) bool { return true })
	okRedis := rec.times(func(m string) bool { return ok[m] })
	at := func(x time.Time) string { return fmt.Sprintf("+%.2fs", x.Sub(start).Seconds()) }
	show := func(w countedWindow) string {
		if w.n == 0 {
			return "0"
		}
		return fmt.Sprintf("%d at %s", w.n, at(w.at))
	}

	type measure struct {
		name           string
		second, minute countedWindow
	}
	measures := []measure{
		{"Redis timestamps, every member read back", maxWindow(windowCounts(allRedis, time.Second)), maxWindow(windowCounts(allRedis, time.Minute))},
		{"Redis timestamps, members answered 200", maxWindow(windowCounts(okRedis, time.Second)), maxWindow(windowCounts(okRedis, time.Minute))},
		{"in process (metric spans, upper bound)", maxWindow(withLocal(nil, local, time.Second)), maxWindow(withLocal(nil, local, time.Minute))},
		{"total: Redis + in process", maxWindow(withLocal(allRedis, local, time.Second)), maxWindow(withLocal(allRedis, local, time.Minute))},
		{"certainly inside (client times)", maxWindow(containedCounts(admitted, time.Second)), maxWindow(containedCounts(admitted, time.Minute))},
		{"by completion time (client)", maxWindow(windowCounts(ends, time.Second)), maxWindow(windowCounts(ends, time.Minute))},
	}
	t.Logf("%d requests in %v: %v; %s; %d lost (seen, then gone: unreplicated writes) %v; %d admitted in process",
		len(samples), end.Sub(start).Round(time.Millisecond), statuses, rec, len(lost), lost[:min(len(lost), 5)], localTotal)
	t.Logf("FAILOVER %s promoted=%v back=%v lost=%d", run.name, promoted.Round(time.Millisecond), back, len(lost))
	for _, m := range measures {
		t.Logf("FAILOVER %s %-42s max sliding 1 s %-14s (limit %d)  max sliding 1 min %-14s (limit %d)",
			run.name, m.name+":", show(m.second), foPerSecond, show(m.minute), foPerMinute)
	}

	if statuses["429 REQUEST_LIMITED"] == 0 {
		t.Error("no 429s: the load did not exceed the limit")
	}
	fivexx := 0
	for k, v := range statuses {
		if k >= "500" {
			if k == "503 DEPENDENCY_UNAVAILABLE" {
				fivexx += v
				continue
			}
			t.Errorf("%d answers %q", v, k)
		}
	}
	// Under local, a 503 is a check whose answer was lost with the killed
	// master (its outcome unknown, retried exactly with its requestId):
	// few, and never a false 429 instead.
	if run.policy != "deny" && fivexx > len(samples)/100 {
		t.Errorf("%d answers 503 DEPENDENCY_UNAVAILABLE of %d under policy %s: more than the checks in flight when the master died", fivexx, len(samples), run.policy)
	}
	if run.policy == "deny" {
		t.Logf("FAILOVER %s 503 DEPENDENCY_UNAVAILABLE: %d", run.name, fivexx)
	}

	// Redis never holds more than the limit in a window; a write lost with
	// the killed master lets the new master admit one more in its windows.
	if w := measures[0].second; w.n > foPerSecond+len(lost) {
		t.Errorf("Redis admitted %s in a sliding second (limit %d, %d lost writes)", show(w), foPerSecond, len(lost))
	}
	if w := measures[0].minute; w.n > foPerMinute+len(lost) {
		t.Errorf("Redis admitted %s in a sliding minute (limit %d, %d lost writes)", show(w), foPerMinute, len(lost))
	}
	switch {
	case run.replicaBehind > 0:
		// What is guaranteed when writes are lost: nothing in process, and
		// Redis's record over the limit by at most the lost writes (asserted
		// above). The cut link must have lost some, or the run proved nothing.
		if localTotal != 0 {
			t.Errorf("%d admitted in process under policy deny", localTotal)
		}
		if len(lost) == 0 {
			t.Error("no write lost with the killed master although its replica missed its last second")
		}
	case run.policy == "deny":
		// Exact: nothing admitted in process, and Redis's record within the
		// limit in every sliding second and minute, lost writes included.
		if localTotal != 0 {
			t.Errorf("%d admitted in process under policy deny", localTotal)
		}
		if w := measures[0].second; w.n > foPerSecond {
			t.Errorf("policy deny: Redis's record holds %s in a sliding second (limit %d; %d lost writes)", show(w), foPerSecond, len(lost))
		}
		if w := measures[0].minute; w.n > foPerMinute {
			t.Errorf("policy deny: Redis's record holds %s in a sliding minute (limit %d; %d lost writes)", show(w), foPerMinute, len(lost))
		}
		if fivexx == 0 {
			t.Error("policy deny: no 503 while the slot had no master")
		}
	case run.policy == "local":
		// The bound (docs/RELIABILITY.md): over the limit by at most the
		// lost writes plus, per instance, its in-process admissions, which
		// its in-process windows cap at share × limit of the window and at
		// share × the 1 s limit in each second it decided in process.
		byInst := map[int][]localSpan{}
		for _, sp := range local {
			byInst[sp.inst] = append(byInst[sp.inst], sp)
		}
		share := 1.0 / 3
		boundSecond, boundMinute := len(lost), len(lost)
		for _, sps := range byInst {
			perSecond := int(float64(foPerSecond) * share)
			boundSecond += perSecond
			boundMinute += min(int(float64(foPerMinute)*share), perSecond*coverSeconds(sps))
		}
		t.Logf("FAILOVER local bound over the limit: %d in a second, %d in a minute (lost writes %d, in-process seconds per instance %v)",
			boundSecond, boundMinute, len(lost), func() []int {
				var k []int
				for i := 0; i < 3; i++ {
					k = append(k, coverSeconds(byInst[i]))
				}
				return k
			}())
		// Per second, the in-process count is known only per 250 ms metric
		// read, so "Redis + in process" over-counts a second by whole
		// reads (it reached 249 once against 199 while the admissions
		// certainly inside a second were 152). The per-second check uses
		// the admissions certainly made inside it instead.
		if w := measures[4].second; w.n > foPerSecond+boundSecond {
			t.Errorf("policy local: %s certainly inside a sliding second (limit %d + bound %d)", show(w), foPerSecond, boundSecond)
		}
		if w := measures[3].minute; w.n > foPerMinute+boundMinute {
			t.Errorf("policy local: %s in a sliding minute, Redis + in process (limit %d + bound %d)", show(w), foPerMinute, boundMinute)
		}
	}
}

// stopReplicaOf makes the replica of master miss master's next writes: it
// pauses the replica process (SIGSTOP: it cannot reconnect) and closes its
// replication link on master, so that what master writes from now on stays
// in master's backlog. The returned func resumes the replica (SIGCONT); it
// is also registered as a cleanup.
func stopReplicaOf(t *testing.T, cluster *testenv.Cluster, master string) func() {
	t.Helper()
	mc := nodeClient(master)
	defer mc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := mc.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	port := ""
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "slave0:") {
			for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "slave0:")), ",") {
				if v, ok := strings.CutPrefix(f, "port="); ok {
					port = v
				}
			}
		}
	}
	replica := cluster.Node("127.0.0.1:" + port)
	if replica == nil {
		t.Fatalf("master %s has no replica in the cluster: %s", master, info)
	}
	replica.Pause()
	resume := sync.OnceFunc(replica.Resume)
	t.Cleanup(resume)
	if err := mc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s (pid %d) stopped and its link to %s closed", replica.Addr, replica.Pid(), master)
	return resume
}
