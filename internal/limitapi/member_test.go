package limitapi

import (
	"context"
	"strings"
	"testing"

	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// TestCallerRequestIDsNeverShareAPaymentsSlot: a /v1/limits caller that
// uses the requestId of a POST /pay payment takes a slot of its own (two
// channel operations, two slots), and its release never frees the
// payment's slot, which payserver frees only when the channel was never
// called.
func TestCallerRequestIDsNeverShareAPaymentsSlot(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := limits.Parse([]byte("limits:\n  REFUND:ALIPAY: [{limit: 2, window: 1m}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	l.SetConfig(cfg)
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	ctx := context.Background()
	// POST /pay admits X (its member is the bare requestId).
	if d, err := l.Allow(ctx, key, "X"); err != nil || !d.Allowed {
		t.Fatalf("pay X: %+v, %v", d, err)
	}
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "X"})
	if err != nil || a.Decision.Duplicate || a.Decision.Count != 2 {
		t.Fatalf("acquire X: %+v, %v; want a slot of its own (count 2, not a duplicate)", a.Decision, err)
	}
	if err := svc.Release(ctx, "refunds", ReleaseRequest{Key: key, RequestID: "X"}); err != nil {
		t.Fatal(err)
	}
	_, counts, err := l.Usage(ctx, key)
	if err != nil || counts[0] != 1 {
		t.Fatalf("window after the caller's release holds %v (%v), want 1: the payment's slot", counts, err)
	}
}

// TestCallerAndPaymentNamespacesNeverMeet: a payment whose requestId looks
// like a caller's member ("api:X1") and a caller's requestId "X1" are two
// operations. With the window full after the payments api:X1 and P2, the
// caller's X1 is refused (not a duplicate of the payment), and the reverse:
// no payment requestId is ever the member of an acquisition.
func TestCallerAndPaymentNamespacesNeverMeet(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := limits.Parse([]byte("limits:\n  ONLINE_PAY:ALIPAY: [{limit: 2, window: 1m}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	l.SetConfig(cfg)
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	ctx := context.Background()
	for _, id := range []string{"api:X1", "P2"} {
		if d, err := l.Allow(ctx, key, id); err != nil || !d.Allowed {
			t.Fatalf("pay %s: %+v, %v", id, d, err)
		}
	}
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "X1"})
	if err == nil {
		t.Fatalf("acquire X1 with the window full: admitted %+v; want 429 (the payment api:X1 is not its slot)", a.Decision)
	}
	if !strings.HasPrefix(MemberPrefix, "#") || pay.ValidRequestID(MemberPrefix+"X1") {
		t.Fatalf("MemberPrefix %q: a payment's requestId could equal an acquisition's member", MemberPrefix)
	}
}

// TestClientsKeepTheirRequestIDsApart: a caller's requestIds are its own.
// Another client's release of a requestId it never acquired frees nothing,
// and the same requestId acquired by two clients is two slots.
func TestClientsKeepTheirRequestIDsApart(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := limits.Parse([]byte("limits:\n  REFUND:ALIPAY: [{limit: 5, window: 1m}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(parsed.Config)
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	ctx := context.Background()
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "R1"}); err != nil {
		t.Fatal(err)
	}
	_ = svc.Release(ctx, "payouts", ReleaseRequest{Key: key, RequestID: "R1"})
	if _, counts, err := l.Usage(ctx, key); err != nil || counts[0] != 1 {
		t.Fatalf("after payouts released refunds' R1 the window holds %v (%v), want 1: refunds' slot kept", counts, err)
	}
	a, err := svc.Acquire(ctx, "payouts", AcquireRequest{Key: key, RequestID: "R1"})
	if err != nil || a.Decision.Duplicate || a.Decision.Count != 2 {
		t.Fatalf("payouts acquiring R1: %+v, %v; want a slot of its own (count 2, not a duplicate)", a.Decision, err)
	}
}
