package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/testenv"
	"payserver/internal/testutil"
)

// nacosCluster is a three-node r-nacos raft group of the test's own
// (internal/testenv): the test kills and restarts its nodes.
type nacosCluster struct {
	nacos *testenv.Nacos
	addrs []string // HTTP host:port of node 1..3
}

func startNacosCluster(t testing.TB) *nacosCluster {
	t.Helper()
	n := testenv.StartNacos(t, testenv.NacosOptions{Nodes: 3})
	return &nacosCluster{nacos: n, addrs: n.Addrs()}
}

// node returns the 1-based node number whose gRPC port (HTTP+1000) is port.
func (c *nacosCluster) node(grpcPort int) int {
	for i, a := range c.addrs {
		_, p, _ := net.SplitHostPort(a)
		if n, _ := strconv.Atoi(p); n+1000 == grpcPort {
			return i + 1
		}
	}
	return 0
}

// publish writes a config through node n's HTTP API.
func (c *nacosCluster) publish(n int, dataID, content string) error {
	return testenv.NacosPublish(c.addrs[n-1], "PAY_GROUP", dataID, content)
}

// get reads a config through node n's HTTP API.
func (c *nacosCluster) get(n int, dataID string) string {
	s, _ := testenv.NacosGet(c.addrs[n-1], "PAY_GROUP", dataID)
	return s
}

// raft returns node n's view of the raft group.
func (c *nacosCluster) raft(n int) (leader int, members []int) { return c.nacos.Nodes[n-1].Raft() }

// nacosPeers returns the Nacos gRPC ports (among ports) that process pid has
// established connections to, from `ss`.
func nacosPeers(t testing.TB, pid int, ports map[int]bool) []int {
	t.Helper()
	out, err := exec.Command("ss", "-Htnp", "state", "established").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	seen := map[int]bool{}
	var peers []int
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, fmt.Sprintf("pid=%d,", pid)) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		_, p, err := net.SplitHostPort(f[3])
		if err != nil {
			continue
		}
		port, _ := strconv.Atoi(p)
		if ports[port] && !seen[port] {
			seen[port] = true
			peers = append(peers, port)
		}
	}
	return peers
}

// limitsWatch polls GET /limits on a server and counts every answer that
// does not hold a rule for key (limits lost).
type limitsWatch struct {
	polls, lost atomic.Int64
	lastLost    atomic.Value // string

	mu    sync.Mutex
	rules []string // distinct rules in the order seen
}

// seen returns the distinct rules in the order they were seen.
func (w *limitsWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.rules...)
}

