package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/authguard"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limitapi"

	"payserver/internal/testutil"
)

// attempts is how many requests with a wrong token floodWithBadToken sends.
const attempts = 200

// floodWithBadToken sends attempts GET requests for path to h with a wrong
// bearer token, each of which must be answered 401.
func floodWithBadToken(t *testing.T, h http.Handler, path string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i := 0; i < attempts; i++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer wrong-token-xyz")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
}

// TestFailedAdminAuthIsLogged: a failed admin authentication is logged at
// warn with the route and client, never the token, and a flood of them is
// rate-limited.
func TestFailedAdminAuthIsLogged(t *testing.T) {
	gin.SetMode(gin.TestMode)
	var logs testutil.LogBuffer
	h, err := httpapi.New(httpapi.Options{AuthGuard: authguard.New(authguard.Options{MaxFailures: 1 << 20}), Pay: consoletest.NopPay{}, Logger: slog.New(slog.NewTextHandler(&logs, nil)), AdminToken: "s3cret-admin",
		Admin: []func(*gin.RouterGroup){func(g *gin.RouterGroup) { g.GET("/probe", func(c *gin.Context) { c.Status(204) }) }}})
	if err != nil {
		t.Fatal(err)
	}
	floodWithBadToken(t, h, "/probe")
	l := logs.String()
	n := strings.Count(l, "admin authentication failed")
	if n == 0 {
		t.Fatalf("no failed admin authentication was logged:\n%s", l)
	}
	if n >= attempts/2 {
		t.Errorf("%d of %d failures logged; want them rate-limited", n, attempts)
	}
	if strings.Contains(l, "wrong-token-xyz") || strings.Contains(l, "s3cret-admin") {
		t.Errorf("a token was logged:\n%s", l)
	}
	if !strings.Contains(l, "route=/probe") || !strings.Contains(l, "level=WARN") {
		t.Errorf("the log line lacks the route or the warn level:\n%s", l)
	}
}

// TestFailedClientAuthIsRateLimited: /v1/limits calls without a valid
// client token are logged at warn, never with the token, and a flood of
// them is rate-limited like failed admin authentications.
func TestFailedClientAuthIsRateLimited(t *testing.T) {
	gin.SetMode(gin.TestMode)
	var logs testutil.LogBuffer
	h, err := httpapi.New(httpapi.Options{AuthGuard: authguard.New(authguard.Options{MaxFailures: 1 << 20}), Pay: consoletest.NopPay{}, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		LimitsAPI: nopLimitsAPI{}, ClientTokens: []httpapi.ClientToken{{Name: "refunds", Token: "tok-refunds-0123456789"}}})
	if err != nil {
		t.Fatal(err)
	}
	floodWithBadToken(t, h, "/v1/limits/peek?bizType=A&channel=B")
	l := logs.String()
	n := strings.Count(l, "limits call refused")
	if n == 0 || n >= attempts/2 {
		t.Fatalf("%d of %d failures logged; want some, rate-limited:\n%s", n, attempts, l)
	}
	if strings.Contains(l, "wrong-token-xyz") || strings.Contains(l, "tok-refunds") {
		t.Errorf("a token was logged:\n%s", l)
	}
}

type nopLimitsAPI struct{}

func (nopLimitsAPI) Acquire(context.Context, string, limitapi.AcquireRequest) (limitapi.Acquired, error) {
	return limitapi.Acquired{}, nil
}

func (nopLimitsAPI) Release(context.Context, string, limitapi.ReleaseRequest) error { return nil }

func (nopLimitsAPI) Peek(context.Context, string, limitapi.PeekRequest) (limitapi.Peeked, error) {
	return limitapi.Peeked{}, nil
}
