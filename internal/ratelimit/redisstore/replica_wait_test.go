package redisstore

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"payserver/internal/ratelimit"

	"github.com/redis/go-redis/v9"

	"payserver/internal/testenv"
)

// TestReplicaWaitCost measures what `WAIT 1 <timeout>` after each check
// script would cost: the remedy for admissions lost with a killed master
// (a write acknowledged by the master and not yet received by its replica
// when the replica is promoted). Both variants run side by side in one run,
// alternating rounds, on the same master of a cluster of its own
// (internal/testenv: three masters, each with one replica), 16 concurrent
// callers, single-member checks against one key; it prints throughput and
// latency percentiles and the ratios. A measurement, opt-in:
// PAYSERVER_BENCH_REPLICA_WAIT=1.
func TestReplicaWaitCost(t *testing.T) {
	if os.Getenv("PAYSERVER_BENCH_REPLICA_WAIT") != "1" {
		t.Skip("measurement: PAYSERVER_BENCH_REPLICA_WAIT=1")
	}
	cluster := testenv.StartCluster(t, testenv.ClusterOptions{Replicas: 1})
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	defer cc.Close()
	k := ratelimit.Key{BizType: fmt.Sprintf("WAITCOST%d", time.Now().UnixNano()), Channel: "ALIPAY"}
	ws := []ratelimit.Window{{Limit: 1 << 40, Size: time.Second}, {Limit: 1 << 40, Size: time.Minute}}
	s, err := New(cc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := s.keys(ratelimit.KeyWindows(k, ws))
	master, err := cc.MasterForKey(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	// One node client: a pipeline runs on one connection, which WAIT needs
	// (it waits for that connection's writes).
	node := redis.NewClient(&redis.Options{Addr: master.Options().Addr, PoolSize: 32})
	defer node.Close()
	if err := checkScript.Load(ctx, node).Err(); err != nil {
		t.Fatal(err)
	}

	const callers = 16
	run := func(wait bool, d time.Duration) (ops int, lat []time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		deadline := time.Now().Add(d)
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				var mine []time.Duration
				for i := 0; time.Now().Before(deadline); i++ {
					m := fmt.Sprintf("m-%v-%d-%d", wait, c, i)
					start := time.Now()
					cmds, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
						p.EvalSha(ctx, checkScript.Hash(), s.checkKeys(ratelimit.KeyWindows(k, ws)), checkArgs(ratelimit.KeyWindows(k, ws), checkMember{id: m})...)
						if wait {
							p.Do(ctx, "WAIT", 1, 100)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					if wait {
						if n, _ := cmds[1].(*redis.Cmd).Int64(); n < 1 {
							t.Errorf("WAIT 1 100 answered %d replicas", n)
							return
						}
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}(c)
		}
		wg.Wait()
		return len(lat), lat
	}
	pct := func(lat []time.Duration, p float64) time.Duration {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[int(float64(len(lat)-1)*p)]
	}
	const round = 2 * time.Second
	var plain, waited []time.Duration
	for r := 0; r < 3; r++ {
		_, l := run(false, round)
		plain = append(plain, l...)
		_, l = run(true, round)
		waited = append(waited, l...)
	}
	secs := (3 * round).Seconds()
	t.Logf("REPLICA_WAIT master %s, %d callers, 3 alternating rounds of %v each", master.Options().Addr, callers, round)
	t.Logf("REPLICA_WAIT script only:      %8.0f checks/s  p50 %v  p99 %v", float64(len(plain))/secs, pct(plain, .5), pct(plain, .99))
	t.Logf("REPLICA_WAIT script + WAIT 1:  %8.0f checks/s  p50 %v  p99 %v", float64(len(waited))/secs, pct(waited, .5), pct(waited, .99))
	t.Logf("RATIO throughput with WAIT / without: %.2f; p50 latency with / without: %.2f; p99: %.2f",
		float64(len(waited))/float64(len(plain)), float64(pct(waited, .5))/float64(pct(plain, .5)), float64(pct(waited, .99))/float64(pct(plain, .99)))
}
