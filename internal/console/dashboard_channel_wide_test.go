package console_test

import (
	"log/slog"
	"regexp"
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

// TestDashboardChannelWideChartCountsEveryBizType: the chart of a
// channel-wide key ("*:UNIONPAY") adds up every bizType's traffic on the
// channel, as its windows do, says so, and shows the key's own rule; it
// never says "no traffic" while the channel had some.
func TestDashboardChannelWideChartCountsEveryBizType(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("limits:\n  \"*:UNIONPAY\": [{limit: 200, window: 1s}]\n  ONLINE_PAY:UNIONPAY: 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	minute := consoletest.Now.Truncate(time.Minute).Add(-5 * time.Minute)
	fr := &consoletest.Reports{Rep: stats.Report{Rows: []stats.ReportRow{
		{BizType: "ONLINE_PAY", Channel: "UNIONPAY", Bucket: minute, Admitted: 100, Limited: 2, Limit: "50/1s", LimitChanges: []string{}},
		{BizType: "REFUND", Channel: "UNIONPAY", Bucket: minute, Admitted: 13, Limit: "unlimited", LimitChanges: []string{}},
		{BizType: "ONLINE_PAY", Channel: "ALIPAY", Bucket: minute, Admitted: 7, Limit: "unlimited", LimitChanges: []string{}},
	}}}
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: consoletest.Now}
	routes, err := console.New(console.Options{Reports: fr, Usage: consoletest.Usage{Cfg: cfg, Now: consoletest.Now}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	page := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard", "").Body
	chart := regexp.MustCompile(`(?s)<div class="chart">\s*<h3><span class="key">\*:UNIONPAY</span>.*?</svg>`).FindString(page)
	if chart == "" {
		t.Fatalf("no chart for *:UNIONPAY")
	}
	for _, want := range []string{"113 admitted · 2 limited", "every bizType on UNIONPAY", `<span class="window">200/1s</span>`} {
		if !strings.Contains(chart, want) {
			t.Errorf("the *:UNIONPAY chart lacks %q:\n%s", want, chart)
		}
	}
	if strings.Contains(chart, "no traffic") {
		t.Errorf("the *:UNIONPAY chart says no traffic:\n%s", chart)
	}
}

// TestDashboardNamesTheResolversCalls: the resolver's queries and closes
// (RESOLVE:CHANNEL rows) have a chart of their own that says what they are,
// and never add to the channel-wide key's chart.
func TestDashboardNamesTheResolversCalls(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("limits:\n  \"*:ALIPAY\": [{limit: 200, window: 1s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	minute := consoletest.Now.Truncate(time.Minute).Add(-5 * time.Minute)
	fr := &consoletest.Reports{Rep: stats.Report{Rows: []stats.ReportRow{
		{BizType: "ONLINE_PAY", Channel: "ALIPAY", Bucket: minute, Admitted: 10, Limit: "unlimited", LimitChanges: []string{}},
		{BizType: "RESOLVE", Channel: "ALIPAY", Bucket: minute, Admitted: 3, Limit: "unlimited", LimitChanges: []string{}},
	}}}
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: consoletest.Now}
	routes, err := console.New(console.Options{Reports: fr, Usage: consoletest.Usage{Cfg: cfg, Now: consoletest.Now}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	page := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard", "").Body
	resolver := regexp.MustCompile(`(?s)<div class="chart">\s*<h3><span class="key">RESOLVE:ALIPAY</span>.*?</svg>`).FindString(page)
	if !strings.Contains(resolver, "the resolver&#39;s own queries and closes") || !strings.Contains(resolver, "3 admitted") {
		t.Errorf("the RESOLVE:ALIPAY chart does not say what it counts, or lacks its 3 calls:\n%s", resolver)
	}
	wide := regexp.MustCompile(`(?s)<div class="chart">\s*<h3><span class="key">\*:ALIPAY</span>.*?</svg>`).FindString(page)
	if !strings.Contains(wide, "10 admitted") {
		t.Errorf("the *:ALIPAY chart counts the resolver's calls, or not the payments:\n%.400s", wide)
	}
}
