package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"payserver/internal/channel/gateway"
	"payserver/internal/pay"
)

type noNotifier struct{}

func (noNotifier) Notify(context.Context, pay.Notification) (*pay.Order, error) { return nil, nil }

func newLoggedHandler(t *testing.T, logs *bytes.Buffer) http.Handler {
	t.Helper()
	gin.SetMode(gin.TestMode)
	h, err := New(Options{
		Pay: noPay{}, Logger: slog.New(slog.NewTextHandler(logs, nil)), AuthGuard: manyTries(),
		LimitsAPI: noLimits{}, ClientTokens: []ClientToken{{Name: "jobs", Token: "client-token-0123456789"}},
		Notify: &NotifyOptions{Notifier: noNotifier{}, Nonces: gateway.NewNonceCache(100), Keys: func(string) (gateway.Keys, bool) {
			return gateway.Keys{{ID: "default", Secret: []byte("notify-secret-0123456789-0123456789")}}, true
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestNosniffOnEveryAnswer: every answer, errors and unknown routes
// included, says X-Content-Type-Options: nosniff.
func TestNosniffOnEveryAnswer(t *testing.T) {
	var logs bytes.Buffer
	h := newLoggedHandler(t, &logs)
	for _, path := range []string{"/healthz", "/no/such/route", "/pay/bad%20id", "/metrics", "/v1/limits/peek"} {
		if got := serveFrom(h, "10.0.0.7:4000", path, nil).Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
}

// TestForwardedForIsNeverThePeer: a client's X-Forwarded-For is not
// trusted: the peer logged is the connection's.
func TestForwardedForIsNeverThePeer(t *testing.T) {
	var logs bytes.Buffer
	h := newLoggedHandler(t, &logs)
	serveFrom(h, "10.0.0.7:4000", "/v1/limits/peek?bizType=A&channel=B", http.Header{"Authorization": {"Bearer wrong-token-0123456789"}, "X-Forwarded-For": {"203.0.113.9"}})
	if !strings.Contains(logs.String(), "10.0.0.7") || strings.Contains(logs.String(), "203.0.113.9") {
		t.Fatalf("the refused call is logged with the forwarded address, not the peer's:\n%s", logs.String())
	}
}

// TestBadNotifySignaturesAreLoggedRateLimited: a flood of forged
// notifications logs a burst, then nothing more within the interval, as
// failed authentications do.
func TestBadNotifySignaturesAreLoggedRateLimited(t *testing.T) {
	var logs bytes.Buffer
	h := newLoggedHandler(t, &logs)
	for range 50 {
		req := httptest.NewRequest(http.MethodPost, "/channels/ALIPAY/notify", strings.NewReader(`{"orderNo":"x"}`))
		req.RemoteAddr = "10.0.0.7:4000"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("a forged notification: %d, want 401", rec.Code)
		}
	}
	if n := strings.Count(logs.String(), "a channel notification was refused"); n > adminAuthLogBurst {
		t.Errorf("%d log lines for 50 forged notifications, want at most %d", n, adminAuthLogBurst)
	}
}
