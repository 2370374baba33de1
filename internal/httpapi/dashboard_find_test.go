package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"payserver/internal/console/consoletest"
)

// TestLoginReturnsToTheAskedURL: a browser sent to the login form by GET
// /dashboard?channel=ALIPAY&page=2 comes back to that URL, filters
// included, once logged in; a next that is not the dashboard (another
// site, another route) is ignored for /dashboard.
func TestLoginReturnsToTheAskedURL(t *testing.T) {
	s := consoletest.NewLoginServer(t, consoletest.LoginToken)
	browser := map[string]string{"Accept": "text/html"}
	asked := "/dashboard?channel=ALIPAY&page=2"
	a := s.Send(t, http.MethodGet, asked, "", browser)
	if a.Status != 401 || !strings.Contains(a.Body, `<input type="hidden" name="next" value="/dashboard?channel=ALIPAY&amp;page=2">`) {
		t.Fatalf("GET %s: %d; the login form does not carry the asked URL:\n%.1500s", asked, a.Status, a.Body)
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
		body, h := consoletest.Form(url.Values{"token": {consoletest.LoginToken}, "next": {tt.next}}, nil)
		a := s.Send(t, http.MethodPost, "/dashboard/login", body, h)
		if a.Status != http.StatusSeeOther || a.Header.Get("Location") != tt.want {
			t.Errorf("login with next %q: %d to %q, want 303 to %q", tt.next, a.Status, a.Header.Get("Location"), tt.want)
		}
	}
}

// TestRootSendsBrowsersToTheDashboard: GET / from a browser (Accept:
// text/html) is redirected to /dashboard; any other client still gets the
// JSON 404.
func TestRootSendsBrowsersToTheDashboard(t *testing.T) {
	s := consoletest.NewLoginServer(t, consoletest.LoginToken)
	a := s.Send(t, http.MethodGet, "/", "", map[string]string{"Accept": "text/html,application/xhtml+xml"})
	if a.Status != http.StatusFound || a.Header.Get("Location") != "/dashboard" {
		t.Errorf("GET / from a browser: %d to %q, want 302 to /dashboard", a.Status, a.Header.Get("Location"))
	}
	a = s.Send(t, http.MethodGet, "/", "", map[string]string{"Accept": "application/json"})
	if a.Status != http.StatusNotFound || !strings.Contains(a.Body, `"NOT_FOUND"`) {
		t.Errorf("GET / from a JSON client: %d %s, want the JSON 404", a.Status, a.Body)
	}
	// "/" is documented for GET only: another method is not allowed there.
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodTrace} {
		if a := s.Send(t, m, "/", "", nil); a.Status != http.StatusMethodNotAllowed || a.Header.Get("Allow") != http.MethodGet {
			t.Errorf("%s /: %d (Allow %q), want 405 allowing GET", m, a.Status, a.Header.Get("Allow"))
		}
	}
}
