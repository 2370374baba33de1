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
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// TestDashboardQuotaForecast: the dashboard shows each calendar window's
// use and, in words, when it runs out at the current rate, and the hour's
// amounts per channel and currency.
func TestDashboardQuotaForecast(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte(`zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY: [{limit: 100, window: 1s}, {amount: 500000000, calendar: day}]
  "*:UNIONPAY": [{limit: 300000, calendar: month}]
  REFUND:WECHAT: [{limit: 10, calendar: day}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	sh, _ := time.LoadLocation("Asia/Shanghai")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, sh)
	used := map[string]int64{"ONLINE_PAY:ALIPAY": 200_000_000, "*:UNIONPAY": 3000, "REFUND:WECHAT": 10}
	src := quotaView{cfg: cfg, used: used}
	f, err := stats.NewForecaster(stats.ForecasterOptions{Source: src, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	f.Sample(context.Background())
	now = now.Add(10 * time.Minute)
	used["ONLINE_PAY:ALIPAY"] = 230_000_000 // 50,000/s: 270,000,000 left last until 13:40
	f.Sample(context.Background())
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}}
	fr := &consoletest.Reports{AmountRows: []stats.AmountBucket{
		{Channel: "ALIPAY", Currency: "CNY", Admitted: 2, AdmittedAmount: 3000, Refused: 1, RefusedAmount: 900},
		{Channel: "ALIPAY", Currency: "USD", Admitted: 1, AdmittedAmount: 7},
		{Channel: "ALIPAY", Currency: "CNY", Admitted: 1, AdmittedAmount: 1000},
	}}
	routes, err := console.New(console.Options{Reports: fr, Usage: consoletest.Usage{Cfg: cfg}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Quotas: f.Forecasts})
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeAdmin(t, "", routes)
	a := s.Get(t, "/dashboard", "")
	for _, want := range []string{
		"at this rate ALIPAY&#39;s daily amount for ONLINE_PAY runs out at 13:40 Asia/Shanghai",
		"at this rate the channel-wide UNIONPAY&#39;s monthly count lasts until the period ends at Dec 1 00:00 Asia/Shanghai",
		"WECHAT&#39;s daily count for REFUND has run out; it resets at Nov 24 00:00 Asia/Shanghai",
		// The amounts of the hour, summed per channel and currency.
		`<td class="key">ALIPAY</td><td class="key">CNY</td><td class="num">3</td><td class="num">40.00 CNY</td><td class="num">1</td><td class="num">9.00 CNY</td>`,
		`<td class="key">ALIPAY</td><td class="key">USD</td><td class="num">1</td><td class="num">0.07 USD</td>`,
	} {
		if !strings.Contains(a.Body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if t.Failed() {
		i := strings.Index(a.Body, `id="quotas"`)
		t.Logf("quotas section: %s", a.Body[max(i, 0):min(len(a.Body), max(i, 0)+3000)])
	}
}

// quotaView serves a config whose calendar windows hold used[key].
type quotaView struct {
	cfg  *ratelimit.Config
	used map[string]int64
}

func (q quotaView) Config() *ratelimit.Config { return q.cfg }
func (q quotaView) Usage(_ context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	r := q.cfg.Rules[k]
	counts := make([]int64, len(r.Windows))
	for i := range counts {
		counts[i] = q.used[k.String()]
	}
	return r, counts, nil
}
func (q quotaView) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	return consoletest.UsageOfEach(ctx, keys, q.Usage)
}

// fakeOutage decided inProcess[key] in process in each window, and saw
// Redis restart at restartedAt.
type fakeOutage struct {
	inProcess   map[string]int64
	restartedAt time.Time
}

func (o fakeOutage) DecidedInProcess(k ratelimit.Key, r ratelimit.Rule) []int64 {
	out := make([]int64, len(r.Windows))
	for i := range out {
		out[i] = o.inProcess[k.String()]
	}
	return out
}
func (o fakeOutage) StoreRestartedAt(context.Context) time.Time { return o.restartedAt }

// TestDashboardQuotasShowWhatAnOutageHides: a calendar quota shows the use
// this instance decided in process beside the Redis count, and marks a
// Redis restart within its period; one before the period is not marked.
func TestDashboardQuotasShowWhatAnOutageHides(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte(`zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY: [{amount: 500000000, currency: CNY, calendar: day}]
  "*:UNIONPAY": [{limit: 300000, calendar: month}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	sh, _ := time.LoadLocation("Asia/Shanghai")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, sh)
	src := quotaView{cfg: cfg, used: map[string]int64{"ONLINE_PAY:ALIPAY": 1000, "*:UNIONPAY": 3}}
	f, err := stats.NewForecaster(stats.ForecasterOptions{Source: src, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	f.Sample(context.Background())
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}}
	for _, tc := range []struct {
		restartedAt time.Time
		marked      bool
	}{{now.Add(-2 * time.Hour), true}, {now.Add(-13 * time.Hour), false}} {
		routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg}, Limits: lv,
			Logger: slog.New(slog.DiscardHandler), Quotas: f.Forecasts, Now: func() time.Time { return now },
			Outage: fakeOutage{inProcess: map[string]int64{"ONLINE_PAY:ALIPAY": 150000}, restartedAt: tc.restartedAt}})
		if err != nil {
			t.Fatal(err)
		}
		body := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard", "").Body
		if !strings.Contains(body, "+ 1,500.00 CNY decided in process") {
			t.Errorf("restart at %v: the ALIPAY quota lacks its in-process use", tc.restartedAt)
		}
		// The day began at 00:00, the month on Nov 1: a restart at 10:00
		// is in both periods; one at 23:00 the day before is in the
		// month's only.
		day, month := strings.Contains(body, "Redis restarted at 10:00 Asia/Shanghai"), strings.Contains(body, "Redis restarted at Nov 22 23:00 Asia/Shanghai")
		if tc.marked && (!day || strings.Count(body, "Redis restarted at 10:00") != 2) || !tc.marked && (day || !month || strings.Count(body, "Redis restarted at") != 1) {
			i := strings.Index(body, `id="quotas"`)
			t.Errorf("restart at %v: marks wrong:\n%s", tc.restartedAt, body[max(i, 0):min(len(body), max(i, 0)+2500)])
		}
	}
}
