package integration

import (
	"fmt"
	"testing"

	"payserver/internal/testutil"
)

// TestAmountGivenBackOnlyWhenNoMoneyMoved: an amount cap on real Redis and
// MariaDB. A payment the channel declined gives its amount back (a second
// one fits); a successful one and one whose outcome is unknown keep theirs
// (a second one is refused by the amount rule).
func TestAmountGivenBackOnlyWhenNoMoneyMoved(t *testing.T) {
	biz := testutil.UniqueName("AMT")
	limits := fmt.Sprintf(`limits:
  %[1]s:DECLINEPAY: [{amount: 3000, window: 1m}]
  %[1]s:ALIPAY: [{amount: 3000, window: 1m}]
  %[1]s:SLOWPAY: [{amount: 3000, window: 1m}]
`, biz)
	s := startServer(t, serverOptions{Limits: limits, Config: channelsConfig})
	for _, tc := range []struct {
		channel, status string
		secondStatus    int
	}{
		{"DECLINEPAY", "FAILED", 200},
		{"ALIPAY", "SUCCEEDED", 429},
		{"SLOWPAY", "UNKNOWN", 429},
	} {
		t.Run(tc.channel, func(t *testing.T) {
			r := s.pay(t, payBody(biz+"-1-"+tc.channel, biz, tc.channel)) // 1999 CNY
			if r.Status != 200 && tc.status != "UNKNOWN" {
				t.Fatalf("first: %d %s", r.Status, r.Body)
			}
			if tc.status == "UNKNOWN" {
				if g := s.do(t, "GET", "/pay/"+biz+"-1-"+tc.channel, nil, nil); g.JSON(t)["status"] != "UNKNOWN" {
					t.Fatalf("first: %d %s; stored %s, want UNKNOWN", r.Status, r.Body, g.Body)
				}
			} else if r.JSON(t)["status"] != tc.status {
				t.Fatalf("first: %s, want %s", r.Body, tc.status)
			}
			second := s.pay(t, payBody(biz+"-2-"+tc.channel, biz, tc.channel))
			if second.Status != tc.secondStatus {
				t.Fatalf("second 1999 under a 3000 cap after a %s payment: %d %s, want %d", tc.status, second.Status, second.Body, tc.secondStatus)
			}
			if second.Status == 429 {
				d, _ := second.JSON(t)["details"].(map[string]any)
				if d["rule"] != "amount/1m" || d["used"] != float64(1999) {
					t.Fatalf("429 details %v: want rule amount/1m, used 1999", d)
				}
			}
		})
	}
}
