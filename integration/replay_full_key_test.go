package integration

import (
	"fmt"
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
