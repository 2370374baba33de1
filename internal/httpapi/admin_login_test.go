package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/api"
	"payserver/internal/authguard"
	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/testutil"
)

const loginToken = "adm-login-secret-0123456789"

// loginServer serves the dashboard, /channels/usage and a state-changing
// admin route (POST /test/state) behind the admin token, on a clock the
// test moves, logging into a buffer; extra are more admin routes.
type loginServer struct {
	url   string
	v     *api.Validator
	log   testutil.LogBuffer
	clock *testutil.Clock
}

func (s *loginServer) logs() string { return s.log.String() }

func newLoginServer(t *testing.T, token string, extra ...any) *loginServer {
	t.Helper()
	gin.SetMode(gin.TestMode)
	s := &loginServer{clock: testutil.NewClock(now)}
	parsed, err := limits.Parse([]byte("limits:\n  PAY:ALIPAY: 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	log := slog.New(slog.NewJSONHandler(&s.log, nil))
	base := &console.Options{Reports: &fakeReports{}, Usage: fakeUsage{cfg: cfg},
		Limits: fakeLimitsView{cfg: cfg, st: configcenter.Status{Loaded: true}}, Logger: log, Now: s.clock.Now}
	state := func(g *gin.RouterGroup) {
		g.POST("/test/state", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"changed": true}) })
	}
	admin, c := mountAll(t, base, extra)
	h, err := httpapi.New(httpapi.Options{AuthGuard: authguard.New(authguard.Options{MaxFailures: 1 << 20}), Pay: nopPay{}, Logger: log, AdminToken: token, Now: s.clock.Now,
		Admin: append([]func(*gin.RouterGroup){state}, admin...), Console: c})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	if s.v, err = api.NewValidator(); err != nil {
		t.Fatal(err)
	}
	return s
}

// send makes one request without following redirects; documented routes
// are checked against api/openapi.yaml.
func (s *loginServer) send(t *testing.T, method, path, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
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
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func form(v url.Values, extra map[string]string) (string, map[string]string) {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}
	for k, val := range extra {
		h[k] = val
	}
	return v.Encode(), h
}

// sessionCookieOf returns the payserver_admin cookie an answer sets.
func sessionCookieOf(a answer) *http.Cookie {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "payserver_admin" {
			return c
		}
	}
	return nil
}

// login logs in and returns the session cookie ("payserver_admin=…").
func (s *loginServer) login(t *testing.T) string {
	t.Helper()
	body, h := form(url.Values{"token": {loginToken}}, nil)
	a := s.send(t, http.MethodPost, "/dashboard/login", body, h)
	c := sessionCookieOf(a)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/dashboard" || c == nil {
		t.Fatalf("login: %d, Location %q, cookie %v; want 303 to /dashboard with a session cookie", a.status, a.header.Get("Location"), c)
	}
	return c.Name + "=" + c.Value
}

// csrfOf returns the CSRF token of the dashboard's logout form.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`<form method="post" action="/dashboard/logout" class="logout"><input type="hidden" name="csrf" value="([^"]+)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the dashboard has no logout form with a CSRF token")
	}
	return m[1]
}

