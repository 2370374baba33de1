package console_test

import (
	"context"
	"errors"
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

type fakeRouteRows struct {
	rows []stats.RouteRow
	err  error
}

func (f fakeRouteRows) Routes(context.Context, time.Time, time.Time, string) ([]stats.RouteRow, error) {
	return f.rows, f.err
}

type fakeHealth map[string]bool

func (f fakeHealth) Unhealthy(code string) bool { return f[code] }

func newRouteServer(t *testing.T, rows fakeRouteRows) *consoletest.Server {
	t.Helper()
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte(`routes:
  PAY: [ALIPAY, WECHAT, UNIONPAY]
  SHOP: [UNIONPAY]
limits:
  PAY:ALIPAY: 0
  PAY:WECHAT: 4
  SHOP:UNIONPAY: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	rr, err := console.NewRouteReports(console.RouteReportsOptions{Rows: rows, Usage: consoletest.Usage{Cfg: cfg},
		Health: fakeHealth{"UNIONPAY": true}, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: cfg},
		Limits: consoletest.LimitsView{Cfg: cfg, LimitRoutes: parsed.Routes, St: configcenter.Status{Loaded: true}}, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return consoletest.Now }, Routes: rr})
	if err != nil {
		t.Fatal(err)
	}
	return consoletest.ServeAdmin(t, "", routes)
}

func TestRouteReport(t *testing.T) {
	m := consoletest.Now.Truncate(time.Minute).Add(-time.Minute)
	s := newRouteServer(t, fakeRouteRows{rows: []stats.RouteRow{
		{Minute: m, BizType: "PAY", To: "WECHAT", Count: 7},
		{Minute: m, BizType: "PAY", From: "ALIPAY", To: "WECHAT", Reason: "closed", Count: 7},
		{Minute: m, BizType: "PAY", From: "UNIONPAY", Reason: "unhealthy", Count: 2},
	}})
	tests := []struct {
		name, query string
		status      int
		want        string
	}{
		{"default range", "", 200, `"payments":{"WECHAT":7}`},
		{"default from is an hour before to", "?to=2026-03-01T10:00:00Z", 200, `"from":"2026-03-01T09:00:00Z","to":"2026-03-01T10:00:00Z"`},
		{"fallback to none", "?bizType=PAY", 200, `{"from":"UNIONPAY","to":"","reason":"unhealthy","count":2}`},
		{"bad time", "?from=yesterday", 400, `"field":"from"`},
		{"empty time", "?to=", 400, `"field":"to"`},
		{"to before from", "?from=2026-03-01T10:00:00Z&to=2026-03-01T09:00:00Z", 400, `"field":"to"`},
		{"too long", "?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", 400, "31 days"},
		{"bad bizType", "?bizType=pay", 400, `"field":"bizType"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := s.Get(t, "/reports/routes"+tt.query, "")
			if a.Status != tt.status || !strings.Contains(a.Body, tt.want) {
				t.Fatalf("got %d %s, want %d with %s", a.Status, a.Body, tt.status, tt.want)
			}
		})
	}
	down := newRouteServer(t, fakeRouteRows{err: errors.New("connection refused")})
	if a := down.Get(t, "/reports/routes", ""); a.Status != 503 {
		t.Fatalf("database down: %d %s, want 503", a.Status, a.Body)
	}
}

// TestDashboardRoutes: each route with the channel a payment would go to
// now (skipping the closed and unhealthy ones, saying why) and its
// fallbacks per minute.
func TestDashboardRoutes(t *testing.T) {
	m := consoletest.Now.Truncate(time.Minute).Add(-time.Minute)
	s := newRouteServer(t, fakeRouteRows{rows: []stats.RouteRow{
		{Minute: m, BizType: "PAY", From: "ALIPAY", To: "WECHAT", Reason: "closed", Count: 7},
		{Minute: m.Add(-time.Minute), BizType: "PAY", From: "ALIPAY", To: "WECHAT", Reason: "closed", Count: 5},
	}})
	a := s.Get(t, "/dashboard", "")
	if a.Status != 200 {
		t.Fatalf("status %d", a.Status)
	}
	row := func(biz string) string {
		i := strings.Index(a.Body, `data-biz="`+biz+`"`)
		if i < 0 {
			t.Fatalf("no row for %s:\n%s", biz, a.Body)
		}
		r, _, _ := strings.Cut(a.Body[i:], "</tr>")
		return r
	}
	pay := row("PAY")
	for _, want := range []string{"[ALIPAY, WECHAT, UNIONPAY]", `preferred">WECHAT`, "(ALIPAY closed)", `last-minute">7<`, ">0.20<"} {
		if !strings.Contains(pay, want) {
			t.Errorf("PAY row lacks %q:\n%s", want, pay)
		}
	}
	shop := row("SHOP")
	if !strings.Contains(shop, "none admits") || !strings.Contains(shop, "UNIONPAY unhealthy") {
		t.Errorf("SHOP row:\n%s", shop)
	}
	// SHOP had no fallback: its per-minute column says 0 (it was blank).
	if cells := strings.Split(shop, "<td"); !regexp.MustCompile(`>0<`).MatchString(cells[len(cells)-1]) {
		t.Errorf("the fallbacks per minute of a route without fallbacks is not 0: <td%s", cells[len(cells)-1])
	}
	if cells := strings.Split(pay, "<td"); !strings.Contains(cells[len(cells)-1], "<rect") {
		t.Errorf("the fallbacks per minute of PAY are not drawn: <td%s", cells[len(cells)-1])
	}
}
