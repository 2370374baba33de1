package console_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/limits"
	"payserver/internal/stats"
)

// TestDashboardAmountsInMajorUnits: every amount a person reads on the
// dashboard (the limits table, the usage bars, the calendar quotas and the
// hour's amounts) is in major units of its currency with thousands
// separators and the currency beside it: CNY has 2 minor digits, JPY 0,
// BHD 3.
func TestDashboardAmountsInMajorUnits(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte(`zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY: [{amount: 500000000, calendar: day, currency: CNY}]
  ONLINE_PAY:PAYPAY: [{amount: 1000000, calendar: day, currency: JPY}]
  ONLINE_PAY:BENEFIT: [{amount: 1500, window: 1m, currency: BHD}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	sh, _ := time.LoadLocation("Asia/Shanghai")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, sh)
	used := map[string]int64{"ONLINE_PAY:ALIPAY": 1274570, "ONLINE_PAY:PAYPAY": 2500}
	f, err := stats.NewForecaster(stats.ForecasterOptions{Source: quotaView{cfg: cfg, used: used}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	f.Sample(context.Background())
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: now}
	fr := &consoletest.Reports{AmountRows: []stats.AmountBucket{
		{Channel: "ALIPAY", Currency: "CNY", Admitted: 2, AdmittedAmount: 1274570, Refused: 1, RefusedAmount: 500000000},
		{Channel: "PAYPAY", Currency: "JPY", Admitted: 1, AdmittedAmount: 1000000},
		{Channel: "BENEFIT", Currency: "BHD", Admitted: 1, AdmittedAmount: 1500},
	}}
	routes, err := console.New(console.Options{Reports: fr, Usage: consoletest.Usage{Cfg: cfg, Now: now}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Quotas: f.Forecasts, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	page := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard", "").Body
	for _, want := range []string{
		// The limits table.
		"amount 5,000,000.00 CNY per day from 00:00 Asia/Shanghai",
		"amount 1,000,000 JPY per day from 00:00 Asia/Shanghai",
		"amount 1.500 BHD per 1m",
		// The usage bars (3/4 full).
		"3,750,000.00 / 5,000,000.00 CNY in day from 00:00 Asia/Shanghai",
		"750,000 / 1,000,000 JPY in day from 00:00 Asia/Shanghai",
		"1.125 / 1.500 BHD in 1m",
		// The calendar quotas.
		`<td class="num">12,745.70</td><td class="num">5,000,000.00 CNY</td>`,
		`<td class="num">2,500</td><td class="num">1,000,000 JPY</td>`,
		// The hour's amounts.
		`<td class="num">12,745.70 CNY</td><td class="num">1</td><td class="num">5,000,000.00 CNY</td>`,
		`<td class="num">1,000,000 JPY</td>`,
		`<td class="num">1.500 BHD</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if strings.Contains(page, "500000000") {
		t.Errorf("dashboard shows the minor units 500000000")
	}
}
