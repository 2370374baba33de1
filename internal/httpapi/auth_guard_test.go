package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/limitapi"
)

type noLimits struct{}

func (noLimits) Acquire(context.Context, string, limitapi.AcquireRequest) (limitapi.Acquired, error) {
	return limitapi.Acquired{}, nil
}
func (noLimits) Release(context.Context, string, limitapi.ReleaseRequest) error { return nil }
func (noLimits) Peek(context.Context, string, limitapi.PeekRequest) (limitapi.Peeked, error) {
	return limitapi.Peeked{}, nil
}

func newGuardedHandler(t *testing.T, token string) http.Handler {
	t.Helper()
	gin.SetMode(gin.TestMode)
	h, err := New(Options{
		Pay: noPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: token, Metrics: okHandler{},
		LimitsAPI: noLimits{}, ClientTokens: []ClientToken{{Name: "jobs", Token: "client-token-0123456789"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFailedAuthenticationsAreSlowed: after 10 failed authentications from
// one address within a minute, through any of the admin bearer token, the
// dashboard login and the client tokens, that address is answered 429 with
// Retry-After, even with the right token; another address is not.
func TestFailedAuthenticationsAreSlowed(t *testing.T) {
	const token = "admin-token-0123456789"
	for name, fail := range map[string]func(h http.Handler) int{
		"admin bearer": func(h http.Handler) int {
			return serveFrom(h, "10.0.0.7:4000", "/metrics", http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}).Code
		},
		"client token": func(h http.Handler) int {
			return serveFrom(h, "10.0.0.7:4000", "/v1/limits/peek?bizType=A&channel=B", http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}).Code
		},
		"dashboard login": func(h http.Handler) int {
			form := url.Values{"token": {"wrong-token-0123456789"}}.Encode()
			req := httptest.NewRequest(http.MethodPost, "/dashboard/login", strings.NewReader(form))
			req.RemoteAddr, req.Host = "10.0.0.7:4000", "127.0.0.1:8080"
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newGuardedHandler(t, token)
			for i := range 10 {
				if code := fail(h); code == http.StatusTooManyRequests {
					t.Fatalf("attempt %d: 429 before 10 failures", i+1)
				}
			}
			rec := serveFrom(h, "10.0.0.7:4001", "/metrics", http.Header{"Authorization": {"Bearer " + token}})
			if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("after 10 failures, the right token from the same address: %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
			}
			if rec := serveFrom(h, "10.0.0.8:4000", "/metrics", http.Header{"Authorization": {"Bearer " + token}}); rec.Code != http.StatusOK {
				t.Fatalf("another address with the right token: %d, want 200", rec.Code)
			}
		})
	}
}
