package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NacosOptions configure StartNacos. The zero value is one node.
type NacosOptions struct {
	// Nodes is 1 (a single node) or 3 (one raft group).
	Nodes int
}

// Nacos is r-nacos: one node, or three forming one raft group.
type Nacos struct {
	Nodes []*NacosNode
}

// NacosNode is one r-nacos process.
type NacosNode struct {
	// ID is the raft node id, 1-based.
	ID int
	// Addr is the HTTP host:port; gRPC is on the HTTP port + 1000 (what
	// the Nacos SDKs assume) and is also the raft address.
	Addr string
	// Dir holds the data dir, the env file and the log (rnacos.log).
	Dir string

	tb    TB
	p     *proc
	grpc  string
	alone bool // a single node, not one of a group
}

// nacosAttempts bounds the fresh starts: r-nacos 0.8.8 can panic while it
// initialises raft on a new data dir (below).
const nacosAttempts = 8

// StartNacos starts r-nacos on free loopback ports under tb.TempDir()s and
// returns once a config published through every node reads back from every
// node.
//
// r-nacos 0.8.8 has a start-up race on a brand-new data dir, frequent
// under CPU load: raft auto-init can apply its first log entry before the
// state machine's dependencies are wired, an actor thread panics
// (raftapply.rs:421, unwrap on None) and from then on writes answer "true"
// but are never applied (and that data dir never finds a leader after a
// restart). So a start counts only once a publish reads back; a panic in
// the log, or no read-back in time, kills the nodes and starts over on
// fresh data dirs.
func StartNacos(tb TB, opts NacosOptions) *Nacos {
	tb.Helper()
	bin := Binary(tb, "rnacos")
	n := max(opts.Nodes, 1)
	if n != 1 && n != 3 {
		tb.Fatalf("testenv: StartNacos: Nodes is %d, want 1 or 3", n)
	}
	c := &Nacos{}
	for id := 1; id <= n; id++ {
		port := FreePort(tb, 1000)
		nd := &NacosNode{ID: id, Addr: addr(port), Dir: tb.TempDir(), tb: tb, grpc: addr(port + 1000), alone: n == 1}
		nd.p = &proc{name: fmt.Sprintf("rnacos node %d %s", id, nd.Addr), args: []string{bin, "-e", filepath.Join(nd.Dir, "rnacos.env")},
			dir: nd.Dir, log: filepath.Join(nd.Dir, "rnacos.log")}
		tb.Cleanup(func() { nd.p.stop(syscall.SIGKILL, 5*time.Second) })
		c.Nodes = append(c.Nodes, nd)
	}
	var err error
	for attempt := 1; attempt <= nacosAttempts; attempt++ {
		if err = c.form(); err == nil {
			return c
		}
		tb.Logf("testenv: r-nacos start attempt %d/%d: %v; again on fresh data dirs", attempt, nacosAttempts, err)
		for _, nd := range c.Nodes {
			nd.p.stop(syscall.SIGKILL, 5*time.Second)
			_ = os.RemoveAll(filepath.Join(nd.Dir, "data"))
		}
	}
	tb.Fatalf("testenv: r-nacos did not start: %v\n%s", err, c.Nodes[0].p.tail(30))
	return nil
}

// Addr returns the first node's HTTP address.
func (c *Nacos) Addr() string { return c.Nodes[0].Addr }

// Addrs returns every node's HTTP address.
func (c *Nacos) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		out[i] = nd.Addr
	}
	return out
}

