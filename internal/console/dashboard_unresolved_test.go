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
)

// TestDashboardListsUnresolvedPayments: beside the count of UNKNOWN
// orders, the dashboard lists the oldest with their requestId, channel,
// age, and the resolver's next step and when.
func TestDashboardListsUnresolvedPayments(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("limits:\n  PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	list := []console.UnresolvedOrder{
		{RequestID: "R-old", Channel: "ALIPAY", Since: consoletest.Now.Add(-20 * time.Minute), Next: consoletest.Now.Add(30 * time.Second), Close: true, Attempts: 4},
		{RequestID: "R-new", Channel: "WECHAT", Since: consoletest.Now.Add(-90 * time.Second), LeasedUntil: consoletest.Now.Add(10 * time.Second), Attempts: 1},
		{RequestID: "R-due", Channel: "WECHAT", Since: consoletest.Now.Add(-30 * time.Second)},
	}
	var asked int
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg, Now: consoletest.Now},
		Limits: consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: consoletest.Now},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now },
		Unresolved: func(context.Context) (int64, time.Time, error) { return 3, consoletest.Now.Add(-20 * time.Minute), nil },
		OldestUnresolved: func(_ context.Context, limit int) ([]console.UnresolvedOrder, error) {
			asked = limit
			return list, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	page := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard", "").Body
	for _, want := range []string{
		`<tr class="unresolved"><td class="key">R-old</td><td class="key">ALIPAY</td><td class="num">20m0s</td><td>close the payment</td><td>in 30s</td></tr>`,
		`<tr class="unresolved"><td class="key">R-new</td><td class="key">WECHAT</td><td class="num">1m30s</td><td>query the channel</td><td>now (an instance is on it)</td></tr>`,
		`<tr class="unresolved"><td class="key">R-due</td><td class="key">WECHAT</td><td class="num">30s</td><td>query the channel</td><td>now</td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the dashboard lacks %s", want)
		}
	}
	if asked != 20 {
		t.Errorf("asked for %d orders, want the oldest 20", asked)
	}
}
