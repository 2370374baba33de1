package pay_test

import (
	"context"
	"errors"
	"testing"

	"payserver/internal/apperr"
	"payserver/internal/pay/paytest"
)

// TestLimitedErrorDetails checks the REQUEST_LIMITED answer of a full window
// and of a closed key (limit 0): a closed key has no time after which a
// retry can succeed, so it carries no RetryAfter, no retryAfterMs and
// details.closed true.
func TestLimitedErrorDetails(t *testing.T) {
	tests := []struct {
		name       string
		doc        string
		admitted   int
		wantClosed bool
	}{
		{name: "full window", doc: "limits:\n  B:ALIPAY: {limit: 1, window: 1m}\n", admitted: 1},
		{name: "closed key", doc: "limits:\n  B:ALIPAY: 0\n", admitted: 0, wantClosed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, _, _ := newFlow(t, paytest.NewMemStore(), tt.doc)
			for i := 0; i < tt.admitted; i++ {
				if _, err := svc.Pay(context.Background(), req("ok"+string(rune('a'+i)))); err != nil {
					t.Fatalf("payment %d: %v", i, err)
				}
			}
			_, err := svc.Pay(context.Background(), req("refused"))
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != apperr.RequestLimited {
				t.Fatalf("err = %v, want REQUEST_LIMITED", err)
			}
			closed, _ := e.Details["closed"].(bool)
			if closed != tt.wantClosed {
				t.Errorf("details.closed = %v, want %v (details %v)", e.Details["closed"], tt.wantClosed, e.Details)
			}
			_, hasRetryMs := e.Details["retryAfterMs"]
			if got, want := hasRetryMs, !tt.wantClosed; got != want {
				t.Errorf("details has retryAfterMs = %v, want %v (details %v)", got, want, e.Details)
			}
			if got, want := e.RetryAfter > 0, !tt.wantClosed; got != want {
				t.Errorf("RetryAfter = %v; want positive = %v (a closed key must not invite retries)", e.RetryAfter, want)
			}
		})
	}
}
