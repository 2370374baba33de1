package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"payserver/internal/testutil"
)

const channelsConfig = `
channelTimeout: 400ms
channels:
  ALIPAY: {}
  WECHAT: {}
  UNIONPAY: {}
  SLOWPAY: {timeoutRate: 1}
  BUSYPAY: {errorRate: 1}
  DECLINEPAY: {declineRate: 1}
`

func TestPayContract(t *testing.T) {
	biz := testutil.UniqueName("BIZ")
	limits := fmt.Sprintf(`window: 1s
limits:
  %[1]s:ALIPAY: {limit: 1, window: 1m}
  %[1]s:WECHAT: -1
  %[1]s:UNIONPAY: 0
`, biz)
	s := startServer(t, serverOptions{Limits: limits, Config: channelsConfig})

	t.Run("processed payment has every contract field", func(t *testing.T) {
		r := s.pay(t, payBody("ok-1", biz, "WECHAT"))
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		o := r.JSON(t)
		for _, f := range []string{"orderNo", "requestId", "bizType", "channel", "merchantId", "amount", "currency", "status", "channelTradeNo", "createdAt"} {
			if _, ok := o[f]; !ok {
				t.Errorf("field %s missing: %s", f, r.Body)
			}
		}
		if o["status"] != "SUCCEEDED" || o["amount"] != float64(1999) || o["requestId"] != "ok-1" {
			t.Fatalf("unexpected order %s", r.Body)
		}
		g := s.do(t, http.MethodGet, "/pay/ok-1", nil, nil)
		if g.Status != 200 || g.JSON(t)["orderNo"] != o["orderNo"] {
			t.Fatalf("GET /pay/ok-1: %d %s", g.Status, g.Body)
		}
		// The first answer shows the times as stored (MariaDB keeps whole
		// microseconds), as GET and a replay do.
		replay := s.pay(t, payBody("ok-1", biz, "WECHAT")).JSON(t)
		for _, f := range []string{"createdAt", "updatedAt"} {
			if got, want := o[f], g.JSON(t)[f]; got != want || replay[f] != want {
				t.Errorf("%s: POST answered %v, replay %v, GET %v; want all alike", f, got, replay[f], want)
			}
		}
	})

	t.Run("limited request gets 429 with Retry-After and details", func(t *testing.T) {
		if r := s.pay(t, payBody("lim-1", biz, "ALIPAY")); r.Status != 200 {
			t.Fatalf("first: %d %s", r.Status, r.Body)
		}
		r := s.pay(t, payBody("lim-2", biz, "ALIPAY"))
		if r.Status != 429 {
			t.Fatalf("second: %d %s, want 429", r.Status, r.Body)
		}
		body := r.JSON(t)
		d := body["details"].(map[string]any)
		if body["code"] != "REQUEST_LIMITED" || body["requestId"] != "lim-2" || d["limit"] != float64(1) ||
			d["windowMs"] != float64(60000) || d["bizType"] != biz || d["channel"] != "ALIPAY" {
			t.Fatalf("429 body %s", r.Body)
		}
		ra := d["retryAfterMs"].(float64)
		if ra <= 0 || ra > 60000 {
			t.Fatalf("retryAfterMs %v", ra)
		}
		if h := r.Header.Get("Retry-After"); h == "" || h == "0" {
			t.Fatalf("Retry-After %q", h)
		}
		if g := s.do(t, http.MethodGet, "/pay/lim-2", nil, nil); g.Status != 404 {
			t.Fatalf("a refused request left an order: %d %s", g.Status, g.Body)
		}
	})

	t.Run("replay returns the stored order even when the window is full", func(t *testing.T) {
		first := s.do(t, http.MethodGet, "/pay/lim-1", nil, nil)
		calls := s.metric(t, "payserver_simulator_calls_total", `channel="ALIPAY"`)
		r := s.pay(t, payBody("lim-1", biz, "ALIPAY"))
		if r.Status != 200 || r.JSON(t)["orderNo"] != first.JSON(t)["orderNo"] {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		if got := s.metric(t, "payserver_simulator_calls_total", `channel="ALIPAY"`); got != calls {
			t.Fatalf("replay called the channel: calls %v -> %v", calls, got)
		}
	})

	t.Run("same requestId with another payload is a conflict", func(t *testing.T) {
		b := payBody("ok-1", biz, "WECHAT")
		b["amount"] = 2000
		r := s.pay(t, b)
		if r.Status != 409 || r.JSON(t)["code"] != "IDEMPOTENCY_CONFLICT" {
			t.Fatalf("%d %s, want 409 IDEMPOTENCY_CONFLICT", r.Status, r.Body)
		}
	})

	t.Run("limit 0 refuses everything, missing key is unlimited", func(t *testing.T) {
		if r := s.pay(t, payBody("zero-1", biz, "UNIONPAY")); r.Status != 429 {
			t.Fatalf("limit 0: %d %s", r.Status, r.Body)
		}
		other := testutil.UniqueName("NOLIMIT")
		for i := 0; i < 20; i++ {
			if r := s.pay(t, payBody(fmt.Sprintf("nl-%d", i), other, "ALIPAY")); r.Status != 200 {
				t.Fatalf("missing key, request %d: %d %s", i, r.Status, r.Body)
			}
		}
		for i := 0; i < 20; i++ {
			if r := s.pay(t, payBody(fmt.Sprintf("m1-%d", i), biz, "WECHAT")); r.Status != 200 {
				t.Fatalf("-1 key, request %d: %d %s", i, r.Status, r.Body)
			}
		}
	})

	t.Run("unknown channel", func(t *testing.T) {
		r := s.pay(t, payBody("ch-1", biz, "NOPAY"))
		if r.Status != 400 || r.JSON(t)["code"] != "CHANNEL_NOT_SUPPORTED" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})

	t.Run("channel timeout is UNKNOWN, never success", func(t *testing.T) {
		r := s.pay(t, payBody("slow-1", biz, "SLOWPAY"))
		if r.Status != 200 || r.JSON(t)["status"] != "UNKNOWN" {
			t.Fatalf("%d %s, want 200 UNKNOWN", r.Status, r.Body)
		}
		calls := s.metric(t, "payserver_simulator_calls_total", `channel="SLOWPAY"`)
		if r2 := s.pay(t, payBody("slow-1", biz, "SLOWPAY")); r2.JSON(t)["status"] != "UNKNOWN" {
			t.Fatalf("replay of unknown: %s", r2.Body)
		}
		if got := s.metric(t, "payserver_simulator_calls_total", `channel="SLOWPAY"`); got != calls {
			t.Fatal("an UNKNOWN payment was retried against the channel")
		}
	})

	t.Run("channel system error is 502, also on replay", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			r := s.pay(t, payBody("busy-1", biz, "BUSYPAY"))
			if r.Status != 502 || r.JSON(t)["code"] != "CHANNEL_ERROR" {
				t.Fatalf("attempt %d: %d %s", i, r.Status, r.Body)
			}
		}
		if got := s.metric(t, "payserver_simulator_calls_total", `channel="BUSYPAY"`); got != 1 {
			t.Fatalf("channel calls %v, want 1", got)
		}
	})

	t.Run("decline is 200 FAILED", func(t *testing.T) {
		r := s.pay(t, payBody("dec-1", biz, "DECLINEPAY"))
		if r.Status != 200 || r.JSON(t)["status"] != "FAILED" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})

	t.Run("unknown order is 404", func(t *testing.T) {
		r := s.do(t, http.MethodGet, "/pay/never-seen", nil, nil)
		if r.Status != 404 || r.JSON(t)["code"] != "ORDER_NOT_FOUND" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})

	t.Run("health and readiness", func(t *testing.T) {
		if r := s.do(t, http.MethodGet, "/healthz", nil, nil); r.Status != 200 {
			t.Fatalf("healthz %d", r.Status)
		}
		if r := s.do(t, http.MethodGet, "/readyz", nil, nil); r.Status != 200 {
			t.Fatalf("readyz %d %s", r.Status, r.Body)
		}
	})
}

