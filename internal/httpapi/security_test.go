package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/authguard"
	"payserver/internal/pay"
)

// What an admin route is reached from can only be loopback in the
// integration tests (they run on this machine); these tests set the remote
// address directly to cover every other source.

type noPay struct{}

func (noPay) Pay(context.Context, pay.PayRequest) (*pay.Order, error) {
	return nil, errors.New("unused")
}
func (noPay) Get(context.Context, string) (*pay.Order, error) { return nil, errors.New("unused") }

type okHandler struct{}

func (okHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }

func newAdminHandler(t *testing.T, token string) http.Handler {
	t.Helper()
	gin.SetMode(gin.TestMode)
	h, err := New(Options{AuthGuard: manyTries(),
		Pay: noPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: token, Metrics: okHandler{},
		Admin: []func(*gin.RouterGroup){func(g *gin.RouterGroup) {
			g.GET("/reports/x", func(c *gin.Context) { c.String(http.StatusOK, "report") })
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// serveFrom serves a GET of path from remote, addressed to
// 127.0.0.1:8080 unless header has a Host.
func serveFrom(h http.Handler, remote, path string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr, req.Host = remote, "127.0.0.1:8080"
	for k, vs := range header {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func wantUnauthorized(t *testing.T, rec *httptest.ResponseRecorder, what string) {
	t.Helper()
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("%s: status %d, want 401: %s", what, rec.Code, rec.Body)
	}
	var body struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != "UNAUTHORIZED" || body.Message == "" || body.Details == nil {
		t.Fatalf("%s: body %s is not an UNAUTHORIZED error (%v)", what, rec.Body, err)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q", what, ct)
	}
}

// TestAdminWithoutTokenIsLoopbackOnly: with no token configured, admin
// routes answer loopback clients and refuse every other source, whatever
// headers claim; the public routes answer everyone.
func TestAdminWithoutTokenIsLoopbackOnly(t *testing.T) {
	h := newAdminHandler(t, "")
	for _, path := range []string{"/metrics", "/reports/x"} {
		for _, remote := range []string{"127.0.0.1:40000", "[::1]:40000"} {
			if rec := serveFrom(h, remote, path, nil); rec.Code != http.StatusOK {
				t.Errorf("%s from %s: %d %s, want 200", path, remote, rec.Code, rec.Body)
			}
		}
		for _, remote := range []string{"10.0.0.7:40000", "192.168.1.20:40000", "[2001:db8::1]:40000", "[::ffff:10.0.0.7]:1"} {
			wantUnauthorized(t, serveFrom(h, remote, path, nil), path+" from "+remote)
			// Forwarding headers are not trusted, and a token is no use
			// when none is configured.
			spoof := http.Header{
				"X-Forwarded-For": {"127.0.0.1"}, "X-Real-Ip": {"127.0.0.1"}, "Forwarded": {"for=127.0.0.1"},
				"Authorization": {"Bearer "},
			}
			wantUnauthorized(t, serveFrom(h, remote, path, spoof), path+" from "+remote+" with forwarding headers")
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := serveFrom(h, "10.0.0.7:40000", path, nil); rec.Code != http.StatusOK {
			t.Errorf("public %s from a remote client: %d, want 200", path, rec.Code)
		}
	}
}

// TestAdminWithoutTokenNeedsALoopbackHost: with no token configured, a
// loopback client's admin request is refused unless it is addressed to a
// loopback name (a page of another site whose name resolves to 127.0.0.1,
// DNS rebinding) and unless it carries no forwarding header (a reverse
// proxy on the same host).
func TestAdminWithoutTokenNeedsALoopbackHost(t *testing.T) {
	h := newAdminHandler(t, "")
	for _, host := range []string{"localhost", "localhost:8080", "127.0.0.1:8080", "127.0.0.2", "[::1]:8080"} {
		if rec := serveFrom(h, "127.0.0.1:40000", "/metrics", http.Header{"Host": {host}}); rec.Code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", host, rec.Code, rec.Body)
		}
	}
	for _, host := range []string{"evil.example", "evil.example:8080", "localhost.evil.example", "10.0.0.7:8080", ""} {
		wantUnauthorized(t, serveFrom(h, "127.0.0.1:40000", "/metrics", http.Header{"Host": {host}}), "Host "+host)
	}
	for name, hdr := range map[string]http.Header{
		"X-Forwarded-For": {"X-Forwarded-For": {"10.0.0.7"}},
		"Forwarded":       {"Forwarded": {"for=10.0.0.7"}},
		"X-Real-Ip":       {"X-Real-Ip": {"10.0.0.7"}},
	} {
		wantUnauthorized(t, serveFrom(h, "127.0.0.1:40000", "/metrics", hdr), "through a proxy ("+name+")")
	}
}

// TestAdminTokenRequiredFromEverywhere: with a token configured, it is
// required from loopback too, and only the exact token passes.
func TestAdminTokenRequiredFromEverywhere(t *testing.T) {
	const token = "tok-0123456789abcdef"
	h := newAdminHandler(t, token)
	bad := map[string]string{
		"no header":              "",
		"wrong, same length":     "Bearer tok-0123456789abcdeX",
		"wrong, shorter":         "Bearer tok-0123",
		"wrong, longer":          "Bearer " + token + "0",
		"empty token":            "Bearer ",
		"no scheme":              token,
		"basic scheme":           "Basic " + token,
		"scheme without space":   "Bearer" + token,
		"token with space after": "Bearer " + token + " ",
		"two spaces":             "Bearer  " + token,
		"lowercase, wrong token": "bearer tok-0123456789abcdeX",
	}
	for _, path := range []string{"/metrics", "/reports/x"} {
		for _, remote := range []string{"127.0.0.1:40000", "10.0.0.7:40000"} {
			for name, auth := range bad {
				hdr := http.Header{}
				if auth != "" {
					hdr.Set("Authorization", auth)
				}
				rec := serveFrom(h, remote, path, hdr)
				wantUnauthorized(t, rec, path+" from "+remote+", "+name)
				if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="payserver-admin"` {
					t.Errorf("%s: WWW-Authenticate %q", name, got)
				}
			}
			// The scheme is case-insensitive (RFC 9110, 11.1).
			for _, scheme := range []string{"Bearer ", "bearer ", "BEARER "} {
				rec := serveFrom(h, remote, path, http.Header{"Authorization": {scheme + token}})
				if rec.Code != http.StatusOK {
					t.Errorf("%s from %s with the token (%q): %d %s", path, remote, scheme, rec.Code, rec.Body)
				}
			}
		}
	}
}

// manyTries is a guard that lets an address fail often, for tests of the
// refusals themselves (auth_guard_test.go tests the guard's budget).
func manyTries() *authguard.Guard { return authguard.New(authguard.Options{MaxFailures: 1 << 20}) }
