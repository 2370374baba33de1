package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLimitedErrorSaysWhenNotToWait: a 429 for an amount above its cap, or
// for a closed key, tells a caller that sleeps RetryAfter not to spin: no
// RetryAfter, ExceedsCap or Closed set; a scheduled closure says until when.
func TestLimitedErrorSaysWhenNotToWait(t *testing.T) {
	for _, tc := range []struct {
		name, body  string
		header      string
		exceeds     bool
		closed      bool
		closedUntil time.Time
		retry       time.Duration
	}{
		{"above the cap", `{"code":"REQUEST_LIMITED","details":{"rule":"amount/1s","amount":1000,"used":0,"exceedsCap":true}}`, "", true, false, time.Time{}, 0},
		{"closed", `{"code":"REQUEST_LIMITED","details":{"rule":"count/1s","limit":0,"used":0,"closed":true}}`, "", false, true, time.Time{}, 0},
		{"closed until", `{"code":"REQUEST_LIMITED","details":{"rule":"count/1s","limit":0,"used":0,"closed":true,"closedUntil":"2026-12-01T04:00:00Z","retryAfterMs":90000}}`, "90",
			false, true, time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}
			if tc.header != "" {
				resp.Header.Set("Retry-After", tc.header)
			}
			e, ok := decodeError(resp, []byte(tc.body)).(*LimitedError)
			if !ok {
				t.Fatalf("not a *LimitedError")
			}
			if e.ExceedsCap != tc.exceeds || e.Closed != tc.closed || !e.ClosedUntil.Equal(tc.closedUntil) || e.RetryAfter != tc.retry {
				t.Errorf("got exceedsCap %v closed %v until %v retry %v, want %v %v %v %v", e.ExceedsCap, e.Closed, e.ClosedUntil, e.RetryAfter, tc.exceeds, tc.closed, tc.closedUntil, tc.retry)
			}
		})
	}
}

// TestErrorBodiesAreDecodedOrSaidSo: a 409 is a *ConflictError with its
// code, never an UnavailableError a caller would retry; an error answer
// that is not payserver's JSON body (a proxy's page) says so, whatever its
// status, instead of passing for an error with an empty code.
func TestErrorBodiesAreDecodedOrSaidSo(t *testing.T) {
	conflict := decodeError(&http.Response{StatusCode: http.StatusConflict}, []byte(`{"code":"IDEMPOTENCY_CONFLICT","message":"requestId r1 belongs to a payment"}`))
	var ce *ConflictError
	if !errors.As(conflict, &ce) || ce.Body.Code != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("409: got %T %v, want *ConflictError with IDEMPOTENCY_CONFLICT", conflict, conflict)
	}
	for _, status := range []int{http.StatusTooManyRequests, http.StatusBadRequest, http.StatusBadGateway} {
		err := decodeError(&http.Response{StatusCode: status, Header: http.Header{}}, []byte("<html>bad gateway</html>"))
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Status != status || ue.Err == nil || !strings.Contains(err.Error(), "not payserver's JSON error body") {
			t.Errorf("%d with an HTML body: got %T %v, want *UnavailableError saying the body is not payserver's", status, err, err)
		}
	}
	if err := decodeError(&http.Response{StatusCode: http.StatusUnauthorized}, nil); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("401 with no body: got %v, want ErrUnauthorized", err)
	}
}