func TestPayRejectsBadInput(t *testing.T) {
	s := startServer(t, serverOptions{Config: channelsConfig})
	valid := `"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","currency":"CNY"`
	tests := []struct {
		name, body, field string
	}{
		{"malformed JSON", `{"requestId":`, "body"},
		{"not an object", `[1,2]`, "body"},
		{"empty body", ``, "body"},
		{"missing amount", `{` + valid + `}`, "amount"},
		{"fractional amount", `{` + valid + `,"amount":1.5}`, "amount"},
		{"string amount", `{` + valid + `,"amount":"100"}`, "amount"},
		{"zero amount", `{` + valid + `,"amount":0}`, "amount"},
		{"amount too large", `{` + valid + `,"amount":1000000000001}`, "amount"},
		{"lowercase currency", `{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","currency":"cny","amount":1}`, "currency"},
		{"requestId with space", `{"requestId":"r 1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","currency":"CNY","amount":1}`, "requestId"},
		{"requestId with brace", `{"requestId":"r}1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","currency":"CNY","amount":1}`, "requestId"},
		{"requestId too long", `{"requestId":"` + strings.Repeat("a", 65) + `","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","currency":"CNY","amount":1}`, "requestId"},
		{"bizType with colon", `{"requestId":"r1","bizType":"A:B","channel":"ALIPAY","merchantId":"M","currency":"CNY","amount":1}`, "bizType"},
		{"channel lowercase", `{"requestId":"r1","bizType":"A","channel":"alipay","merchantId":"M","currency":"CNY","amount":1}`, "channel"},
		{"merchantId empty", `{"requestId":"r1","bizType":"A","channel":"ALIPAY","merchantId":"","currency":"CNY","amount":1}`, "merchantId"},
		{"subject too long", `{` + valid + `,"amount":1,"subject":"` + strings.Repeat("字", 129) + `"}`, "subject"},
		{"unknown field", `{` + valid + `,"amount":1,"amout":1}`, "amout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, http.MethodPost, "/pay", []byte(tt.body), nil)
			if r.Status != 400 {
				t.Fatalf("%d %s, want 400", r.Status, r.Body)
			}
			body := r.JSON(t)
			if body["code"] != "INVALID_REQUEST" {
				t.Fatalf("code %v", body["code"])
			}
			fields, _ := body["details"].(map[string]any)["fields"].([]any)
			found := false
			for _, f := range fields {
				if f.(map[string]any)["field"] == tt.field && f.(map[string]any)["reason"] != "" {
					found = true
				}
			}
			if !found {
				t.Fatalf("details do not name field %q: %s", tt.field, r.Body)
			}
		})
	}
	t.Run("body over 64 KiB", func(t *testing.T) {
		big := `{` + valid + `,"amount":1,"subject":"` + strings.Repeat("x", 70<<10) + `"}`
		r := s.do(t, http.MethodPost, "/pay", []byte(big), nil)
		if r.Status != 413 || r.JSON(t)["code"] != "BODY_TOO_LARGE" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("unknown route and method are JSON errors", func(t *testing.T) {
		if r := s.do(t, http.MethodGet, "/nope", nil, nil); r.Status != 404 || r.JSON(t)["code"] != "NOT_FOUND" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if r := s.do(t, http.MethodDelete, "/pay", nil, nil); r.Status != 405 || r.JSON(t)["code"] != "METHOD_NOT_ALLOWED" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
}

// TestConcurrentDuplicatesOneOrderOneCall: 100 concurrent POSTs of one
// requestId create one order and one channel call, and every answer is the
// same order.
func TestConcurrentDuplicatesOneOrderOneCall(t *testing.T) {
	s := startServer(t, serverOptions{Config: "channels:\n  ALIPAY: {latency: 50ms}\n"})
	body := payBody("dup-100", "ONLINE_PAY", "ALIPAY")
	var mu sync.Mutex
	orderNos := map[string]int{}
	statuses := map[int]int{}
	parallel(100, 100, func(int) {
		r := s.pay(t, body)
		mu.Lock()
		defer mu.Unlock()
		statuses[r.Status]++
		if r.Status == 200 {
			orderNos[r.JSON(t)["orderNo"].(string)]++
		}
	})
	if statuses[200] != 100 || len(orderNos) != 1 {
		t.Fatalf("statuses %v, distinct orders %d; want 100x200 and one order", statuses, len(orderNos))
	}
	if got := s.metric(t, "payserver_simulator_calls_total", `channel="ALIPAY"`); got != 1 {
		t.Fatalf("channel calls = %v, want exactly 1", got)
	}
}

// TestExactAcrossProcesses: three payserver processes on one Redis (and on
// a 3-master Redis Cluster) and one database, 64 concurrent callers, demand
// 6x the limit: exactly the limit is admitted.
func TestExactAcrossProcesses(t *testing.T) {
	backends := map[string]func(t *testing.T) map[string]string{
		"redis": func(t *testing.T) map[string]string {
			return map[string]string{"PAYSERVER_REDIS_ADDR": testutil.RedisAddr(t)}
		},
		"cluster": func(t *testing.T) map[string]string {
			return map[string]string{"PAYSERVER_REDIS_ADDR": strings.Join(testutil.RedisClusterAddrs(t), ",")}
		},
	}
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			biz := testutil.UniqueName("EXACT")
			limits := fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: 50, window: 1m}, {limit: 500, window: 1h}]\n", biz)
			dsn := testutil.MustFreshMySQL(t)
			var servers []*server
			for i := 0; i < 3; i++ {
				// A generous Redis timeout: this test is about the shared
				// path, and a race-instrumented binary on two cores can be
				// slow. The degraded counter below proves no decision
				// bypassed Redis.
				env := map[string]string{"PAYSERVER_LIMITER_TIMEOUT": "2s"}
				for k, v := range backend(t) {
					env[k] = v
				}
				servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: dsn, Env: env, Config: nearCacheOff}))
			}
			var mu sync.Mutex
			statuses := map[int]int{}
			parallel(300, 64, func(i int) {
				r := servers[i%3].pay(t, payBody(fmt.Sprintf("x-%d", i), biz, "ALIPAY"))
				mu.Lock()
				statuses[r.Status]++
				mu.Unlock()
			})
			if statuses[200] != 50 || statuses[429] != 250 {
				t.Fatalf("statuses %v, want exactly 50x200 and 250x429", statuses)
			}
			for i, s := range servers {
				if d := s.metric(t, "payserver_limiter_decisions_total", `source="redis"`); d == 0 {
					t.Fatalf("instance %d took no decision on Redis", i)
				}
				if d := s.metric(t, "payserver_limiter_degraded_total"); d != 0 {
					t.Fatalf("instance %d took %v degraded decisions; the test must run on Redis", i, d)
				}
				// Coalescing is on by default: every Redis decision went
				// through it, in no more calls than checks.
				calls, checks := s.metric(t, "payserver_limiter_redis_calls_total"), s.metric(t, "payserver_limiter_redis_checks_total")
				if checks == 0 || calls == 0 || calls > checks {
					t.Fatalf("instance %d: coalescer sent %v calls for %v checks", i, calls, checks)
				}
				t.Logf("instance %d: %v checks in %v Redis calls", i, checks, calls)
			}
		})
	}
}

