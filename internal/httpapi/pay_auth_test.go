package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestPayTokens: with pay tokens configured, POST /pay and GET
// /pay/{requestId} need one of them (401 without); the admin token is not
// one.
func TestPayTokens(t *testing.T) {
	gin.SetMode(gin.TestMode)
	h, err := New(Options{Pay: noPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: "admin-token-0123456789",
		PayTokens: []ClientToken{{Name: "core", Token: "pay-token-0123456789"}}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path, auth string) int {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.RemoteAddr, req.Host = "10.0.0.7:4000", "payserver:8080"
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, rt := range [][2]string{{http.MethodPost, "/pay"}, {http.MethodGet, "/pay/r-1"}} {
		for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer admin-token-0123456789"} {
			if code := send(rt[0], rt[1], auth); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", rt[0], rt[1], auth, code)
			}
		}
		if code := send(rt[0], rt[1], "Bearer pay-token-0123456789"); code == http.StatusUnauthorized {
			t.Errorf("%s %s with the pay token: 401", rt[0], rt[1])
		}
	}
}
