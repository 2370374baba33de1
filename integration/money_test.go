package integration

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"payserver/internal/testutil"
)

// dbOrders returns requestId -> status of every order in the database.
func dbOrders(t testing.TB, dsn string) map[string]string {
	t.Helper()
	out := map[string]string{}
	dbScan(t, dsn, "SELECT request_id, status FROM orders", func(scan func(...any) error) error {
		var id, st string
		err := scan(&id, &st)
		out[id] = st
		return err
	})
	return out
}

func (s *server) signal(sig syscall.Signal) {
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("payserver did not exit after %v", sig)
	}
}

// TestSameRequestIDAcrossInstances: 200 concurrent POSTs of one requestId
// spread over 3 instances give one order and one channel call.
func TestSameRequestIDAcrossInstances(t *testing.T) {
	dsn := testutil.MustFreshMySQL(t)
	var servers []*server
	for i := 0; i < 3; i++ {
		servers = append(servers, startServer(t, serverOptions{DSN: dsn, Config: "channels:\n  ALIPAY: {latency: 100ms}\n"}))
	}
	var mu sync.Mutex
	orderNos, statuses := map[string]int{}, map[int]int{}
	parallel(200, 200, func(i int) {
		r := servers[i%3].pay(t, payBody("same-200", "ONLINE_PAY", "ALIPAY"))
		mu.Lock()
		defer mu.Unlock()
		statuses[r.Status]++
		if r.Status == 200 {
			orderNos[r.JSON(t)["orderNo"].(string)]++
		}
	})
	calls := 0.0
	for _, s := range servers {
		calls += s.metric(t, "payserver_simulator_calls_total", `channel="ALIPAY"`)
	}
	if statuses[200] != 200 || len(orderNos) != 1 || calls != 1 {
		t.Fatalf("statuses %v, distinct orders %d, channel calls %v; want 200x200, 1 order, 1 call", statuses, len(orderNos), calls)
	}
	if n := len(dbOrders(t, dsn)); n != 1 {
		t.Fatalf("%d orders in the database, want 1", n)
	}
}

type seen struct {
	mu     sync.Mutex
	status map[string]int // requestId -> last HTTP status (0: no answer)
}

func (s *seen) set(id string, st int) {
	s.mu.Lock()
	s.status[id] = st
	s.mu.Unlock()
}

// signalUnderLoad sends payments from 16 workers, signals the server after
// 700 ms, and returns the status each requestId got (0: no answer).
func signalUnderLoad(s *server, prefix string, sig syscall.Signal) *seen {
	got := &seen{status: map[string]int{}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%d-%d", prefix, w, i)
				got.set(id, s.payQuietly(id, "ONLINE_PAY"))
			}
		}(w)
	}
	time.Sleep(700 * time.Millisecond)
	s.signal(sig)
	close(stop)
	wg.Wait()
	return got
}

// payQuietly posts without failing the test on transport errors (the server
// is being killed); it returns 0 when no answer came.
func (s *server) payQuietly(id, biz string) int {
	req := fmt.Sprintf(`{"requestId":%q,"bizType":%q,"channel":"ALIPAY","merchantId":"M","amount":100,"currency":"CNY"}`, id, biz)
	resp, err := httpClient.Post(s.base+"/pay", "application/json", stringsReader(req))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// TestSIGTERMDrainsInFlight: SIGTERM mid-load drains in-flight requests;
// every 2xx the client saw has its order, and every order in the database
// was answered to the client.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	dsn := testutil.MustFreshMySQL(t)
	s := startServer(t, serverOptions{DSN: dsn, Config: "channels:\n  ALIPAY: {latency: 150ms}\n"})
	got := signalUnderLoad(s, "term", syscall.SIGTERM)
	orders := dbOrders(t, dsn)
	ok := 0
	for id, st := range got.status {
		_, stored := orders[id]
		switch {
		case st == 200:
			ok++
			if !stored {
				t.Errorf("%s: client saw 200 but there is no order", id)
			}
		case stored && orders[id] != "UNKNOWN":
			t.Errorf("%s: order %s exists but the client got %d", id, orders[id], st)
		}
	}
	for id, st := range orders {
		if _, asked := got.status[id]; !asked {
			t.Errorf("order %s (%s) was never asked for", id, st)
		}
		if st == "PROCESSING" {
			t.Errorf("order %s left PROCESSING after a graceful shutdown", id)
		}
	}
	if ok < 10 {
		t.Fatalf("only %d payments succeeded before SIGTERM; the load did not run", ok)
	}
	t.Logf("%d answered 200 before and during the drain, %d orders", ok, len(orders))
}

