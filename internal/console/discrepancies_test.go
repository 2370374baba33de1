package console_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/limits"
	"payserver/internal/pay"
)

// TestDiscrepanciesReportedAndShown: the orders a channel contradicted
// once they were final are listed by GET /reports/discrepancies (amounts
// in minor and major units) and on the dashboard, the newest first.
func TestDiscrepanciesReportedAndShown(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("limits:\n  PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	list := []*pay.Order{{
		RequestID: "R-1", OrderNo: "PS1", BizType: "PAY", Channel: "ALIPAY", Amount: 1274570, Currency: "CNY",
		Status: pay.StatusFailed, FailureCode: pay.FailureNotSent,
		Discrepancy: &pay.Discrepancy{Channel: "ALIPAY", Reported: "SUCCEEDED", TradeNo: "T9", At: consoletest.Now.Add(-90 * time.Second)},
	}}
	var asked []int
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg, Now: consoletest.Now},
		Limits: consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: consoletest.Now},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now },
		Discrepancies: func(_ context.Context, limit int) ([]*pay.Order, error) {
			asked = append(asked, limit)
			return list, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeAdmin(t, "", routes)
	page := s.Get(t, "/dashboard", "").Body
	want := `<tr class="discrepancy"><td class="key">R-1</td><td>NOT_SENT on ALIPAY</td><td class="warn">SUCCEEDED by ALIPAY</td><td class="num">12,745.70 CNY</td><td class="num">1m30s ago</td></tr>`
	if !strings.Contains(page, want) {
		t.Errorf("the dashboard lacks %s", want)
	}
	a := s.Get(t, "/reports/discrepancies?limit=5", "")
	var got struct {
		Discrepancies []struct {
			RequestID   string `json:"requestId"`
			Amount      int64  `json:"amount"`
			AmountMajor string `json:"amountMajor"`
			Discrepancy struct {
				Channel, Reported, At string
			} `json:"discrepancy"`
		} `json:"discrepancies"`
	}
	if err := json.Unmarshal([]byte(a.Body), &got); err != nil || len(got.Discrepancies) != 1 {
		t.Fatalf("GET /reports/discrepancies: %s (%v)", a.Body, err)
	}
	if d := got.Discrepancies[0]; d.RequestID != "R-1" || d.Amount != 1274570 || d.AmountMajor != "12745.70" || d.Discrepancy.Reported != "SUCCEEDED" || d.Discrepancy.At == "" {
		t.Errorf("row %+v", d)
	}
	if len(asked) != 2 || asked[0] != 20 || asked[1] != 5 {
		t.Errorf("asked for %v, want 20 for the dashboard, then 5", asked)
	}
	for _, q := range []string{"limit=0", "limit=", "limit=1001", "limit=x"} {
		if bad := s.Get(t, "/reports/discrepancies?"+q, ""); bad.Status != 400 || !strings.Contains(bad.Body, "limit") {
			t.Errorf("%s: %d %s, want 400 naming limit", q, bad.Status, bad.Body)
		}
	}
}
