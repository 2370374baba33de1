package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
)

const clientToken = "tok-refunds-0123456789"

// detailsServer serves every kind of route: public (POST /pay, GET /pay,
// probes), admin (GET /limits, /metrics, reports, the dashboard, an admin
// POST) and /v1/limits with a client token.
func detailsServer(t *testing.T) *consoletest.Server {
	t.Helper()
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("limits:\n  PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	lv := consoletest.LimitsView{Cfg: parsed.Config, St: configcenter.Status{Loaded: true, Source: "file"}, Now: consoletest.Now}
	routes, err := console.New(console.Options{Reports: &consoletest.Reports{}, Usage: consoletest.Usage{Cfg: parsed.Config}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	l, _, clock := throttledLimiter(t)
	post, err := httpapi.LearnedResetRoutes(httpapi.LearnedResetOptions{Limits: l, History: &memHistory{},
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: "tok",
		Limits: lv, Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), Admin: []func(*gin.RouterGroup){post}, Console: routes,
		LimitsAPI: nopLimitsAPI{}, ClientTokens: []httpapi.ClientToken{{Name: "refunds", Token: clientToken}},
		Now: func() time.Time { return consoletest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	return &consoletest.Server{Srv: httptest.NewServer(h)}
}

// errorOf decodes an error answer's code and the fields it names.
func errorOf(t *testing.T, a consoletest.Answer) (code string, fields []string) {
	t.Helper()
	var e struct {
		Code    string
		Details struct{ Fields []struct{ Field string } }
	}
	if err := json.Unmarshal([]byte(a.Body), &e); err != nil {
		t.Fatalf("%v: %.300s", err, a.Body)
	}
	for _, f := range e.Details.Fields {
		fields = append(fields, f.Field)
	}
	return e.Code, fields
}

// TestBodyOverTheLimitIs413: a body over MaxBodyBytes is 413
// BODY_TOO_LARGE on every route that reads one, whether it says its length
// or is sent chunked.
func TestBodyOverTheLimitIs413(t *testing.T) {
	s := detailsServer(t)
	big := `{"requestId":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`
	for _, route := range []struct{ path, token string }{
		{"/pay", ""}, {"/limits/learned/reset", "tok"}, {"/v1/limits/acquire", clientToken},
	} {
		for _, chunked := range []bool{false, true} {
			a := s.Send(t, http.MethodPost, route.path, "application/json", route.token, big, chunked)
			if code, _ := errorOf(t, a); a.Status != http.StatusRequestEntityTooLarge || code != "BODY_TOO_LARGE" {
				t.Errorf("POST %s (chunked %v): %d %.200s; want 413 BODY_TOO_LARGE", route.path, chunked, a.Status, a.Body)
			}
		}
	}
}

// TestAuthenticationBeforeContentType: an admin or client route called
// without credentials is 401 whatever its Content-Type; with them, a body
// that is not JSON is 415, as on POST /pay.
func TestAuthenticationBeforeContentType(t *testing.T) {
	s := detailsServer(t)
	for _, tt := range []struct {
		path, token string
		want        int
	}{
		{"/pay", "", 415},
		{"/limits/learned/reset", "", 401},
		{"/limits/learned/reset", "tok", 415},
		{"/v1/limits/acquire", "", 401},
		{"/v1/limits/acquire", clientToken, 415},
	} {
		if a := s.Send(t, http.MethodPost, tt.path, "text/plain", tt.token, `{}`, false); a.Status != tt.want {
			t.Errorf("POST %s text/plain (token %q): %d %.200s; want %d", tt.path, tt.token, a.Status, a.Body, tt.want)
		}
	}
}

// TestUnknownQueryParametersRefused: every route refuses a query parameter
// it does not take, with a 400 naming it.
func TestUnknownQueryParametersRefused(t *testing.T) {
	s := detailsServer(t)
	for _, tt := range []struct{ method, path, token, body string }{
		{"POST", "/pay", "", `{}`},
		{"GET", "/pay/R-1", "", ""},
		{"GET", "/healthz", "", ""},
		{"GET", "/readyz", "", ""},
		{"GET", "/channels/usage", "tok", ""},
		{"GET", "/limits", "tok", ""},
		{"GET", "/metrics", "tok", ""},
		{"GET", "/reports/channel-limits", "tok", ""},
		{"GET", "/reports/channel-amounts", "tok", ""},
		{"POST", "/limits/learned/reset", "tok", `{}`},
		{"POST", "/v1/limits/acquire", clientToken, `{}`},
		{"POST", "/v1/limits/release", clientToken, `{}`},
		{"GET", "/v1/limits/peek", clientToken, ""},
	} {
		a := s.Send(t, tt.method, tt.path+"?x=1", "application/json", tt.token, tt.body, false)
		if code, fields := errorOf(t, a); a.Status != 400 || code != "INVALID_REQUEST" || !contains(fields, "x") {
			t.Errorf("%s %s?x=1: %d %.200s; want 400 naming x", tt.method, tt.path, a.Status, a.Body)
		}
	}
}

// TestRelativeFromRefusedNamingFrom: a from too far before to is refused
// naming from, the parameter that was given.
func TestRelativeFromRefusedNamingFrom(t *testing.T) {
	s := detailsServer(t)
	for _, path := range []string{"/reports/channel-limits?from=-48h", "/reports/channel-amounts?from=-48h"} {
		a := s.Send(t, http.MethodGet, path, "", "tok", "", false)
		if _, fields := errorOf(t, a); a.Status != 400 || len(fields) != 1 || fields[0] != "from" {
			t.Errorf("GET %s: %d %.300s; want 400 naming from", path, a.Status, a.Body)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
