package integration

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestEmbeddedWindowsSurviveACrash: in embedded mode (no Redis), a day's
// count and money caps hold across a kill -9 and a restart on the same data
// dir: what was admitted before still counts, as a Redis with persistence
// would keep it. Before, the embedded limiter was an in-memory server, and
// a restart admitted the whole day again.
func TestEmbeddedWindowsSurviveACrash(t *testing.T) {
	s := startServer(t, serverOptions{Embedded: true, Limits: "limits:\n" +
		"  DEMO:WECHAT: [{limit: 3, calendar: day}]\n" +
		"  ONLINE_PAY:WECHAT: [{amount: 5000, calendar: day, currency: CNY}]\n"})
	waitLimitsLoaded(t, s)
	for i := range 3 {
		if r := s.pay(t, payBody(fmt.Sprintf("demo-%d", i), "DEMO", "WECHAT")); r.Status != 200 {
			t.Fatalf("payment %d: %d %s", i, r.Status, r.Body)
		}
	}
	for i := range 2 { // 2 × 1999 of the 5000 cap
		if r := s.pay(t, payBody(fmt.Sprintf("money-%d", i), "ONLINE_PAY", "WECHAT")); r.Status != 200 {
			t.Fatalf("money payment %d: %d %s", i, r.Status, r.Body)
		}
	}
	s.signal(syscall.SIGKILL)
	s.start()
	waitLimitsLoaded(t, s)
	if r := s.pay(t, payBody("demo-after", "DEMO", "WECHAT")); r.Status != 429 {
		t.Errorf("a 4th payment under 3/day after the restart: %d %s, want 429", r.Status, r.Body)
	}
	if r := s.pay(t, payBody("money-after", "ONLINE_PAY", "WECHAT")); r.Status != 429 {
		t.Errorf("a 3rd 1999 under a 5000 day cap after the restart: %d %s, want 429", r.Status, r.Body)
	}
	// A retry of a payment made before the crash is still the same payment.
	if r := s.pay(t, payBody("demo-0", "DEMO", "WECHAT")); r.Status != 200 {
		t.Errorf("replay of demo-0 after the restart: %d %s, want 200", r.Status, r.Body)
	}
}

// waitLimitsLoaded waits until s is ready (its limits document in force).
func waitLimitsLoaded(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for s.do(t, http.MethodGet, "/readyz", nil, nil).Status != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 15s:\n%s", s.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