// form starts the nodes on fresh data dirs: node 1 initialises the group,
// the others join it one at a time.
func (c *Nacos) form() error {
	var offsets []int64
	for _, nd := range c.Nodes {
		offsets = append(offsets, nd.logSize())
	}
	panicked := func() error {
		for i, nd := range c.Nodes {
			if line := nd.panicSince(offsets[i]); line != "" {
				return hopeless{fmt.Errorf("node %d panicked during start-up: %s", nd.ID, line)}
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, nd := range c.Nodes {
		if err := nd.launch(true, c.Nodes[0].grpc); err != nil {
			return err
		}
		if err := nd.p.waitReady(30*time.Second, func() error {
			if err := panicked(); err != nil {
				return err
			}
			return nd.up()
		}); err != nil {
			return err
		}
		if len(c.Nodes) == 1 {
			break
		}
		if err := poll(ctx, func() error {
			if err := panicked(); err != nil {
				return err
			}
			leader, members := c.Nodes[0].Raft()
			if leader != 1 || len(members) < nd.ID {
				return fmt.Errorf("node 1 sees leader %d, members %v, waiting for node %d", leader, members, nd.ID)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	probeCtx, probeCancel := context.WithTimeout(ctx, 20*time.Second)
	defer probeCancel()
	return poll(probeCtx, func() error {
		if err := c.probe(); err != nil {
			return err
		}
		return panicked()
	})
}

// probe publishes a new value through every node and reads each back from
// every node (a node that stopped following still serves an old value, so
// the content is new each time), then deletes the probes.
func (c *Nacos) probe() error {
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, nd := range c.Nodes {
		if err := NacosPublish(nd.Addr, "PAY_GROUP", "probe-"+strconv.Itoa(nd.ID), "hello-"+stamp); err != nil {
			return err
		}
	}
	for _, from := range c.Nodes {
		for _, nd := range c.Nodes {
			got, err := NacosGet(nd.Addr, "PAY_GROUP", "probe-"+strconv.Itoa(from.ID))
			if err != nil {
				return fmt.Errorf("node %d: %w", nd.ID, err)
			}
			if got != "hello-"+stamp {
				return fmt.Errorf("node %d reads %q for node %d's probe, want %q", nd.ID, got, from.ID, "hello-"+stamp)
			}
		}
	}
	for _, nd := range c.Nodes {
		_ = nacosDelete(nd.Addr, "PAY_GROUP", "probe-"+strconv.Itoa(nd.ID))
	}
	return nil
}

// launch writes the node's env file and starts it; fresh says whether its
// data dir is new (node 1 then initialises the group; the others join
// join, node 1's raft address).
func (nd *NacosNode) launch(fresh bool, join string) error {
	_, httpPort := splitAddr(nd.Addr)
	_, grpcPort := splitAddr(nd.grpc)
	console := FreePort(nd.tb)
	autoInit, joinAddr := "false", ""
	if nd.ID == 1 {
		autoInit = "true"
	} else if fresh {
		joinAddr = join
	}
	env := []string{
		"RNACOS_SDK_HOST=" + Host, "RNACOS_CONSOLE_HOST=" + Host,
		"RNACOS_HTTP_PORT=" + httpPort, "RNACOS_GRPC_PORT=" + grpcPort, "RNACOS_HTTP_CONSOLE_PORT=" + strconv.Itoa(console),
		"RNACOS_DATA_DIR=" + filepath.Join(nd.Dir, "data"),
		"RNACOS_RAFT_NODE_ID=" + strconv.Itoa(nd.ID), "RNACOS_RAFT_NODE_ADDR=" + nd.grpc,
		"RNACOS_RAFT_AUTO_INIT=" + autoInit, "RNACOS_RAFT_JOIN_ADDR=" + joinAddr,
		"RNACOS_ENABLE_OPEN_API_AUTH=false", "RNACOS_HTTP_WORKERS=2", "RUST_LOG=warn",
	}
	// r-nacos also reads a .env file from its working directory or any
	// parent unless -e names one: the env file holds the same values.
	if err := os.WriteFile(filepath.Join(nd.Dir, "rnacos.env"), []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	nd.p.env = env
	return nd.p.start()
}

// up reports whether the HTTP API answers (404 for a missing config is an
// answer) and gRPC accepts connections.
func (nd *NacosNode) up() error {
	if _, err := NacosGet(nd.Addr, "PAY_GROUP", "x"); err != nil && !strings.Contains(err.Error(), "status 404") {
		return err
	}
	conn, err := net.DialTimeout("tcp", nd.grpc, time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// Start starts the node again on its data dir (it rejoins its group by
// itself) and waits until its HTTP and gRPC ports answer; for a single
// node, until a publish reads back. It fails tb otherwise.
func (nd *NacosNode) Start() {
	nd.tb.Helper()
	if err := nd.launch(false, ""); err != nil {
		nd.p.fail(nd.tb, err)
	}
	ready := nd.up
	if nd.alone {
		ready = func() error {
			if err := nd.up(); err != nil {
				return err
			}
			return (&Nacos{Nodes: []*NacosNode{nd}}).probe()
		}
	}
	if err := nd.p.waitReady(60*time.Second, ready); err != nil {
		nd.p.fail(nd.tb, err)
	}
}

// Kill sends SIGKILL, as a crash would, and waits until the node is gone.
func (nd *NacosNode) Kill() { nd.p.stop(syscall.SIGKILL, 5*time.Second) }

// Stop sends SIGTERM and waits until the node is gone (SIGKILL after 5 s:
// r-nacos drains connections for up to 30 s).
func (nd *NacosNode) Stop() { nd.p.stop(syscall.SIGTERM, 5*time.Second) }

// Pid returns the node's process id.
func (nd *NacosNode) Pid() int { return nd.p.pid() }

// GRPCAddr returns the node's gRPC (and raft) host:port.
func (nd *NacosNode) GRPCAddr() string { return nd.grpc }

// Raft returns the node's view of its raft group: the leader's id (0 when
// it knows none) and the members' ids.
func (nd *NacosNode) Raft() (leader int, members []int) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + nd.Addr + "/nacos/v1/raft/metrics")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var m struct {
		CurrentLeader *int `json:"current_leader"`
		Membership    struct {
			Members []int `json:"members"`
		} `json:"membership_config"`
	}
	if json.NewDecoder(resp.Body).Decode(&m) != nil || m.CurrentLeader == nil {
		return 0, nil
	}
	return *m.CurrentLeader, m.Membership.Members
}

func (nd *NacosNode) logSize() int64 {
	st, err := os.Stat(nd.p.log)
	if err != nil {
		return 0
	}
	return st.Size()
}

// panicSince returns the line of the node's log, after offset, that
// reports a panic ("" if none).
func (nd *NacosNode) panicSince(offset int64) string {
	b, err := os.ReadFile(nd.p.log)
	if err != nil || int64(len(b)) <= offset {
		return ""
	}
	b = b[offset:]
	i := bytes.Index(b, []byte("panicked"))
	if i < 0 {
		return ""
	}
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	end := bytes.IndexByte(b[i:], '\n')
	if end < 0 {
		end = len(b) - i
	}
	return string(b[start : i+end])
}

var nacosHTTP = &http.Client{Timeout: 3 * time.Second}

// NacosPublish publishes content as dataID in group through the open API
// of the node at addr.
func NacosPublish(addr, group, dataID, content string) error {
	resp, err := nacosHTTP.PostForm("http://"+addr+"/nacos/v1/cs/configs",
		url.Values{"dataId": {dataID}, "group": {group}, "content": {content}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "true" {
		return fmt.Errorf("publish %s/%s at %s: status %d: %s", group, dataID, addr, resp.StatusCode, b)
	}
	return nil
}

// NacosGet reads dataID in group through the open API of the node at addr;
// a missing config is an error that says "status 404".
func NacosGet(addr, group, dataID string) (string, error) {
	resp, err := nacosHTTP.Get("http://" + addr + "/nacos/v1/cs/configs?" + url.Values{"dataId": {dataID}, "group": {group}}.Encode())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("get %s/%s at %s: status %d: %s", group, dataID, addr, resp.StatusCode, b)
	}
	return string(b), nil
}

func nacosDelete(addr, group, dataID string) error {
	req, err := http.NewRequest(http.MethodDelete, "http://"+addr+"/nacos/v1/cs/configs?"+url.Values{"dataId": {dataID}, "group": {group}}.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := nacosHTTP.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
