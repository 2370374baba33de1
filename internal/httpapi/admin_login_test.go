package httpapi_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"payserver/internal/console/consoletest"
)

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
	s := consoletest.NewLoginServer(t, consoletest.LoginToken)
	browser := map[string]string{"Accept": "text/html,application/xhtml+xml"}

	a := s.Send(t, http.MethodGet, "/dashboard", "", browser)
	if a.Status != 401 || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(a.Body, `<form class="login" method="post" action="/dashboard/login">`) ||
		!strings.Contains(a.Body, `<input type="password" id="token" name="token"`) {
		t.Fatalf("GET /dashboard from a browser: %d %s\n%.400s; want 401 and the login form", a.Status, a.Header.Get("Content-Type"), a.Body)
	}
	if a.Header.Get("WWW-Authenticate") != `Bearer realm="payserver-admin"` {
		t.Errorf("WWW-Authenticate %q", a.Header.Get("WWW-Authenticate"))
	}
	if a := s.Send(t, http.MethodGet, "/dashboard/login", "", browser); a.Status != 200 || !strings.Contains(a.Body, `name="token"`) {
		t.Errorf("GET /dashboard/login: %d", a.Status)
	}

	body, h := consoletest.Form(url.Values{"token": {consoletest.LoginToken}}, nil)
	a = s.Send(t, http.MethodPost, "/dashboard/login", body, h)
	c := consoletest.SessionCookieOf(a)
	if a.Status != 303 || a.Header.Get("Location") != "/dashboard" || c == nil {
		t.Fatalf("login: %d, Location %q, cookie %v", a.Status, a.Header.Get("Location"), c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" || c.MaxAge != int((12*time.Hour).Seconds()) {
		t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/, Max-Age 12h, not Secure over plain HTTP", a.Header.Get("Set-Cookie"))
	}
	if strings.Contains(c.Value, consoletest.LoginToken) || len(c.Value) < 40 {
		t.Errorf("the cookie's value %q is not an opaque random id", c.Value)
	}
	cookie := c.Name + "=" + c.Value
	with := map[string]string{"Cookie": cookie, "Accept": "text/html"}
	a = s.Send(t, http.MethodGet, "/dashboard", "", with)
	if a.Status != 200 || !strings.Contains(a.Body, `<svg class="usage-bar" data-key="PAY:ALIPAY"`) {
		t.Fatalf("GET /dashboard with the session: %d", a.Status)
	}
	csrf := csrfOf(t, a.Body)
	if a.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(a.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("the dashboard may be framed: %v", a.Header)
	}
	if a := s.Send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.Status != 200 {
		t.Errorf("GET /channels/usage with the session: %d", a.Status)
	}

	// Over TLS (here said by the proxy) the cookie is Secure.
	body, h = consoletest.Form(url.Values{"token": {consoletest.LoginToken}}, map[string]string{"X-Forwarded-Proto": "https"})
	if c := consoletest.SessionCookieOf(s.Send(t, http.MethodPost, "/dashboard/login", body, h)); c == nil || !c.Secure {
		t.Errorf("behind TLS the cookie is not Secure: %v", c)
	}

	// Logout needs the session's CSRF token; then the session is over.
	body, h = consoletest.Form(url.Values{"csrf": {"forged"}}, map[string]string{"Cookie": cookie})
	if a := s.Send(t, http.MethodPost, "/dashboard/logout", body, h); a.Status != 401 {
		t.Errorf("logout with a forged CSRF token: %d, want 401", a.Status)
	}
	body, h = consoletest.Form(url.Values{"csrf": {csrf}}, map[string]string{"Cookie": cookie})
	a = s.Send(t, http.MethodPost, "/dashboard/logout", body, h)
	if c := consoletest.SessionCookieOf(a); a.Status != 303 || a.Header.Get("Location") != "/dashboard/login" || c == nil || c.MaxAge >= 0 {
		t.Fatalf("logout: %d, Location %q, cookie %v; want 303 to the login form, the cookie deleted", a.Status, a.Header.Get("Location"), c)
	}
	if a := s.Send(t, http.MethodGet, "/dashboard", "", with); a.Status != 401 || !strings.Contains(a.Body, `name="token"`) {
		t.Errorf("GET /dashboard after logout: %d, want 401 and the login form", a.Status)
	}
	if a := s.Send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.Status != 401 || !strings.Contains(a.Body, `"UNAUTHORIZED"`) {
		t.Errorf("GET /channels/usage after logout: %d %s", a.Status, a.Body)
	}
}

