package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// Fallback routing end to end: payserver binaries on real Redis
// and MariaDB, payments without a channel.

// routedBody is a payment without a channel.
func routedBody(requestID, biz string) map[string]any {
	b := payBody(requestID, biz, "")
	delete(b, "channel")
	return b
}

// routedOrder is the part of an order answer the routing tests read.
type routedOrder struct {
	OrderNo    string `json:"orderNo"`
	Channel    string `json:"channel"`
	Status     string `json:"status"`
	RoutedFrom *[]struct {
		Channel string `json:"channel"`
		Reason  string `json:"reason"`
	} `json:"routedFrom"`
}

func (o routedOrder) from() string {
	if o.RoutedFrom == nil {
		return "pinned"
	}
	var parts []string
	for _, s := range *o.RoutedFrom {
		parts = append(parts, s.Channel+" "+s.Reason)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func mustRouted(t testing.TB, r reply) routedOrder {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var o routedOrder
	if err := json.Unmarshal(r.Body, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// storedRoute reads an order's channel and routed_from from the database.
func storedRoute(t testing.TB, dsn, requestID string) (string, string) {
	t.Helper()
	var ch, from string
	dbScan(t, dsn, "SELECT channel, routed_from FROM orders WHERE request_id = '"+requestID+"'",
		func(scan func(...any) error) error { return scan(&ch, &from) })
	return ch, from
}

// TestRoutingFallsBackOnAFullChannel: the first candidate takes payments
// until its window is full, then the next one does, each order saying
// where it went and what it skipped, stored durably; when every candidate
// is full the answer is 429 with each candidate and the smallest wait; a
// retry replays the stored order on its channel; metrics, the route report
// and the dashboard count the fallbacks; a bizType without a route needs a
// channel.
func TestRoutingFallsBackOnAFullChannel(t *testing.T) {
	biz := testutil.UniqueName("RFULL")
	dsn := testutil.MustFreshMySQL(t)
	s := startServer(t, serverOptions{DSN: dsn, Limits: fmt.Sprintf(
		"routes:\n  %[1]s: [ALIPAY, WECHAT]\nlimits:\n  %[1]s:ALIPAY: {limit: 2, window: 1m}\n  %[1]s:WECHAT: {limit: 2, window: 30s}\n", biz)})

	want := []struct{ channel, from string }{{"ALIPAY", "[]"}, {"ALIPAY", "[]"}, {"WECHAT", "[ALIPAY limited]"}, {"WECHAT", "[ALIPAY limited]"}}
	for i, w := range want {
		id := fmt.Sprintf("%s-%d", biz, i)
		o := mustRouted(t, s.pay(t, routedBody(id, biz)))
		if o.Channel != w.channel || o.from() != w.from || o.Status != "SUCCEEDED" {
			t.Fatalf("payment %d: %s %s %s; want %s %s SUCCEEDED", i, o.Channel, o.from(), o.Status, w.channel, w.from)
		}
		ch, stored := storedRoute(t, dsn, id)
		if ch != w.channel || (i >= 2) != strings.Contains(stored, `"reason":"limited"`) {
			t.Fatalf("payment %d stored on %s with routed_from %q", i, ch, stored)
		}
	}

	r := s.pay(t, routedBody(biz+"-full", biz))
	if r.Status != 429 {
		t.Fatalf("every candidate full: %d %s, want 429", r.Status, r.Body)
	}
	var limited struct {
		Details struct {
			Candidates []struct {
				Channel      string `json:"channel"`
				Reason       string `json:"reason"`
				RetryAfterMs int64  `json:"retryAfterMs"`
				Rule         struct {
					Limit    int64 `json:"limit"`
					WindowMs int64 `json:"windowMs"`
				} `json:"rule"`
			} `json:"candidates"`
		} `json:"details"`
	}
	_ = json.Unmarshal(r.Body, &limited)
	c := limited.Details.Candidates
	if len(c) != 2 || c[0].Channel != "ALIPAY" || c[1].Channel != "WECHAT" || c[0].Reason != "limited" ||
		c[0].Rule.Limit != 2 || c[0].Rule.WindowMs != 60_000 || c[1].Rule.WindowMs != 30_000 || c[1].RetryAfterMs > 30_000 {
		t.Fatalf("candidates %+v", c)
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Fatalf("Retry-After %q, want WECHAT's wait (at most 30 s), the smallest", r.Header.Get("Retry-After"))
	}

	again := mustRouted(t, s.pay(t, routedBody(biz+"-0", biz)))
	if again.Channel != "ALIPAY" || again.from() != "[]" {
		t.Fatalf("retry: %s %s, want the stored order on ALIPAY", again.Channel, again.from())
	}
	if r := s.pay(t, payBody(biz+"-0", biz, "ALIPAY")); r.Status != 409 {
		t.Fatalf("retry pinned to ALIPAY: %d, want 409 (another payload)", r.Status)
	}
	if r := s.pay(t, routedBody(biz+"-x", "NOROUTE")); r.Status != 400 || !strings.Contains(string(r.Body), `"field":"channel"`) {
		t.Fatalf("no route and no channel: %d %s, want 400 naming channel", r.Status, r.Body)
	}

	if n := s.metric(t, "payserver_route_fallbacks_total", `biz_type="`+biz+`"`, `from="ALIPAY"`, `to="WECHAT"`, `reason="limited"`); n != 2 {
		t.Errorf("fallbacks ALIPAY->WECHAT limited = %v, want 2", n)
	}
	if n := s.metric(t, "payserver_route_fallbacks_total", `biz_type="`+biz+`"`, `to="none"`); n != 2 {
		t.Errorf("fallbacks to none = %v, want 2 (both candidates of the 429)", n)
	}
	rep := s.do(t, http.MethodGet, "/reports/routes?bizType="+biz, nil, nil)
	var report struct {
		Routes []struct {
			BizType   string           `json:"bizType"`
			Payments  map[string]int64 `json:"payments"`
			Fallbacks []struct {
				From, To, Reason string
				Count            int64
			} `json:"fallbacks"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(rep.Body, &report); err != nil || len(report.Routes) != 1 {
		t.Fatalf("report %d %s", rep.Status, rep.Body)
	}
	got := report.Routes[0]
	if got.Payments["ALIPAY"] != 2 || got.Payments["WECHAT"] != 2 || len(got.Fallbacks) != 3 {
		t.Fatalf("report %s", rep.Body)
	}
	dash := string(s.do(t, http.MethodGet, "/dashboard", nil, nil).Body)
	i := strings.Index(dash, `data-biz="`+biz+`"`)
	row, _, _ := strings.Cut(dash[max(i, 0):], "</tr>")
	if i < 0 || !strings.Contains(row, "[ALIPAY, WECHAT]") || !strings.Contains(row, "none admits") {
		t.Fatalf("dashboard lacks the route, or does not say no candidate admits now:\n%s", row)
	}
}

// TestRoutingSkipsAClosedChannel: a candidate with limit 0 is skipped as
// closed; when every candidate is closed the 429 has no Retry-After.
func TestRoutingSkipsAClosedChannel(t *testing.T) {
	biz := testutil.UniqueName("RCLOSED")
	s := startServer(t, serverOptions{Limits: fmt.Sprintf(
		"routes:\n  %[1]s: [ALIPAY, WECHAT]\n  %[1]sX: [ALIPAY]\nlimits:\n  %[1]s:ALIPAY: 0\n  %[1]s:WECHAT: 10\n  %[1]sX:ALIPAY: 0\n", biz)})
	o := mustRouted(t, s.pay(t, routedBody(biz+"-1", biz)))
	if o.Channel != "WECHAT" || o.from() != "[ALIPAY closed]" {
		t.Fatalf("%s %s, want WECHAT from [ALIPAY closed]", o.Channel, o.from())
	}
	r := s.pay(t, routedBody(biz+"-2", biz+"X"))
	if r.Status != 429 || r.Header.Get("Retry-After") != "" || !strings.Contains(string(r.Body), `"closed":true`) {
		t.Fatalf("every candidate closed: %d %v %s", r.Status, r.Header, r.Body)
	}
}

// TestRoutingSkipsAFailingChannel: a simulator that fails every call
// (error rate 1) answers CHANNEL_ERROR until its breaker opens after
// routing.breakerFailures calls; from then on routed payments skip
// it as unhealthy, while a payment pinned to it is still sent. A channel
// that refuses connections (nothing sent) moves the payment on within the
// same request.
func TestRoutingSkipsAFailingChannel(t *testing.T) {
	biz := testutil.UniqueName("RFAIL")
	s := startServer(t, serverOptions{
		Config: "routing: {breakerFailures: 3, breakerCooldown: 1m}\nchannels:\n  ALIPAY: {errorRate: 1}\n  WECHAT: {}\n  UNIONPAY: {refuseRate: 1}\n",
		Limits: fmt.Sprintf("routes:\n  %[1]s: [ALIPAY, WECHAT]\n  %[1]sR: [UNIONPAY, WECHAT]\nlimits:\n  %[1]s:ALIPAY: 100\n", biz),
	})
	for i := range 3 {
		if r := s.pay(t, routedBody(fmt.Sprintf("%s-f%d", biz, i), biz)); r.Status != 502 {
			t.Fatalf("call %d to the failing channel: %d %s, want 502 (it was reached: never re-sent)", i, r.Status, r.Body)
		}
	}
	if s.metric(t, "payserver_channel_breaker_open", `channel="ALIPAY"`) != 1 {
		t.Fatal("ALIPAY's breaker is not open after 3 failures")
	}
	o := mustRouted(t, s.pay(t, routedBody(biz+"-ok", biz)))
	if o.Channel != "WECHAT" || o.from() != "[ALIPAY unhealthy]" {
		t.Fatalf("%s %s, want WECHAT from [ALIPAY unhealthy]", o.Channel, o.from())
	}
	if n := s.metric(t, "payserver_simulator_calls_total", `channel="ALIPAY"`); n != 3 {
		t.Fatalf("ALIPAY called %v times, want 3: skipped while open", n)
	}
	if r := s.pay(t, payBody(biz+"-pinned", biz, "ALIPAY")); r.Status != 502 {
		t.Fatalf("pinned to ALIPAY: %d, want 502: pinned payments are never rerouted", r.Status)
	}

	moved := mustRouted(t, s.pay(t, routedBody(biz+"-r", biz+"R")))
	if moved.Channel != "WECHAT" || moved.from() != "[UNIONPAY unhealthy]" || moved.Status != "SUCCEEDED" {
		t.Fatalf("%s %s %s, want SUCCEEDED on WECHAT from [UNIONPAY unhealthy]", moved.Channel, moved.from(), moved.Status)
	}
	if n := s.metric(t, "payserver_simulator_calls_total", `channel="UNIONPAY"`); n != 0 {
		t.Fatalf("UNIONPAY counted %v calls; a refused connection sends nothing", n)
	}
}

// TestRoutingNeverResendsATimeout: a channel that does not answer leaves
// the payment UNKNOWN on it; the next candidate is never called.
func TestRoutingNeverResendsATimeout(t *testing.T) {
	biz := testutil.UniqueName("RTIME")
	s := startServer(t, serverOptions{
		Config: "channels:\n  ALIPAY: {timeoutRate: 1}\n  WECHAT: {}\n",
		Env:    map[string]string{"PAYSERVER_CHANNEL_TIMEOUT": "300ms"},
		Limits: fmt.Sprintf("routes:\n  %[1]s: [ALIPAY, WECHAT]\nlimits:\n  %[1]s:ALIPAY: 100\n", biz),
	})
	o := mustRouted(t, s.pay(t, routedBody(biz+"-1", biz)))
	if o.Status != "UNKNOWN" || o.Channel != "ALIPAY" {
		t.Fatalf("%s on %s, want UNKNOWN on ALIPAY", o.Status, o.Channel)
	}
	if n := s.metric(t, "payserver_simulator_calls_total", `channel="WECHAT"`); n != 0 {
		t.Fatalf("WECHAT called %v times after ALIPAY timed out; want 0", n)
	}
}

// TestRoutingExactOverThreeInstances: two candidates of limits 10 and 15,
// 100 concurrent unpinned payments spread over three instances on one
// Redis and MariaDB: exactly 25 are admitted, 10 on the first and 15 on
// the second, and the windows hold exactly the stored orders.
func TestRoutingExactOverThreeInstances(t *testing.T) {
	biz := testutil.UniqueName("REXACT")
	dsn := testutil.MustFreshMySQL(t)
	limits := fmt.Sprintf("routes:\n  %[1]s: [ALIPAY, WECHAT]\nlimits:\n  %[1]s:ALIPAY: {limit: 10, window: 1m}\n  %[1]s:WECHAT: {limit: 15, window: 1m}\n", biz)
	var servers []*server
	for range 3 {
		servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: dsn, Fast: true}))
	}
	var mu sync.Mutex
	statuses, channels := map[int]int{}, map[string]int{}
	parallel(100, 100, func(i int) {
		r := servers[i%3].pay(t, routedBody(fmt.Sprintf("%s-%d", biz, i), biz))
		mu.Lock()
		defer mu.Unlock()
		statuses[r.Status]++
		if r.Status == 200 {
			var o routedOrder
			_ = json.Unmarshal(r.Body, &o)
			channels[o.Channel]++
		}
	})
	t.Logf("statuses %v, channels %v", statuses, channels)
	if statuses[200] != 25 || statuses[429] != 75 || channels["ALIPAY"] != 10 || channels["WECHAT"] != 15 {
		t.Fatalf("statuses %v channels %v; want 25 admitted (10 ALIPAY, 15 WECHAT) and 75 refused", statuses, channels)
	}
	stored := map[string]int{}
	dbScan(t, dsn, "SELECT channel, COUNT(*) FROM orders WHERE biz_type = '"+biz+"' GROUP BY channel", func(scan func(...any) error) error {
		var ch string
		var n int
		err := scan(&ch, &n)
		stored[ch] = n
		return err
	})
	if stored["ALIPAY"] != 10 || stored["WECHAT"] != 15 {
		t.Fatalf("stored %v", stored)
	}
	assertOccupancy(t, servers[0], biz, map[string]int64{"ALIPAY": 10, "WECHAT": 15})
}

// assertOccupancy checks each key's window holds exactly want.
func assertOccupancy(t testing.TB, s *server, biz string, want map[string]int64) {
	t.Helper()
	var usage struct {
		Keys []struct {
			Key     string `json:"key"`
			Windows []struct {
				Count *int64 `json:"count"`
			} `json:"windows"`
		} `json:"keys"`
	}
	r := s.do(t, http.MethodGet, "/channels/usage", nil, nil)
	if err := json.Unmarshal(r.Body, &usage); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, k := range usage.Keys {
		if ch, ok := strings.CutPrefix(k.Key, biz+":"); ok && len(k.Windows) > 0 && k.Windows[0].Count != nil {
			got[ch] = *k.Windows[0].Count
		}
	}
	for ch, n := range want {
		if got[ch] != n {
			t.Fatalf("window occupancy %v, want %v: every slot held is one stored order", got, want)
		}
	}
}

// TestRoutingRetriesAndConcurrentDuplicates: 30 unpinned requestIds, each
// sent 4 times at once over three instances, while the first candidate
// fills up: every copy of a requestId answers the same order on the same
// channel, the channels are called once per requestId, and each window
// holds exactly its channel's stored orders (a duplicate that took a slot
// on another channel than the winner's and lost the claim released it;
// internal/pay's TestLostClaimReleasesItsSlotElsewhere forces that case).
// A later retry replays.
func TestRoutingRetriesAndConcurrentDuplicates(t *testing.T) {
	biz := testutil.UniqueName("RDUP")
	dsn := testutil.MustFreshMySQL(t)
	limits := fmt.Sprintf("routes:\n  %[1]s: [ALIPAY, WECHAT]\nlimits:\n  %[1]s:ALIPAY: {limit: 12, window: 1m}\n  %[1]s:WECHAT: {limit: 100, window: 1m}\n", biz)
	config := "channels:\n  ALIPAY: {latency: 20ms}\n  WECHAT: {latency: 20ms}\n  UNIONPAY: {}\n"
	var servers []*server
	for range 3 {
		servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: dsn, Config: config, Fast: true}))
	}
	const ids, copies = 30, 4
	var mu sync.Mutex
	answers := map[string]map[string]bool{} // requestId -> "orderNo channel"
	parallel(ids*copies, ids*copies, func(i int) {
		id := fmt.Sprintf("%s-%d", biz, i/copies)
		o := mustRouted(t, servers[i%3].pay(t, routedBody(id, biz)))
		mu.Lock()
		defer mu.Unlock()
		if answers[id] == nil {
			answers[id] = map[string]bool{}
		}
		answers[id][o.OrderNo+" "+o.Channel] = true
	})
	perChannel := map[string]int64{}
	for id, got := range answers {
		if len(got) != 1 {
			t.Fatalf("%s answered %v: want one order", id, got)
		}
		for k := range got {
			perChannel[strings.Fields(k)[1]]++
		}
	}
	var calls float64
	for _, s := range servers {
		calls += s.metric(t, "payserver_simulator_calls_total")
	}
	if calls != ids {
		t.Fatalf("%v channel calls for %d requestIds", calls, ids)
	}
	t.Logf("orders per channel %v", perChannel)
	// ALIPAY may end below 12: a losing duplicate's slot there is held
	// until the winner's order on WECHAT is final, and payments arriving
	// meanwhile find ALIPAY full. It never ends with a slot no order holds.
	if perChannel["ALIPAY"] > 12 || perChannel["ALIPAY"]+perChannel["WECHAT"] != ids {
		t.Fatalf("orders per channel %v, want ALIPAY at most 12 and %d in all", perChannel, ids)
	}
	assertOccupancy(t, servers[0], biz, perChannel)
	for k := range answers[biz+"-0"] {
		o := mustRouted(t, servers[2].pay(t, routedBody(biz+"-0", biz)))
		if o.OrderNo+" "+o.Channel != k {
			t.Fatalf("later retry answered %s %s, want %s", o.OrderNo, o.Channel, k)
		}
	}
}

// TestRoutingLiveRouteChangeFile: a route change in the watched file
// applies live; a route naming a channel the server does not have is
// refused, naming the bizType and the channel, and the routes in force
// stay; both are in the audit history.
func TestRoutingLiveRouteChangeFile(t *testing.T) {
	biz := testutil.UniqueName("RLIVE")
	path := filepath.Join(t.TempDir(), "limits.yaml")
	doc := func(route string) string {
		return fmt.Sprintf("routes:\n  %[1]s: [%[2]s]\nlimits:\n  %[1]s:ALIPAY: 100\n", biz, route)
	}
	mustWrite(t, path, doc("ALIPAY, WECHAT"))
	s := startServer(t, serverOptions{LimitsPath: path})
	liveRouteChange(t, s, biz, func(route string) {
		tmp := path + ".tmp"
		mustWrite(t, tmp, doc(route))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRoutingLiveRouteChangeNacos: the same through a real Nacos server.
func TestRoutingLiveRouteChangeNacos(t *testing.T) {
	addr := testutil.Env(t, "PAYSERVER_TEST_NACOS_ADDR")
	biz := testutil.UniqueName("RNACOS")
	dataID := "routes-" + strings.ToLower(biz)
	doc := func(route string) string {
		return fmt.Sprintf("routes:\n  %[1]s: [%[2]s]\nlimits:\n  %[1]s:ALIPAY: 100\n", biz, route)
	}
	nacosPublish(t, addr, dataID, doc("ALIPAY, WECHAT"))
	s := nacosServer(t, addr, dataID, "", "")
	liveRouteChange(t, s, biz, func(route string) { nacosPublish(t, addr, dataID, doc(route)) })
}

func liveRouteChange(t *testing.T, s *server, biz string, publish func(route string)) {
	t.Helper()
	var n int
	routedTo := func() string {
		n++
		return mustRouted(t, s.pay(t, routedBody(fmt.Sprintf("%s-%d", biz, n), biz))).Channel
	}
	waitFor(t, "the first document", 10*time.Second, func() bool { return routedTo() == "ALIPAY" })
	publish("WECHAT, ALIPAY")
	waitFor(t, "the new route to apply", 10*time.Second, func() bool { return routedTo() == "WECHAT" })
	var limits struct {
		Routes map[string][]string `json:"routes"`
	}
	if err := json.Unmarshal(s.do(t, http.MethodGet, "/limits", nil, nil).Body, &limits); err != nil ||
		strings.Join(limits.Routes[biz], ",") != "WECHAT,ALIPAY" {
		t.Fatalf("GET /limits routes %v (%v), want %s: [WECHAT, ALIPAY]", limits.Routes, err, biz)
	}

	publish("XPAY, ALIPAY")
	waitFor(t, "the bad route to be refused", 10*time.Second, func() bool {
		l := s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)
		e, _ := l["lastRefusal"].(map[string]any)["error"].(string)
		return strings.Contains(e, "routes: "+biz+": unknown channel XPAY")
	})
	if got := routedTo(); got != "WECHAT" {
		t.Fatalf("after a refused route, payments went to %s; want WECHAT (the route in force)", got)
	}
	var history struct {
		Entries []struct {
			Kind    string   `json:"kind"`
			Diff    []string `json:"diff"`
			Refusal *string  `json:"refusal"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(s.do(t, http.MethodGet, "/limits/history?limit=20", nil, nil).Body, &history); err != nil {
		t.Fatal(err)
	}
	var changed, refused bool
	for _, e := range history.Entries {
		changed = changed || e.Kind == "change" && strings.Join(e.Diff, "\n") == "route "+biz+": [ALIPAY, WECHAT] -> [WECHAT, ALIPAY]"
		refused = refused || e.Kind == "refused" && e.Refusal != nil && strings.Contains(*e.Refusal, "unknown channel XPAY")
	}
	if !changed || !refused {
		t.Fatalf("history %+v: route change recorded %v, refusal recorded %v", history.Entries, changed, refused)
	}
}