// TestSIGKILLRestartRetries: after SIGKILL mid-load, a restart plus client
// retries with the same requestIds give exactly one order each, and orders
// whose outcome was lost become UNKNOWN, never success.
func TestSIGKILLRestartRetries(t *testing.T) {
	dsn := testutil.MustFreshMySQL(t)
	s := startServer(t, serverOptions{DSN: dsn, Fast: true, Config: "channels:\n  ALIPAY: {latency: 100ms}\n",
		Env: map[string]string{"PAYSERVER_ORDER_STALE_AFTER": "2s", "PAYSERVER_CHANNEL_TIMEOUT": "500ms"}})
	got := signalUnderLoad(s, "kill", syscall.SIGKILL)
	// What the killed process left: orders whose channel call may have run.
	atKill := dbOrders(t, dsn)
	s.start()
	// Retry every requestId the client ever sent, twice.
	for round := 0; round < 2; round++ {
		for id := range got.status {
			st := s.payQuietly(id, "ONLINE_PAY")
			if st != 200 && st != 409 {
				t.Fatalf("retry of %s after restart: %d", id, st)
			}
		}
	}
	time.Sleep(3 * time.Second) // past PAYSERVER_ORDER_STALE_AFTER: the sweeper runs
	orders := dbOrders(t, dsn)
	for id := range got.status {
		st, ok := orders[id]
		if !ok {
			t.Errorf("%s has no order after retries", id)
			continue
		}
		if st == "PROCESSING" {
			t.Errorf("%s still PROCESSING after the stale sweep", id)
		}
	}
	if len(orders) != len(got.status) {
		t.Errorf("%d orders for %d requestIds", len(orders), len(got.status))
	}
	if d := s.metric(t, "payserver_simulator_duplicate_calls_total"); d != 0 {
		t.Errorf("the restarted instance called the channel again for %v requestIds", d)
	}
	// The simulator's memory died with the process, so the duplicate
	// counter above cannot see a repeat of a call made before the kill.
	// Count instead: the restarted instance may call the channel only for
	// requestIds that had no order at the kill; an order claimed before it
	// (channel maybe called) must never be paid again, and one left
	// PROCESSING must end UNKNOWN, never succeeded.
	fresh := 0
	for id := range got.status {
		if _, ok := atKill[id]; !ok {
			fresh++
		}
	}
	if calls := s.metric(t, "payserver_simulator_calls_total"); calls > float64(fresh) {
		t.Errorf("the restarted instance made %v channel calls for %d requestIds that had no order at the kill", calls, fresh)
	}
	stuck := 0
	for id, st := range atKill {
		if st == "PROCESSING" {
			stuck++
			if orders[id] != "UNKNOWN" {
				t.Errorf("%s was PROCESSING at the kill and is now %s, want UNKNOWN", id, orders[id])
			}
		}
	}
	t.Logf("%d orders at the kill (%d PROCESSING), %d requestIds new after it", len(atKill), stuck, fresh)
}

// dbQuery returns the first column of every row of query.
func dbQuery(t testing.TB, dsn, query string) []string {
	t.Helper()
	var out []string
	dbScan(t, dsn, query, func(scan func(...any) error) error {
		var v string
		err := scan(&v)
		out = append(out, v)
		return err
	})
	return out
}

// dbScan runs query on the database of dsn and calls row for every row.
func dbScan(t testing.TB, dsn, query string, row func(scan func(...any) error) error) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}