// TestDashboardLoginRefusals: a wrong, missing, URL-borne, cross-site or
// non-form login gets no session; failures are logged rate-limited and
// never with the token; a session expires after 12 hours.
func TestDashboardLoginRefusals(t *testing.T) {
	s := consoletest.NewLoginServer(t, consoletest.LoginToken)
	wrong := consoletest.LoginToken[:len(consoletest.LoginToken)-1] + "X"
	tests := []struct {
		name   string
		path   string
		body   url.Values
		header map[string]string
		status int
	}{
		{"wrong token", "/dashboard/login", url.Values{"token": {wrong}}, nil, 401},
		{"no token", "/dashboard/login", url.Values{}, nil, 401},
		{"the token in the URL is refused, not read", "/dashboard/login?token=" + consoletest.LoginToken, url.Values{}, nil, 400},
		{"cross-site form", "/dashboard/login", url.Values{"token": {consoletest.LoginToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 401},
		{"another Origin", "/dashboard/login", url.Values{"token": {consoletest.LoginToken}}, map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}, 401},
		{"JSON body", "/dashboard/login", url.Values{"token": {consoletest.LoginToken}}, map[string]string{"Content-Type": "application/json"}, 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, h := consoletest.Form(tt.body, tt.header)
			for k, v := range tt.header {
				if v == "" {
					delete(h, k)
				}
			}
			a := s.Send(t, http.MethodPost, tt.path, body, h)
			if a.Status != tt.status || consoletest.SessionCookieOf(a) != nil {
				t.Errorf("%d, cookie %v; want %d and no session", a.Status, consoletest.SessionCookieOf(a), tt.status)
			}
		})
	}
	if !strings.Contains(s.Logs(), "wrong token in the login form") {
		t.Errorf("a failed login is not logged:\n%s", s.Logs())
	}
	for i := 0; i < 30; i++ {
		body, h := consoletest.Form(url.Values{"token": {wrong}}, nil)
		s.Send(t, http.MethodPost, "/dashboard/login", body, h)
	}
	if n := strings.Count(s.Logs(), "admin authentication failed"); n > 5 {
		t.Errorf("%d failures logged in a burst; want at most 5 (rate-limited)", n)
	}
	if strings.Contains(s.Logs(), consoletest.LoginToken) || strings.Contains(s.Logs(), wrong) {
		t.Error("the log holds a token")
	}

	cookie := s.Login(t)
	if a := s.Send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.Status != 200 {
		t.Fatalf("fresh session: %d", a.Status)
	}
	s.Clock.Advance(12*time.Hour - time.Second)
	if a := s.Send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.Status != 200 {
		t.Fatalf("session a second before it expires: %d", a.Status)
	}
	s.Clock.Advance(time.Second)
	if a := s.Send(t, http.MethodGet, "/channels/usage", "", map[string]string{"Cookie": cookie}); a.Status != 401 {
		t.Fatalf("session after 12 hours: %d, want 401", a.Status)
	}
}

// TestAdminSessionCSRF: a state-changing admin request authenticated by the
// session cookie needs the session's CSRF token and a same-origin request;
// the bearer token works as before, without either.
func TestAdminSessionCSRF(t *testing.T) {
	s := consoletest.NewLoginServer(t, consoletest.LoginToken)
	cookie := s.Login(t)
	csrf := csrfOf(t, s.Send(t, http.MethodGet, "/dashboard", "", map[string]string{"Cookie": cookie}).Body)
	other := s.Login(t) // another session's token is not this one's
	otherCSRF := csrfOf(t, s.Send(t, http.MethodGet, "/dashboard", "", map[string]string{"Cookie": other}).Body)
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
		{"cookie and token, this Origin", map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": s.URL}, 200},
		{"bearer token, no CSRF token", map[string]string{"Authorization": "Bearer " + consoletest.LoginToken}, 200},
		{"wrong bearer token beside a good session", map[string]string{"Authorization": "Bearer nope", "Cookie": cookie, "X-CSRF-Token": csrf}, 401},
		{"nothing", map[string]string{}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.header["Content-Type"] = jsonType
			if a := s.Send(t, http.MethodPost, "/test/state", "{}", tt.header); a.Status != tt.status {
				t.Errorf("POST /test/state: %d %s, want %d", a.Status, a.Body, tt.status)
			}
		})
	}
}

// TestNoLoginWithoutAdminToken: without an admin token there is no login
// (the admin routes answer loopback clients, as before).
func TestNoLoginWithoutAdminToken(t *testing.T) {
	s := consoletest.NewLoginServer(t, "")
	if a := s.Send(t, http.MethodGet, "/dashboard/login", "", nil); a.Status != 404 {
		t.Errorf("GET /dashboard/login without a token: %d, want 404", a.Status)
	}
	if a := s.Send(t, http.MethodGet, "/dashboard", "", map[string]string{"Accept": "text/html"}); a.Status != 200 || strings.Contains(a.Body, "log out") {
		t.Errorf("GET /dashboard from loopback without a token: %d, want 200 without a logout", a.Status)
	}
}
