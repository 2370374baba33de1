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

// TestDashboardMarksStaleQuotas: a calendar quota whose use was last read
// minutes ago (Redis did not answer since) is marked with its age, not
// shown as current; one read within the last reads is not marked.
func TestDashboardMarksStaleQuotas(t *testing.T) {
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("zone: Asia/Shanghai\nlimits:\n  PAY:ALIPAY: [{limit: 1000, calendar: day}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	read := consoletest.Now.Add(-5 * time.Minute)
	f, err := stats.NewForecaster(stats.ForecasterOptions{Source: quotaView{cfg: cfg, used: map[string]int64{"PAY:ALIPAY": 10}},
		Now: func() time.Time { return read }})
	if err != nil {
		t.Fatal(err)
	}
	f.Sample(context.Background())
	for _, tt := range []struct {
		name  string
		at    time.Time
		stale bool
	}{{"read 5 minutes ago", consoletest.Now, true}, {"read just now", read.Add(20 * time.Second), false}} {
		t.Run(tt.name, func(t *testing.T) {
			routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg, Now: tt.at},
				Limits: consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file"}, Now: tt.at},
				Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return tt.at }, Quotas: f.Forecasts})
			if err != nil {
				t.Fatal(err)
			}
			page := consoletest.ServeAdmin(t, "", routes).Get(t, "/dashboard", "").Body
			if got := strings.Contains(page, `<span class="badge warn stale">as of 5m0s ago</span>`); got != tt.stale {
				t.Errorf("stale marker shown = %v, want %v", got, tt.stale)
			}
		})
	}
}
