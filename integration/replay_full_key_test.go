package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"payserver/internal/testutil"
)

// TestReplayOfOldOrderOnFullKey checks the idempotency contract where the
// limiter cannot help: a retried admitted requestId always gets its order,
// never a 429, even when its key is full and the limiter no longer holds it
// (its window has passed), or holds it in one window while another, full,
// window refuses it. A design that asks the limiter first and answers its
// refusal without looking the requestId up fails both cases (see
// docs/PERFORMANCE.md, "The 429 path"). The near-cache is on (the default)
// and warmed by a refusal first, so the retry is refused in process too.
func TestReplayOfOldOrderOnFullKey(t *testing.T) {
	passed, held := testutil.UniqueName("PASSED"), testutil.UniqueName("HELD")
	limits := fmt.Sprintf(`limits:
  %s:ALIPAY: {limit: 1, window: 1s}
  %s:ALIPAY: [{limit: 1, window: 1s}, {limit: 100, window: 1h}]
`, passed, held)
	s := startServer(t, serverOptions{Limits: limits, Config: channelsConfig})

	tests := []struct {
		name string
		biz  string
	}{
		{name: "window passed", biz: passed},
		{name: "held by the long window, refused by the full short one", biz: held},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := s.pay(t, payBody(tt.biz+"-first", tt.biz, "ALIPAY"))
			if first.Status != 200 {
				t.Fatalf("first payment: got %d, want 200: %s", first.Status, first.Body)
			}
			want := first.JSON(t)["orderNo"]
			time.Sleep(1200 * time.Millisecond) // past the 1 s window
			if r := s.pay(t, payBody(tt.biz+"-filler", tt.biz, "ALIPAY")); r.Status != 200 {
				t.Fatalf("filler: got %d, want 200: %s", r.Status, r.Body)
			}
			if r := s.pay(t, payBody(tt.biz+"-refused", tt.biz, "ALIPAY")); r.Status != 429 {
				t.Fatalf("a new requestId on the full key: got %d, want 429: %s", r.Status, r.Body)
			}
			retry := s.pay(t, payBody(tt.biz+"-first", tt.biz, "ALIPAY"))
			if retry.Status != 200 {
				t.Fatalf("retry of the admitted requestId on the full key: got %d, want 200 with its order: %s", retry.Status, retry.Body)
			}
			if got := retry.JSON(t)["orderNo"]; got != want {
				t.Fatalf("retry: got orderNo %v, want %v (the first payment's)", got, want)
			}
			// The retry took no slot: the key is still full for new requestIds.
			if r := s.pay(t, payBody(tt.biz+"-refused-2", tt.biz, "ALIPAY")); r.Status != 429 {
				t.Fatalf("a new requestId after the retry: got %d, want 429: %s", r.Status, r.Body)
			}
		})
	}
}

