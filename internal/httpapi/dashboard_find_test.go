package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLoginReturnsToTheAskedURL: a browser sent to the login form by GET
// /dashboard?channel=ALIPAY&page=2 comes back to that URL, filters
// included, once logged in; a next that is not the dashboard (another
// site, another route) is ignored for /dashboard.
func TestLoginReturnsToTheAskedURL(t *testing.T) {
	s := newLoginServer(t, loginToken)
	browser := map[string]string{"Accept": "text/html"}
	asked := "/dashboard?channel=ALIPAY&page=2"
	a := s.send(t, http.MethodGet, asked, "", browser)
	if a.status != 401 || !strings.Contains(a.body, `<input type="hidden" name="next" value="/dashboard?channel=ALIPAY&amp;page=2">`) {
		t.Fatalf("GET %s: %d; the login form does not carry the asked URL:\n%.1500s", asked, a.status, a.body)
	}
	for _, tt := range []struct{ next, want string }{
		{asked, asked},
		{"", "/dashboard"},
		{"https://evil.example/dashboard", "/dashboard"},
		{"//evil.example/dashboard", "/dashboard"},
		{"/limits", "/dashboard"},
		{"/dashboard/logout", "/dashboard"},
		{`/\evil.example`, "/dashboard"},
	} {
		body, h := form(url.Values{"token": {loginToken}, "next": {tt.next}}, nil)
		a := s.send(t, http.MethodPost, "/dashboard/login", body, h)
		if a.status != http.StatusSeeOther || a.header.Get("Location") != tt.want {
			t.Errorf("login with next %q: %d to %q, want 303 to %q", tt.next, a.status, a.header.Get("Location"), tt.want)
		}
	}
}

// TestRootSendsBrowsersToTheDashboard: GET / from a browser (Accept:
// text/html) is redirected to /dashboard; any other client still gets the
// JSON 404.
func TestRootSendsBrowsersToTheDashboard(t *testing.T) {
	s := newLoginServer(t, loginToken)
	a := s.send(t, http.MethodGet, "/", "", map[string]string{"Accept": "text/html,application/xhtml+xml"})
	if a.status != http.StatusFound || a.header.Get("Location") != "/dashboard" {
		t.Errorf("GET / from a browser: %d to %q, want 302 to /dashboard", a.status, a.header.Get("Location"))
	}
	a = s.send(t, http.MethodGet, "/", "", map[string]string{"Accept": "application/json"})
	if a.status != http.StatusNotFound || !strings.Contains(a.body, `"NOT_FOUND"`) {
		t.Errorf("GET / from a JSON client: %d %s, want the JSON 404", a.status, a.body)
	}
	// "/" is documented for GET only: another method is not allowed there.
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodTrace} {
		if a := s.send(t, m, "/", "", nil); a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != http.MethodGet {
			t.Errorf("%s /: %d (Allow %q), want 405 allowing GET", m, a.status, a.header.Get("Allow"))
		}
	}
}