// TestDashboardLoginInABrowser: with an admin token, a browser asking for
// the dashboard gets a login form (401); posting the token sets an
// HttpOnly, SameSite=Strict session cookie that is not the token (Secure
// over TLS) and opens the dashboard, with a logout that ends the session.
// Before, the dashboard answered 401 JSON to a browser with no way in.
func TestDashboardLoginInABrowser(t *testing.T) {
	s := newLoginServer(t, loginToken)
	browser := map[string]string{"Accept": "text/html,application/xhtml+xml"}

	a := s.send(t, http.MethodGet, "/dashboard", "", browser)
	if a.status != 401 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(a.body, `<form class="login" method="post" action="/dashboard/login">`) ||
		!strings.Contains(a.body, `<input type="password" id="token" name="token"`) {
		t.Fatalf("GET /dashboard from a browser: %d %s\n%.400s; want 401 and the login form", a.status, a.header.Get("Content-Type"), a.body)
	}
	if a.header.Get("WWW-Authenticate") != `Bearer realm="payserver-admin"` {
		t.Errorf("WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
	}
	if a := s.send(t, http.MethodGet, "/dashboard/login", "", browser); a.status != 200 || !strings.Contains(a.body, `name="token"`) {
		t.Errorf("GET /dashboard/login: %d", a.status)
	}

	body, h := form(url.Values{"token": {loginToken}}, nil)
	a = s.send(t, http.MethodPost, "/dashboard/login", body, h)
	c := sessionCookieOf(a)
	if a.status != 303 || a.header.Get("Location") != "/dashboard" || c == nil {
		t.Fatalf("login: %d, Location %q, cookie %v", a.status, a.header.Get("Location"), c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge != int((12*time.Hour).Seconds()) {
		t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/, Max-Age 12h, not Secure over plain HTTP", a.header.Get("Set-Cookie"))
	}
	if strings.Contains(c.Value, loginToken) || len(c.Value) < 40 {
		t.Errorf("the cookie's value %q is not an opaque random id", c.Value)
	}
	cookie := c.Name + "=" + c.Value
	with := map[string]string{"Cookie": cookie, "Accept": "text/html"}
	a = s.send(t, http.MethodGet, "/dashboard", "", with)
	if a.status != 200 || !strings.Contains(a.body, `<svg class="usage-bar" data-key="PAY:ALIPAY"`) {
		t.Fatalf("GET /dashboard with the session: %d", a.status)
	}
	csrf := csrfOf(t, a.body)
	if a.header.Get("X-Frame-Options") != "DENY" || !strings.Contains(a.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("the dashboard may be framed: %v", a.header)
	}
	if a := s.send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.status != 200 {
		t.Errorf("GET /channels/usage with the session: %d", a.status)
	}

	// Over TLS (here said by the proxy) the cookie is Secure.
	body, h = form(url.Values{"token": {loginToken}}, map[string]string{"X-Forwarded-Proto": "https"})
	if c := sessionCookieOf(s.send(t, http.MethodPost, "/dashboard/login", body, h)); c == nil || !c.Secure {
		t.Errorf("behind TLS the cookie is not Secure: %v", c)
	}

	// Logout needs the session's CSRF token; then the session is over.
	body, h = form(url.Values{"csrf": {"forged"}}, map[string]string{"Cookie": cookie})
	if a := s.send(t, http.MethodPost, "/dashboard/logout", body, h); a.status != 401 {
		t.Errorf("logout with a forged CSRF token: %d, want 401", a.status)
	}
	body, h = form(url.Values{"csrf": {csrf}}, map[string]string{"Cookie": cookie})
	a = s.send(t, http.MethodPost, "/dashboard/logout", body, h)
	if c := sessionCookieOf(a); a.status != 303 || a.header.Get("Location") != "/dashboard/login" || c == nil || c.MaxAge >= 0 {
		t.Fatalf("logout: %d, Location %q, cookie %v; want 303 to the login form, the cookie deleted", a.status, a.header.Get("Location"), c)
	}
	if a := s.send(t, http.MethodGet, "/dashboard", "", with); a.status != 401 || !strings.Contains(a.body, `name="token"`) {
		t.Errorf("GET /dashboard after logout: %d, want 401 and the login form", a.status)
	}
	if a := s.send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.status != 401 || !strings.Contains(a.body, `"UNAUTHORIZED"`) {
		t.Errorf("GET /channels/usage after logout: %d %s", a.status, a.body)
	}
}

// TestDashboardLoginRefusals: a wrong, missing, URL-borne, cross-site or
// non-form login gets no session; failures are logged rate-limited and
// never with the token; a session expires after 12 hours.
func TestDashboardLoginRefusals(t *testing.T) {
	s := newLoginServer(t, loginToken)
	wrong := loginToken[:len(loginToken)-1] + "X"
	tests := []struct {
		name   string
		path   string
		body   url.Values
		header map[string]string
		status int
	}{
		{"wrong token", "/dashboard/login", url.Values{"token": {wrong}}, nil, 401},
		{"no token", "/dashboard/login", url.Values{}, nil, 401},
		{"the token in the URL is refused, not read", "/dashboard/login?token=" + loginToken, url.Values{}, nil, 400},
		{"cross-site form", "/dashboard/login", url.Values{"token": {loginToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 401},
		{"another Origin", "/dashboard/login", url.Values{"token": {loginToken}}, map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}, 401},
		{"JSON body", "/dashboard/login", url.Values{"token": {loginToken}}, map[string]string{"Content-Type": "application/json"}, 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, h := form(tt.body, tt.header)
			for k, v := range tt.header {
				if v == "" {
					delete(h, k)
				}
			}
			a := s.send(t, http.MethodPost, tt.path, body, h)
			if a.status != tt.status || sessionCookieOf(a) != nil {
				t.Errorf("%d, cookie %v; want %d and no session", a.status, sessionCookieOf(a), tt.status)
			}
		})
	}
	if !strings.Contains(s.logs(), "wrong token in the login form") {
		t.Errorf("a failed login is not logged:\n%s", s.logs())
	}
	for i := 0; i < 30; i++ {
		body, h := form(url.Values{"token": {wrong}}, nil)
		s.send(t, http.MethodPost, "/dashboard/login", body, h)
	}
	if n := strings.Count(s.logs(), "admin authentication failed"); n > 5 {
		t.Errorf("%d failures logged in a burst; want at most 5 (rate-limited)", n)
	}
	if strings.Contains(s.logs(), loginToken) || strings.Contains(s.logs(), wrong) {
		t.Error("the log holds a token")
	}

	cookie := s.login(t)
	if a := s.send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.status != 200 {
		t.Fatalf("fresh session: %d", a.status)
	}
	s.clock.Advance(12*time.Hour - time.Second)
	if a := s.send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.status != 200 {
		t.Fatalf("session a second before it expires: %d", a.status)
	}
	s.clock.Advance(time.Second)
	if a := s.send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.status != 401 {
		t.Fatalf("session after 12 hours: %d, want 401", a.status)
	}
}

// TestAdminSessionCSRF: a state-changing admin request authenticated by the
// session cookie needs the session's CSRF token and a same-origin request;
// the bearer token works as before, without either.
func TestAdminSessionCSRF(t *testing.T) {
	s := newLoginServer(t, loginToken)
	cookie := s.login(t)
	csrf := csrfOf(t, s.send(t, http.MethodGet, "/dashboard", "", map[string]string{"Cookie": cookie}).body)
	other := s.login(t) // another session's token is not this one's
	otherCSRF := csrfOf(t, s.send(t, http.MethodGet, "/dashboard", "", map[string]string{"Cookie": other}).body)
	jsonType := "application/json"
	tests := []struct {
		name   string
		header map[string]string
		status int
	}{
		{"cookie without CSRF token", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}, 401},
		{"cookie with another session's token", map[string]string{"Cookie": cookie, "X-CSRF-Token": otherCSRF, "Sec-Fetch-Site": "same-origin"}, 401},
		{"cookie and token, cross-site", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}, 401},
		{"cookie and token, another Origin", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": "http://evil.example"}, 401},
		{"cookie and token, same-origin", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-origin"}, 200},
		{"cookie and token, this Origin", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": s.url}, 200},
		{"bearer token, no CSRF token", map[string]string{"Authorization": "Bearer " + loginToken}, 200},
		{"wrong bearer token beside a good session", map[string]string{"Authorization": "Bearer nope", "Cookie": cookie, "X-CSRF-Token": csrf}, 401},
		{"nothing", map[string]string{}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.header["Content-Type"] = jsonType
			if a := s.send(t, http.MethodPost, "/test/state", "{}", tt.header); a.status != tt.status {
				t.Errorf("POST /test/state: %d %s, want %d", a.status, a.body, tt.status)
			}
		})
	}
}

// TestNoLoginWithoutAdminToken: without an admin token there is no login
// (the admin routes answer loopback clients, as before).
func TestNoLoginWithoutAdminToken(t *testing.T) {
	s := newLoginServer(t, "")
	if a := s.send(t, http.MethodGet, "/dashboard/login", "", nil); a.status != 404 {
		t.Errorf("GET /dashboard/login without a token: %d, want 404", a.status)
	}
	if a := s.send(t, http.MethodGet, "/dashboard", "", map[string]string{"Accept": "text/html"}); a.status != 200 || strings.Contains(a.body, "log out") {
		t.Errorf("GET /dashboard from loopback without a token: %d, want 200 without a logout", a.status)
	}
}