// TestReplayTakesNoSlot: a retried admitted requestId is answered from its
// order and never recorded by the limiter, so it takes no slot, on a key
// with room as on a full one: retried after its window has passed (the
// limiter no longer holds it), retried many times at once while it is
// still new, and retried on other instances, one of them started after the
// payment (as after a restart: nothing of the payment in its memory).
// Asking the limiter first would admit the first retry as a new member and
// count it, so the last new requestId of each case would be refused.
func TestReplayTakesNoSlot(t *testing.T) {
	passed, dups, across := testutil.UniqueName("RPASS"), testutil.UniqueName("RDUP"), testutil.UniqueName("RACROSS")
	limits := fmt.Sprintf(`limits:
  %s:ALIPAY: {limit: 2, window: 1s}
  %s:ALIPAY: {limit: 2, window: 1h}
  %s:ALIPAY: {limit: 2, window: 2s}
`, passed, dups, across)
	dsn := testutil.MustFreshMySQL(t)
	a := startServer(t, serverOptions{Limits: limits, Config: channelsConfig, DSN: dsn})
	b := startServer(t, serverOptions{Limits: limits, Config: channelsConfig, DSN: dsn})

	// admitted counts the limiter's admissions of biz on the given servers.
	admitted := func(biz string, servers ...*server) float64 {
		var n float64
		for _, s := range servers {
			n += s.metric(t, "payserver_limiter_decisions_total", `biz_type="`+biz+`"`, `result="admitted"`)
		}
		return n
	}
	mustOrder := func(t *testing.T, r reply, want any) {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("retry: got %d, want 200 with the stored order: %s", r.Status, r.Body)
		}
		if got := r.JSON(t)["orderNo"]; got != want {
			t.Fatalf("retry: got orderNo %v, want %v (the first payment's)", got, want)
		}
	}

	t.Run("retried after its window passed, on a key with room", func(t *testing.T) {
		first := a.pay(t, payBody(passed+"-first", passed, "ALIPAY"))
		if first.Status != 200 {
			t.Fatalf("first payment: got %d: %s", first.Status, first.Body)
		}
		time.Sleep(1200 * time.Millisecond) // past the 1 s window
		mustOrder(t, a.pay(t, payBody(passed+"-first", passed, "ALIPAY")), first.JSON(t)["orderNo"])
		// Both slots of the new window are still free.
		for i := 0; i < 2; i++ {
			if r := a.pay(t, payBody(fmt.Sprintf("%s-new-%d", passed, i), passed, "ALIPAY")); r.Status != 200 {
				t.Fatalf("new requestId %d after the retry: got %d, want 200 (the retry must not take a slot): %s", i, r.Status, r.Body)
			}
		}
		if r := a.pay(t, payBody(passed+"-new-2", passed, "ALIPAY")); r.Status != 429 {
			t.Fatalf("a third new requestId: got %d, want 429", r.Status)
		}
		if got := admitted(passed, a); got != 3 {
			t.Fatalf("limiter admissions: got %v, want 3 (the first payment and two new ones; never the retry)", got)
		}
	})

	t.Run("concurrent duplicates of a new requestId take one slot", func(t *testing.T) {
		const n = 16
		replies := make([]reply, n)
		var wg sync.WaitGroup
		for i := range replies {
			s := []*server{a, b}[i%2]
			wg.Add(1)
			go func() { defer wg.Done(); replies[i] = s.pay(t, payBody(dups+"-same", dups, "ALIPAY")) }()
		}
		wg.Wait()
		var orderNo any
		for i, r := range replies {
			if r.Status != 200 {
				t.Fatalf("duplicate %d: got %d, want 200: %s", i, r.Status, r.Body)
			}
			if got := r.JSON(t)["orderNo"]; orderNo == nil {
				orderNo = got
			} else if got != orderNo {
				t.Fatalf("duplicate %d: orderNo %v, want %v: one requestId, one order", i, got, orderNo)
			}
		}
		// Limit 2 per hour: the duplicates took one slot, so one more fits.
		if r := b.pay(t, payBody(dups+"-other", dups, "ALIPAY")); r.Status != 200 {
			t.Fatalf("a second requestId: got %d, want 200 (the duplicates must take one slot): %s", r.Status, r.Body)
		}
		if r := a.pay(t, payBody(dups+"-third", dups, "ALIPAY")); r.Status != 429 {
			t.Fatalf("a third requestId: got %d, want 429", r.Status)
		}
		for i := range replies {
			mustOrder(t, []*server{a, b}[i%2].pay(t, payBody(dups+"-same", dups, "ALIPAY")), orderNo)
		}
	})

	t.Run("retried on other instances, one started after the payment", func(t *testing.T) {
		first := a.pay(t, payBody(across+"-first", across, "ALIPAY"))
		if first.Status != 200 {
			t.Fatalf("first payment: got %d: %s", first.Status, first.Body)
		}
		want := first.JSON(t)["orderNo"]
		c := startServer(t, serverOptions{Limits: limits, Config: channelsConfig, DSN: dsn}) // a restart
		time.Sleep(2200 * time.Millisecond)                                                  // past the 2 s window
		before := admitted(across, a, b, c)
		mustOrder(t, b.pay(t, payBody(across+"-first", across, "ALIPAY")), want)
		mustOrder(t, c.pay(t, payBody(across+"-first", across, "ALIPAY")), want)
		for i, s := range []*server{b, c} {
			if r := s.pay(t, payBody(fmt.Sprintf("%s-new-%d", across, i), across, "ALIPAY")); r.Status != 200 {
				t.Fatalf("new requestId %d after the retries: got %d, want 200: %s", i, r.Status, r.Body)
			}
		}
		// The key is full now: the retries are still answered, on every instance.
		for _, s := range []*server{a, b, c} {
			mustOrder(t, s.pay(t, payBody(across+"-first", across, "ALIPAY")), want)
		}
		if r := c.pay(t, payBody(across+"-new-2", across, "ALIPAY")); r.Status != 429 {
			t.Fatalf("a third new requestId: got %d, want 429", r.Status)
		}
		if got := admitted(across, a, b, c) - before; got != 2 {
			t.Fatalf("limiter admissions after the payment: got %v, want 2 (the new requestIds; never a retry)", got)
		}
	})
}