func watchLimits(ctx context.Context, wg *sync.WaitGroup, s *server, key string) *limitsWatch {
	w := &limitsWatch{}
	client := &http.Client{Timeout: 2 * time.Second}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rule := ""
			resp, err := client.Get(s.base + "/limits")
			if err == nil {
				var l struct {
					Limits []struct{ Key, Rule string } `json:"limits"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&l)
				resp.Body.Close()
				for _, r := range l.Limits {
					if r.Key == key {
						rule = r.Rule
					}
				}
			}
			w.polls.Add(1)
			w.mu.Lock()
			if rule != "" && (len(w.rules) == 0 || w.rules[len(w.rules)-1] != rule) {
				w.rules = append(w.rules, rule)
			}
			w.mu.Unlock()
			if rule == "" {
				w.lost.Add(1)
				w.lastLost.Store(fmt.Sprintf("at %s: err=%v", time.Now().Format(time.RFC3339Nano), err))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

// TestNacosClusterFailover: payserver is given all three addresses of a
// three-node r-nacos raft cluster. Limits published through one node are
// enforced; the node payserver's config client is connected to is
// SIGKILLed; a change published through a surviving node is enforced
// within 3 s; the killed node restarts on its data, rejoins and catches
// up; and no instance ever answers /limits without its limits.
//
// Instance A runs without the naming client (an explicit
// limiter.localShare in its settings file), so it holds exactly one Nacos connection
// and "the node it is connected to" is one node; instance B runs the full
// set (config + naming, possibly on other nodes) and must ride the same
// failover. The "node 2" and "node 3" are the two nodes other than
// the killed one, whatever their numbers.
func TestNacosClusterFailover(t *testing.T) {
	c := startNacosCluster(t)
	dataID := testutil.UniqueName("cluster")
	biz := testutil.UniqueName("NC")
	key := biz + ":ALIPAY"
	doc := func(limit int) string { return fmt.Sprintf("limits:\n  %s: {limit: %d, window: 1h}\n", key, limit) }
	addrs := strings.Join(c.addrs, ",")
	dsn := testutil.MustFreshMySQL(t)
	// Fast (no -race) binaries: when a Nacos node dies, nacos-sdk-go v2.3.5's
	// own reconnect (RpcClient.reconnect writes currentConnection while
	// notifyConnectionEvent reads it, both SDK goroutines) is reported by
	// the race detector; it is inside the SDK, not in payserver.
	a := startServer(t, serverOptions{DSN: dsn, Fast: true, Config: "limiter: {localShare: 0.5}\n", Env: map[string]string{
		"PAYSERVER_NACOS_ADDR": addrs, "PAYSERVER_NACOS_DATA_ID": dataID,
	}})
	b := startServer(t, serverOptions{DSN: dsn, Fast: true, Env: map[string]string{
		"PAYSERVER_NACOS_ADDR": addrs, "PAYSERVER_NACOS_DATA_ID": dataID, "PAYSERVER_INSTANCE_COUNT": "2",
	}})

	grpcPorts := map[int]bool{}
	for n := 1; n <= 3; n++ {
		_, p, _ := net.SplitHostPort(c.addrs[n-1])
		port, _ := strconv.Atoi(p)
		grpcPorts[port+1000] = true
	}
	var peers []int
	waitFor(t, "instance A connected to one Nacos node", 10*time.Second, func() bool {
		peers = nacosPeers(t, a.cmd.Process.Pid, grpcPorts)
		return len(peers) == 1
	})
	killed := c.node(peers[0])
	var others []int
	for n := 1; n <= 3; n++ {
		if n != killed {
			others = append(others, n)
		}
	}
	t.Logf("instance A is connected to node %d (gRPC %d); publishing through nodes %d then %d", killed, peers[0], others[0], others[1])

	// 1. Limits published through "node 2" are enforced.
	if err := c.publish(others[0], dataID, doc(2)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b} {
		waitFor(t, "the first document", 10*time.Second, func() bool { return limitsRule(t, s, key) == "2/1h" })
	}
	want := []int{200, 200, 429, 429}
	for i, s := range []*server{a, b, a, b} {
		if got := s.pay(t, payBody(testutil.UniqueName("nc"), biz, "ALIPAY")).Status; got != want[i] {
			t.Fatalf("pay %d under limit 2: status %d, want %d", i, got, want[i])
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	watches := []*limitsWatch{watchLimits(ctx, &wg, a, key), watchLimits(ctx, &wg, b, key)}

	// 2. SIGKILL the node A is connected to; 3. publish through "node 3".
	killedAt := time.Now()
	c.nacos.Nodes[killed-1].Kill()
	var publishedAt time.Time
	waitFor(t, "a surviving node to accept the change", 20*time.Second, func() bool {
		if err := c.publish(others[1], dataID, doc(4)); err != nil {
			return false
		}
		publishedAt = time.Now()
		return true
	})
	enforced := make([]time.Duration, 2)
	for i, s := range []*server{a, b} {
		for limitsRule(t, s, key) != "4/1h" {
			if time.Since(publishedAt) > 10*time.Second {
				t.Fatalf("instance %c: the change published through node %d is not applied after 10 s", 'A'+i, others[1])
			}
			time.Sleep(10 * time.Millisecond)
		}
		enforced[i] = time.Since(publishedAt)
	}
	for i, s := range []*server{a, b} {
		if got := s.pay(t, payBody(testutil.UniqueName("nc"), biz, "ALIPAY")).Status; got != 200 {
			t.Fatalf("instance %c after the raise to 4: status %d, want 200", 'A'+i, got)
		}
	}
	if got := a.pay(t, payBody(testutil.UniqueName("nc"), biz, "ALIPAY")).Status; got != 429 {
		t.Fatalf("fifth payment under limit 4: status %d, want 429", got)
	}
	t.Logf("NACOS CLUSTER FAILOVER: node %d SIGKILLed; change accepted by node %d %v after the kill; applied on A after %v, on B after %v (limit 3 s)",
		killed, others[1], publishedAt.Sub(killedAt).Round(time.Millisecond), enforced[0].Round(time.Millisecond), enforced[1].Round(time.Millisecond))
	for i, d := range enforced {
		if d > 3*time.Second {
			t.Errorf("instance %c applied the change %v after it was published, want within 3 s", 'A'+i, d)
		}
	}
	if now := nacosPeers(t, a.cmd.Process.Pid, grpcPorts); len(now) != 1 || c.node(now[0]) == killed {
		t.Errorf("instance A's Nacos connections after the kill: %v, want one, to a surviving node", now)
	}

	// 4. The killed node restarts on its data dir, rejoins and catches up.
	restartAt := time.Now()
	c.nacos.Nodes[killed-1].Start()
	waitFor(t, "the restarted node to rejoin (a leader, three members)", 30*time.Second, func() bool {
		leader, members := c.raft(killed)
		return leader != 0 && len(members) == 3
	})
	t.Logf("node %d rejoined %v after its restart", killed, time.Since(restartAt).Round(time.Millisecond))
	// r-nacos 0.8.8: a restarted follower may not apply the entries it
	// missed until the leader replicates the next write (measured, not
	// asserted; payserver never goes back to the older version, see the
	// watch below).
	caughtUp := "not within 5 s"
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(50 * time.Millisecond) {
		if c.get(killed, dataID) == doc(4) {
			caughtUp = time.Since(restartAt).Round(time.Millisecond).String() + " after its restart"
			break
		}
	}
	t.Logf("node %d served the change made while it was down: %s", killed, caughtUp)
	// A change published through the rejoined node reaches every node and
	// both instances.
	publishedAt = time.Now()
	if err := c.publish(killed, dataID, doc(5)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b} {
		waitFor(t, "the change through the rejoined node", 5*time.Second, func() bool { return limitsRule(t, s, key) == "5/1h" })
	}
	t.Logf("change published through the rejoined node %d applied on both instances after %v", killed, time.Since(publishedAt).Round(time.Millisecond))
	for n := 1; n <= 3; n++ {
		waitFor(t, fmt.Sprintf("node %d to serve the last change", n), 5*time.Second, func() bool { return c.get(n, dataID) == doc(5) })
	}

	// 5. No instance ever lost its limits.
	for _, w := range watches {
		waitFor(t, "the watch to see the last rule", 5*time.Second, func() bool {
			seen := w.seen()
			return len(seen) > 0 && seen[len(seen)-1] == "5/1h"
		})
	}
	stop()
	wg.Wait()
	for i, w := range watches {
		// Each version once, in publish order: never back to an older one
		// (e.g. read from a node that had not caught up).
		if got := strings.Join(w.seen(), " "); got != "2/1h 4/1h 5/1h" {
			t.Errorf("instance %c went through the rules %q, want \"2/1h 4/1h 5/1h\"", 'A'+i, got)
		}
		if w.lost.Load() > 0 {
			t.Errorf("instance %c answered /limits without %s in %d of %d polls (last %v)", 'A'+i, key, w.lost.Load(), w.polls.Load(), w.lastLost.Load())
		} else {
			t.Logf("instance %c: %d /limits polls during the failover, limits present in all", 'A'+i, w.polls.Load())
		}
	}
}
