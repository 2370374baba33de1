package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// Client tokens of the limits-service tests.
const (
	refundsToken = "tok-refunds-0123456789abcdef"
	payoutsToken = "tok-payouts-0123456789abcdef"
	adminTok     = "tok-admin-0123456789abcdef"
)

func limitsEnv(extra map[string]string) map[string]string {
	env := map[string]string{
		"PAYSERVER_CLIENT_TOKENS": "refunds=" + refundsToken + ",payouts=" + payoutsToken,
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func (s *server) acquire(t testing.TB, token string, body map[string]any) reply {
	t.Helper()
	b, _ := json.Marshal(body)
	return s.do(t, http.MethodPost, "/v1/limits/acquire", b, bearer(token))
}

func (s *server) release(t testing.TB, token string, body map[string]any) reply {
	t.Helper()
	b, _ := json.Marshal(body)
	return s.do(t, http.MethodPost, "/v1/limits/release", b, bearer(token))
}

func (s *server) peek(t testing.TB, token, query string) reply {
	t.Helper()
	return s.do(t, http.MethodGet, "/v1/limits/peek?"+query, nil, bearer(token))
}

func slot(biz, ch, id string) map[string]any {
	return map[string]any{"bizType": biz, "channel": ch, "requestId": id}
}

// used returns windows[i].used of an acquire or peek answer.
func used(t testing.TB, r reply, i int) float64 {
	t.Helper()
	ws, _ := r.JSON(t)["windows"].([]any)
	if len(ws) <= i {
		t.Fatalf("answer has %d windows, want more than %d: %s", len(ws), i, r.Body)
	}
	return ws[i].(map[string]any)["used"].(float64)
}

// TestLimitsAPISharesPayExactly: POST /pay and /v1/limits/acquire count
// against one key across 3 instances on real Redis and MariaDB: 100
// payments and 100 acquisitions at once on a limit of 50 admit exactly 50.
func TestLimitsAPISharesPayExactly(t *testing.T) {
	biz := testutil.UniqueName("SHARE")
	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 50, window: 1m}\n", biz)
	dsn := testutil.MustFreshMySQL(t)
	var servers []*server
	for i := 0; i < 3; i++ {
		env := limitsEnv(map[string]string{"PAYSERVER_LIMITER_TIMEOUT": "2s"})
		servers = append(servers, startServer(t, serverOptions{Limits: limits, DSN: dsn, Env: env, Config: nearCacheOff}))
	}
	var mu sync.Mutex
	statuses := map[string]int{}
	parallel(200, 64, func(i int) {
		s := servers[i%3]
		var r reply
		kind := "pay"
		if i%2 == 0 {
			r = s.pay(t, payBody(fmt.Sprintf("p-%d", i), biz, "ALIPAY"))
		} else {
			kind = "acquire"
			r = s.acquire(t, refundsToken, slot(biz, "ALIPAY", fmt.Sprintf("a-%d", i)))
		}
		if r.Status == 429 && r.Header.Get("Retry-After") == "" {
			t.Errorf("%s 429 without Retry-After", kind)
		}
		mu.Lock()
		statuses[fmt.Sprintf("%s %d", kind, r.Status)]++
		mu.Unlock()
	})
	admitted := statuses["pay 200"] + statuses["acquire 200"]
	if admitted != 50 || statuses["pay 429"]+statuses["acquire 429"] != 150 {
		t.Fatalf("statuses %v: %d admitted, want exactly 50 (and 150 refused)", statuses, admitted)
	}
	t.Logf("admitted %d payments and %d acquisitions", statuses["pay 200"], statuses["acquire 200"])
	for i, s := range servers {
		if d := s.metric(t, "payserver_limiter_degraded_total"); d != 0 {
			t.Fatalf("instance %d took %v degraded decisions", i, d)
		}
	}
}

// TestLimitsAPIIdempotentAcquireAndRelease: a retried acquire is admitted
// without a second slot; release frees the slot once, and again finds
// none (404 SLOT_NOT_FOUND, nothing changed), as another client's release
// does; a POST /pay requestId cannot be released by a client.
func TestLimitsAPIIdempotentAcquireAndRelease(t *testing.T) {
	biz := testutil.UniqueName("IDEM")
	s := startServer(t, serverOptions{Env: limitsEnv(nil),
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: [{limit: 2, window: 1m}, {limit: 100, window: 1h}]\n", biz)})
	first := s.acquire(t, refundsToken, slot(biz, "ALIPAY", "r-1"))
	again := s.acquire(t, refundsToken, slot(biz, "ALIPAY", "r-1"))
	if first.Status != 200 || again.Status != 200 {
		t.Fatalf("acquire twice: %d, %d; want 200, 200\n%s", first.Status, again.Status, again.Body)
	}
	if dup := again.JSON(t)["duplicate"]; dup != true {
		t.Errorf("retried acquire: duplicate %v, want true", dup)
	}
	if u0, u1 := used(t, again, 0), used(t, again, 1); u0 != 1 || u1 != 1 {
		t.Errorf("after a retried acquire windows hold %v and %v, want 1 and 1", u0, u1)
	}
	if r := s.acquire(t, payoutsToken, slot(biz, "ALIPAY", "r-2")); r.Status != 200 {
		t.Fatalf("second slot: %d %s", r.Status, r.Body)
	}
	if r := s.acquire(t, refundsToken, slot(biz, "ALIPAY", "r-3")); r.Status != 429 {
		t.Fatalf("third slot on a limit of 2: %d, want 429", r.Status)
	}
	// A caller's requestIds are its own: payouts can neither release
	// refunds' r-1 nor share its slot.
	if r := s.release(t, payoutsToken, slot(biz, "ALIPAY", "r-1")); r.Status != 404 || r.JSON(t)["code"] != "SLOT_NOT_FOUND" {
		t.Fatalf("payouts releasing refunds' r-1: %d %s; want 404 SLOT_NOT_FOUND", r.Status, r.Body)
	}
	if u := used(t, s.peek(t, refundsToken, "bizType="+biz+"&channel=ALIPAY"), 0); u != 2 {
		t.Fatalf("after payouts released refunds' r-1 the window holds %v, want 2", u)
	}
	if r := s.acquire(t, payoutsToken, slot(biz, "ALIPAY", "r-1")); r.Status != 429 {
		t.Fatalf("payouts acquiring refunds' r-1 on a full window: %d, want 429 (a slot of its own, not refunds')", r.Status)
	}
	if r := s.release(t, refundsToken, slot(biz, "ALIPAY", "r-1")); r.Status != 200 || r.JSON(t)["released"] != true {
		t.Fatalf("release: %d %s", r.Status, r.Body)
	}
	if r := s.release(t, refundsToken, slot(biz, "ALIPAY", "r-1")); r.Status != 404 || r.JSON(t)["code"] != "SLOT_NOT_FOUND" || r.JSON(t)["requestId"] != "r-1" {
		t.Fatalf("second release: %d %s; want 404 SLOT_NOT_FOUND naming r-1", r.Status, r.Body)
	}
	p := s.peek(t, refundsToken, "bizType="+biz+"&channel=ALIPAY")
	if u := used(t, p, 0); u != 1 {
		t.Errorf("after releasing r-1 twice the window holds %v, want 1 (r-2 only)", u)
	}
	if r := s.acquire(t, refundsToken, slot(biz, "ALIPAY", "r-3")); r.Status != 200 {
		t.Fatalf("acquire after the release: %d, want 200", r.Status)
	}
	// A payment's slot is payserver's to free.
	if r := s.pay(t, payBody("pay-held", "ONLINE_PAY", "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	if r := s.release(t, refundsToken, slot("ONLINE_PAY", "ALIPAY", "pay-held")); r.Status != 409 {
		t.Fatalf("releasing a POST /pay requestId: %d, want 409\n%s", r.Status, r.Body)
	}
}

// TestLimitsAPIPeekConsumesNothing: any number of peeks leave the windows
// as they were, and peek says what acquire then finds.
func TestLimitsAPIPeekConsumesNothing(t *testing.T) {
	biz := testutil.UniqueName("PEEK")
	s := startServer(t, serverOptions{Env: limitsEnv(nil),
		Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 3, window: 1m}\n", biz)})
	q := "bizType=" + biz + "&channel=ALIPAY&amount=100&currency=CNY"
	for i := 0; i < 10; i++ {
		p := s.peek(t, refundsToken, q)
		if p.Status != 200 || p.JSON(t)["allowed"] != true || used(t, p, 0) != 0 {
			t.Fatalf("peek #%d: %d %s; want allowed with 0 used", i, p.Status, p.Body)
		}
	}
	for i := 0; i < 3; i++ {
		if r := s.acquire(t, refundsToken, slot(biz, "ALIPAY", fmt.Sprintf("k-%d", i))); r.Status != 200 {
			t.Fatalf("acquire %d after 10 peeks: %d, want 200 (peeks consumed slots)", i, r.Status)
		}
	}
	p := s.peek(t, refundsToken, q)
	if p.JSON(t)["allowed"] != false || used(t, p, 0) != 3 {
		t.Fatalf("peek on a full window: %s, want allowed false and 3 used", p.Body)
	}
	if r := s.acquire(t, refundsToken, slot(biz, "ALIPAY", "k-3")); r.Status != 429 {
		t.Fatalf("acquire on a full window: %d, want 429", r.Status)
	}
	if p := s.peek(t, refundsToken, "bizType=UNLISTED&channel=ALIPAY"); p.JSON(t)["allowed"] != true {
		t.Errorf("peek on an unlimited key: %s, want allowed", p.Body)
	}
}

// TestLimitsAPIMaxWait: a refused acquire or payment with maxWaitMs is
// admitted once the window frees, never beyond the limit; a wait that
// cannot end in time is refused at once; waiters per key are bounded; a
// client that leaves stops its wait.
func TestLimitsAPIMaxWait(t *testing.T) {
	biz := testutil.UniqueName("WAIT")
	slow := testutil.UniqueName("SLOW")
	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 2, window: 1s}\n  %s:ALIPAY: {limit: 1, window: 20s}\n", biz, slow)
	s := startServer(t, serverOptions{Env: limitsEnv(nil), Limits: limits})
	// One with at most 2 waiters per key, sharing Redis (and so the full
	// window of slow).
	bounded := startServer(t, serverOptions{Env: limitsEnv(map[string]string{"PAYSERVER_LIMIT_MAX_WAITERS": "2"}), Limits: limits})

	t.Run("admitted after the window frees", func(t *testing.T) {
		start := time.Now()
		for i := 0; i < 2; i++ {
			if r := s.acquire(t, refundsToken, slot(biz, "ALIPAY", fmt.Sprintf("f-%d", i))); r.Status != 200 {
				t.Fatalf("fill %d: %d", i, r.Status)
			}
		}
		var wg sync.WaitGroup
		got := make([]reply, 4)
		elapsed := make([]time.Duration, 4)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					body := payBody(fmt.Sprintf("wp-%s-%d", biz, i), biz, "ALIPAY")
					body["maxWaitMs"] = 5000
					got[i] = s.pay(t, body)
				} else {
					body := slot(biz, "ALIPAY", fmt.Sprintf("wa-%d", i))
					body["maxWaitMs"] = 5000
					got[i] = s.acquire(t, refundsToken, body)
				}
				elapsed[i] = time.Since(start)
			}()
		}
		wg.Wait()
		for i, r := range got {
			if r.Status != 200 {
				t.Errorf("waiter %d: %d %s, want 200 after waiting", i, r.Status, r.Body)
			}
		}
		// 2 fill the first second, 2 the next: the 4 waiters need two
		// more windows, so the last is admitted after at least ~2 s.
		latest := max(elapsed[0], elapsed[1], elapsed[2], elapsed[3])
		if latest < 1900*time.Millisecond {
			t.Errorf("4 waiters on 2/1s admitted within %v: beyond the limit", latest)
		}
	})

	t.Run("refused at once when the window frees too late", func(t *testing.T) {
		if r := s.acquire(t, refundsToken, slot(slow, "ALIPAY", "s-fill")); r.Status != 200 {
			t.Fatalf("fill: %d", r.Status)
		}
		body := slot(slow, "ALIPAY", "s-late")
		body["maxWaitMs"] = 1000
		start := time.Now()
		r := s.acquire(t, refundsToken, body)
		if r.Status != 429 || time.Since(start) > time.Second {
			t.Fatalf("got %d after %v, want 429 within maxWaitMs", r.Status, time.Since(start))
		}
		if d := r.JSON(t)["details"].(map[string]any); d["retryAfterMs"].(float64) < 15000 {
			t.Errorf("retryAfterMs %v, want the ~20s until the window frees", d["retryAfterMs"])
		}
	})

	t.Run("bounded waiters and disconnects", func(t *testing.T) {
		// The 20s window of slow is full; maxWaitMs 25000 waits for it.
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := json.Marshal(map[string]any{"bizType": slow, "channel": "ALIPAY", "requestId": fmt.Sprintf("q-%d", i), "maxWaitMs": 25000})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, bounded.base+"/v1/limits/acquire", strings.NewReader(string(b)))
				req.Header.Set("Authorization", "Bearer "+refundsToken)
				req.Header.Set("Content-Type", "application/json")
				if resp, err := httpClient.Do(req); err == nil {
					resp.Body.Close()
					t.Errorf("waiter %d answered %d before its client left", i, resp.StatusCode)
				}
			}()
		}
		waitFor(t, "2 waiters", 5*time.Second, func() bool {
			return bounded.metric(t, "payserver_limiter_waiting") == 2
		})
		body := slot(slow, "ALIPAY", "q-third")
		body["maxWaitMs"] = 25000
		start := time.Now()
		r := bounded.acquire(t, refundsToken, body)
		if r.Status != 429 || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("third waiter past PAYSERVER_LIMIT_MAX_WAITERS=2: %d after %v, want an immediate 429", r.Status, time.Since(start))
		}
		cancel()
		wg.Wait()
		waitFor(t, "the left clients' waits to stop", 3*time.Second, func() bool {
			return bounded.metric(t, "payserver_limiter_waits_total", `outcome="cancelled"`) == 2
		})
		if n := bounded.metric(t, "payserver_limiter_waits_total", `outcome="queue_full"`); n != 1 {
			t.Errorf("queue_full waits %v, want 1", n)
		}
	})
}
