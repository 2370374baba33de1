package limitapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"payserver/internal/apperr"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// TestClientScopes: a client with a scope acquires and releases only its
// bizTypes; outside them the answer is FORBIDDEN naming the bizType, and
// nothing is taken. A client without a scope may use every bizType.
func TestClientScopes(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := limits.Parse([]byte("limits:\n  REFUND:ALIPAY: 5\n  ONLINE_PAY:ALIPAY: 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(parsed.Config)
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l), Scopes: map[string][]string{"refunds": {"REFUND"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pay := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}, RequestID: "R1"}); err != nil {
		t.Fatalf("refunds acquiring REFUND: %v", err)
	}
	_, err = svc.Acquire(ctx, "refunds", AcquireRequest{Key: pay, RequestID: "R2"})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.Forbidden || !strings.Contains(e.Message, "ONLINE_PAY") {
		t.Fatalf("refunds acquiring ONLINE_PAY: got %v, want FORBIDDEN naming ONLINE_PAY", err)
	}
	if err := svc.Release(ctx, "refunds", ReleaseRequest{Key: pay, RequestID: "R2"}); apperr.CodeOf(err) != apperr.Forbidden {
		t.Fatalf("refunds releasing on ONLINE_PAY: got %v, want FORBIDDEN", err)
	}
	if _, counts, err := l.Usage(ctx, pay); err != nil || counts[0] != 0 {
		t.Fatalf("ONLINE_PAY:ALIPAY holds %v (%v), want 0", counts, err)
	}
	if _, err := svc.Acquire(ctx, "jobs", AcquireRequest{Key: pay, RequestID: "J1"}); err != nil {
		t.Fatalf("unscoped jobs acquiring ONLINE_PAY: %v", err)
	}
}
