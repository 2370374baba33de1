package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
)

const clientToken = "tok-refunds-0123456789"

// detailsServer serves every kind of route: public (POST /pay, GET /pay,
// probes), admin (GET /limits, /metrics, reports, the dashboard, an admin
// POST) and /v1/limits with a client token.
func detailsServer(t *testing.T) *testServer {
	t.Helper()
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte("limits:\n  PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	lv := fakeLimitsView{cfg: parsed.Config, st: configcenter.Status{Loaded: true, Source: "file"}, now: now}
	routes, err := console.New(console.Options{Reports: &fakeReports{}, Usage: fakeUsage{cfg: parsed.Config}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	l, _, clock := throttledLimiter(t)
	post, err := httpapi.LearnedResetRoutes(httpapi.LearnedResetOptions{Limits: l, History: &memHistory{},
		Logger: slog.New(slog.DiscardHandler), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Pay: nopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: "tok",
		Limits: lv, Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), Admin: []func(*gin.RouterGroup){post}, Console: routes,
		LimitsAPI: nopLimitsAPI{}, ClientTokens: []httpapi.ClientToken{{Name: "refunds", Token: clientToken}},
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{srv: httptest.NewServer(h)}
}

// send sends one request; chunked sends the body without a Content-Length.
func (s *testServer) send(t *testing.T, method, path, contentType, token string, body string, chunked bool) answer {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.NopCloser(r) // hides the length: net/http sends it chunked
	}
	req, err := http.NewRequest(method, s.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// errorOf decodes an error answer's code and the fields it names.
func errorOf(t *testing.T, a answer) (code string, fields []string) {
	t.Helper()
	var e struct {
		Code    string
		Details struct{ Fields []struct{ Field string } }
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatalf("%v: %.300s", err, a.body)
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
			a := s.send(t, http.MethodPost, route.path, "application/json", route.token, big, chunked)
			if code, _ := errorOf(t, a); a.status != http.StatusRequestEntityTooLarge || code != "BODY_TOO_LARGE" {
				t.Errorf("POST %s (chunked %v): %d %.200s; want 413 BODY_TOO_LARGE", route.path, chunked, a.status, a.body)
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
		if a := s.send(t, http.MethodPost, tt.path, "text/plain", tt.token, `{}`, false); a.status != tt.want {
			t.Errorf("POST %s text/plain (token %q): %d %.200s; want %d", tt.path, tt.token, a.status, a.body, tt.want)
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
		a := s.send(t, tt.method, tt.path+"?x=1", "application/json", tt.token, tt.body, false)
		if code, fields := errorOf(t, a); a.status != 400 || code != "INVALID_REQUEST" || !contains(fields, "x") {
			t.Errorf("%s %s?x=1: %d %.200s; want 400 naming x", tt.method, tt.path, a.status, a.body)
		}
	}
}

// TestRelativeFromRefusedNamingFrom: a from too far before to is refused
// naming from, the parameter that was given.
func TestRelativeFromRefusedNamingFrom(t *testing.T) {
	s := detailsServer(t)
	for _, path := range []string{"/reports/channel-limits?from=-48h", "/reports/channel-amounts?from=-48h"} {
		a := s.send(t, http.MethodGet, path, "", "tok", "", false)
		if _, fields := errorOf(t, a); a.status != 400 || len(fields) != 1 || fields[0] != "from" {
			t.Errorf("GET %s: %d %.300s; want 400 naming from", path, a.status, a.body)
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
