package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// TestDescribeWindowsShowsMerchantLimits: GET /limits and the dashboard
// show a window's limits per merchant as the document writes them.
func TestDescribeWindowsShowsMerchantLimits(t *testing.T) {
	r := ratelimit.Rule{
		Windows: []ratelimit.Window{{Limit: 100, Size: time.Second}, {Limit: 900, Size: time.Minute}},
		Merchants: []*ratelimit.Merchants{
			{PerMerchant: 10, Overrides: map[string]int64{"M_VIP": 40, "BAD": 0, "FREE": ratelimit.Unlimited}},
			{PerMerchant: ratelimit.Unlimited, Overrides: map[string]int64{"M1": 5, "a; b": 2, " ": 1}},
		},
	}
	ws := DescribeWindows(r)
	for i, want := range []string{
		"100 per 1s (each merchant at most 10; BAD: refused; FREE: no limit; M_VIP: 40)",
		`900 per 1m (" ": 1; M1: 5; "a; b": 2)`,
	} {
		if got := ws[i].Text(); got != want {
			t.Errorf("window %d: Text() = %q, want %q", i, got, want)
		}
	}
	got, err := json.Marshal(ws[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"rule":"count/1s","kind":"count","limit":100,"window":"1s","windowMs":1000,"perMerchant":10,"merchants":{"BAD":0,"FREE":-1,"M_VIP":40}}`; string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}
