package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"payserver/internal/testutil"
)

// TestDatabaseOutage: with the database unreachable, POST /pay answers 503
// DEPENDENCY_UNAVAILABLE, takes no limiter slot for good, leaves no order
// behind, /readyz names the database, and service resumes on its own.
func TestDatabaseOutage(t *testing.T) {
	cfg, p := proxiedMySQL(t)
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	biz := testutil.UniqueName("DBOUT")
	s := startServer(t, serverOptions{DSN: cfg.FormatDSN(), Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 100, window: 1m}\n", biz)})
	if r := s.pay(t, payBody("db-0", biz, "ALIPAY")); r.Status != 200 {
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	p.Down()
	wantDependencyDown(t, s, biz, "db", 10, "database")
	// No slot is held for the refused requests: only db-0 is in the window.
	rdb := testutil.MustRedis(t)
	members, err := rdb.ZRange(context.Background(), "payserver:rl:{ALIPAY}:"+biz+":60000", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0] != "db-0" {
		t.Fatalf("window members %v, want only db-0", members)
	}
	p.Up()
	waitFor(t, "payments to resume", 15*time.Second, func() bool {
		return s.pay(t, payBody(fmt.Sprintf("db-after-%d", time.Now().UnixNano()), biz, "ALIPAY")).Status == 200
	})
	for i := 1; i <= 10; i++ {
		if r := s.do(t, "GET", fmt.Sprintf("/pay/db-%d", i), nil, nil); r.Status != 404 {
			t.Fatalf("db-%d left an order behind: %d %s", i, r.Status, r.Body)
		}
	}
}

// wantDependencyDown sends n payments (requestIds prefix-1..n) and wants each
// answered 503 DEPENDENCY_UNAVAILABLE, and /readyz answering 503 naming dep.
func wantDependencyDown(t *testing.T, s *server, biz, prefix string, n int, dep string) {
	t.Helper()
	for i := 1; i <= n; i++ {
		r := s.pay(t, payBody(fmt.Sprintf("%s-%d", prefix, i), biz, "ALIPAY"))
		if r.Status != 503 || r.JSON(t)["code"] != "DEPENDENCY_UNAVAILABLE" {
			t.Fatalf("request %d with %s down: %d %s, want 503 DEPENDENCY_UNAVAILABLE", i, dep, r.Status, r.Body)
		}
	}
	if r := s.do(t, "GET", "/readyz", nil, nil); r.Status != 503 || !strings.Contains(string(r.Body), dep) {
		t.Fatalf("readyz with %s down: %d %s, want 503 naming %s", dep, r.Status, r.Body, dep)
	}
}

// TestClaimLostConnection: the connection dies while the claim INSERT is on
// its way (the proxy cuts every connection that sends it). The flow cannot
// tell whether the claim was committed, so it answers 503 with nothing
// sent, keeps the limiter slot (the seed design released it), and leaves no
// order; once the database answers, the retry of that requestId pays once.
func TestClaimLostConnection(t *testing.T) {
	cfg, p := proxiedMySQL(t)
	biz := testutil.UniqueName("LOST")
	s := startServer(t, serverOptions{DSN: cfg.FormatDSN(), Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 5, window: 1m}\n", biz)})
	p.CutOn([]byte("INSERT INTO orders"))
	r := s.pay(t, payBody("lost-1", biz, "ALIPAY"))
	if r.Status != 503 || r.JSON(t)["code"] != "DEPENDENCY_UNAVAILABLE" {
		t.Fatalf("claim with its connection cut: %d %s, want 503 DEPENDENCY_UNAVAILABLE", r.Status, r.Body)
	}
	if details, _ := r.JSON(t)["details"].(map[string]any); details["orderNo"] != nil {
		t.Fatalf("details %v name an order: the channel was not called", details)
	}
	rdb := testutil.MustRedis(t)
	members, err := rdb.ZRange(context.Background(), "payserver:rl:{ALIPAY}:"+biz+":60000", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 || members[0] != "lost-1" {
		t.Fatalf("window members %v, want lost-1's slot kept", members)
	}
	if r := s.do(t, "GET", "/pay/lost-1", nil, nil); r.Status != 404 {
		t.Fatalf("an order was left behind: %d %s", r.Status, r.Body)
	}
	p.CutOn(nil)
	if r := s.pay(t, payBody("lost-1", biz, "ALIPAY")); r.Status != 200 || r.JSON(t)["status"] != "SUCCEEDED" {
		t.Fatalf("retry: %d %s, want 200 SUCCEEDED", r.Status, r.Body)
	}
	if calls := s.metric(t, "payserver_simulator_calls_total", `channel="ALIPAY"`); calls != 1 {
		t.Fatalf("channel calls %v, want 1", calls)
	}
}

// proxiedMySQL creates a fresh database on the real MariaDB and returns its
// DSN config pointing through a cuttable proxy, and the proxy.
func proxiedMySQL(t *testing.T) (*mysql.Config, *proxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testutil.MustFreshMySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, cfg.Addr)
	cfg.Addr = p.addr
	return cfg, p
}
