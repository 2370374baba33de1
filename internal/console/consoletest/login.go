package consoletest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/api"
	"payserver/internal/authguard"
	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/testutil"
)

// LoginToken is the admin token of a LoginServer.
const LoginToken = "adm-login-secret-0123456789"

// LoginServer serves the dashboard, /channels/usage and a state-changing
// admin route (POST /test/state) behind the admin token, on a clock the
// test moves, logging into a buffer; extra are more admin routes.
type LoginServer struct {
	URL   string
	v     *api.Validator
	log   testutil.LogBuffer
	Clock *testutil.Clock
}

// Logs is what the server logged.
func (s *LoginServer) Logs() string { return s.log.String() }

// NewLoginServer returns a LoginServer with the admin token token.
func NewLoginServer(t *testing.T, token string, extra ...any) *LoginServer {
	t.Helper()
	gin.SetMode(gin.TestMode)
	s := &LoginServer{Clock: testutil.NewClock(Now)}
	parsed, err := limits.Parse([]byte("limits:\n  PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	log := slog.New(slog.NewJSONHandler(&s.log, nil))
	base := &console.Options{Reports: &Reports{}, Usage: Usage{Cfg: cfg},
		Limits: LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true}}, Logger: log, Now: s.Clock.Now}
	state := func(g *gin.RouterGroup) {
		g.POST("/test/state", func(c *gin.Context) {
			httpapi.WriteJSON(c, slog.New(slog.DiscardHandler), http.StatusOK, map[string]bool{"changed": true})
		})
	}
	admin, c := mountAll(t, base, extra)
	h, err := httpapi.New(httpapi.Options{AuthGuard: authguard.New(authguard.Options{MaxFailures: 1 << 20}), Pay: NopPay{}, Logger: log, AdminToken: token, Now: s.Clock.Now,
		Admin: append([]func(*gin.RouterGroup){state}, admin...), Console: c})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	if s.v, err = api.NewValidator(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Send makes one request without following redirects; documented routes
// are checked against api/openapi.yaml.
func (s *LoginServer) Send(t *testing.T, method, path, body string, header map[string]string) Answer {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(path, "/test/") {
		if err := s.v.CheckResponse(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Errorf("%s %s breaks api/openapi.yaml: %v\n%.300s", method, path, err, b)
		}
	}
	return Answer{resp.StatusCode, resp.Header, string(b)}
}

// Form encodes v as a same-origin form post, with the extra headers.
func Form(v url.Values, extra map[string]string) (string, map[string]string) {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}
	for k, val := range extra {
		h[k] = val
	}
	return v.Encode(), h
}

// SessionCookieOf returns the payserver_admin cookie an answer sets.
func SessionCookieOf(a Answer) *http.Cookie {
	for _, c := range (&http.Response{Header: a.Header}).Cookies() {
		if c.Name == "payserver_admin" {
			return c
		}
	}
	return nil
}

// Login logs in and returns the session cookie ("payserver_admin=…").
func (s *LoginServer) Login(t *testing.T) string {
	t.Helper()
	body, h := Form(url.Values{"token": {LoginToken}}, nil)
	a := s.Send(t, http.MethodPost, "/dashboard/login", body, h)
	c := SessionCookieOf(a)
	if a.Status != http.StatusSeeOther || a.Header.Get("Location") != "/dashboard" || c == nil {
		t.Fatalf("login: %d, Location %q, cookie %v; want 303 to /dashboard with a session cookie", a.Status, a.Header.Get("Location"), c)
	}
	return c.Name + "=" + c.Value
}