func TestLimitsLiveReloadAndLastKnownGood(t *testing.T) {
	biz := testutil.UniqueName("LIVE")
	s := startServer(t, serverOptions{Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: 0\n", biz)})
	path := s.env["PAYSERVER_LIMITS_FILE"]
	if r := s.pay(t, payBody("live-0", biz, "ALIPAY")); r.Status != 429 {
		t.Fatalf("closed key: %d", r.Status)
	}
	mustWrite(t, path, fmt.Sprintf("limits:\n  %s:ALIPAY: 2\n", biz))
	waitFor(t, "the new limit to apply", 5*time.Second, func() bool {
		return s.pay(t, payBody(fmt.Sprintf("live-%d", time.Now().UnixNano()), biz, "ALIPAY")).Status == 200
	})
	for i, bad := range []string{"limits:\n  bad key: 1\n", "", "limits: {}\n"} {
		mustWrite(t, path, bad)
		waitFor(t, "the refusal to show in /limits", 5*time.Second, func() bool {
			l := s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)
			return l["lastRefusal"].(map[string]any)["error"] != "" && l["refusals"].(float64) >= float64(i+1)
		})
	}
	l := s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)
	rules := l["limits"].([]any)
	if len(rules) != 1 || rules[0].(map[string]any)["rule"] != "2/1s" {
		t.Fatalf("limits after bad pushes: %v, want the last good 2/1s", rules)
	}
	if l["refusals"].(float64) < 3 {
		t.Fatalf("refusals %v, want 3", l["refusals"])
	}
	if got := s.metric(t, "payserver_config_events_total", `event="refused"`); got < 3 {
		t.Fatalf("refusal metric %v, want >= 3", got)
	}
	// Reverting to the document in force supersedes the refusal.
	mustWrite(t, path, fmt.Sprintf("limits:\n  %s:ALIPAY: 2\n", biz))
	waitFor(t, "the revert to supersede the refusal in /limits", 5*time.Second, func() bool {
		return s.do(t, http.MethodGet, "/limits", nil, nil).JSON(t)["lastRefusal"].(map[string]any)["superseded"] == true
	})
	if !strings.Contains(s.logs(), "supersedes the refusal") {
		t.Fatal("no log line marks the recovery")
	}
}

func TestEmbeddedDefault(t *testing.T) {
	s := startServer(t, serverOptions{Embedded: true, Limits: "limits:\n  DEMO:ALIPAY: 2\n"})
	for i, want := range []int{200, 200, 429} {
		if r := s.pay(t, payBody(fmt.Sprintf("emb-%d", i), "DEMO", "ALIPAY")); r.Status != want {
			t.Fatalf("request %d: %d %s, want %d", i, r.Status, r.Body, want)
		}
	}
	if r := s.pay(t, payBody("emb-0", "DEMO", "ALIPAY")); r.Status != 200 {
		t.Fatalf("replay in embedded mode: %d", r.Status)
	}
	if r := s.do(t, http.MethodGet, "/readyz", nil, nil); r.Status != 200 {
		t.Fatalf("readyz %d %s", r.Status, r.Body)
	}
	if !strings.Contains(s.logs(), "embedded") {
		t.Fatal("log does not say which backend is in use")
	}
}
