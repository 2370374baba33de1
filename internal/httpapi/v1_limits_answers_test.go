package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/api"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limitapi"
	"payserver/internal/ratelimit"
)

// lostAdmitter answers every check as a lost limiter answer.
type lostAdmitter struct{}

func (lostAdmitter) Check(_ context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{Key: r.Key, Unknown: true, RetryAfter: time.Second, Hold: ratelimit.HoldOf(r.Key, r.Member)}, nil
}
func (lostAdmitter) Release(context.Context, ratelimit.Hold) error { return nil }
func (lostAdmitter) ReleaseHeld(context.Context, ratelimit.Hold) (bool, error) {
	return false, nil // it never records anything
}
func (lostAdmitter) ReleaseAmount(context.Context, ratelimit.Hold) error { return nil }
func (lostAdmitter) Throttled(context.Context, ratelimit.Hold, time.Duration) error {
	return nil
}
func (lostAdmitter) Peek(context.Context, ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, nil
}

// keptLedger takes every lost acquire and keeps it in memory: the
// answers, not the slots' fate, are under test here.
type keptLedger struct{}

func (keptLedger) Admitting() error                              { return nil }
func (keptLedger) KeepLostAcquire(ratelimit.Hold, time.Duration) {}
func (keptLedger) AcquiredAgain(ratelimit.Key, string)           {}

// lostLimitsServer serves the limits service over lostAdmitter to one
// client, with scopes, and returns it with the validator of
// api/openapi.yaml. It closes with the test.
func lostLimitsServer(t *testing.T, client httpapi.ClientToken, scopes map[string][]string) (*httptest.Server, *api.Validator) {
	t.Helper()
	gin.SetMode(gin.TestMode)
	svc, err := limitapi.NewService(limitapi.Options{Admit: lostAdmitter{}, Peek: lostAdmitter{}, Ledger: keptLedger{}, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), LimitsAPI: svc,
		ClientTokens: []httpapi.ClientToken{client}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	v, err := api.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return srv, v
}

// TestAcquireAnswersOutOfScopeAndLost: over HTTP, an acquire outside the
// client's scope is 403 FORBIDDEN naming the bizType, and one whose
// limiter answer was lost is 503 with dependency limiter and outcome
// unknown; both as api/openapi.yaml says.
func TestAcquireAnswersOutOfScopeAndLost(t *testing.T) {
	srv, v := lostLimitsServer(t, httpapi.ClientToken{Name: "refunds", Token: "tok-refunds-0123456789"}, map[string][]string{"refunds": {"REFUND"}})
	for _, tc := range []struct {
		bizType string
		status  int
		code    string
		detail  map[string]any
	}{
		{"ONLINE_PAY", 403, "FORBIDDEN", map[string]any{"bizType": "ONLINE_PAY"}},
		{"REFUND", 503, "DEPENDENCY_UNAVAILABLE", map[string]any{"dependency": "limiter", "outcome": "unknown"}},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/limits/acquire",
			strings.NewReader(`{"bizType":"`+tc.bizType+`","channel":"ALIPAY","requestId":"r-1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer tok-refunds-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := v.CheckResponse(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Errorf("%s: the answer breaks api/openapi.yaml: %v\n%s", tc.bizType, err, b)
		}
		var body struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		}
		_ = json.Unmarshal(b, &body)
		if resp.StatusCode != tc.status || body.Code != tc.code {
			t.Fatalf("%s: %d %s, want %d %s", tc.bizType, resp.StatusCode, b, tc.status, tc.code)
		}
		for k, want := range tc.detail {
			if body.Details[k] != want {
				t.Errorf("%s: details.%s = %v, want %v", tc.bizType, k, body.Details[k], want)
			}
		}
	}
}

// TestReleaseOfASlotNotHeldAnswers404: over HTTP, a release that finds no
// slot of the client's is 404 SLOT_NOT_FOUND echoing the requestId, as
// api/openapi.yaml says.
func TestReleaseOfASlotNotHeldAnswers404(t *testing.T) {
	srv, v := lostLimitsServer(t, httpapi.ClientToken{Name: "payouts", Token: "tok-payouts-0123456789"}, nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/limits/release",
		strings.NewReader(`{"bizType":"REFUND","channel":"ALIPAY","requestId":"r-1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok-payouts-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body struct {
		Code      string `json:"code"`
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(b, &body)
	if resp.StatusCode != http.StatusNotFound || body.Code != "SLOT_NOT_FOUND" || body.RequestID != "r-1" {
		t.Fatalf("release of a slot not held: %d %s; want 404 SLOT_NOT_FOUND naming r-1", resp.StatusCode, b)
	}
	if err := v.CheckResponse(req, resp.StatusCode, resp.Header, b); err != nil {
		t.Errorf("the answer breaks api/openapi.yaml: %v\n%s", err, b)
	}
}
