package pay_test

import (
	"context"
	"errors"
	"testing"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

// TestLimitsGate: before the first limits document no payment reaches the
// limiter or the channel; the answer is DEPENDENCY_UNAVAILABLE naming the
// limits source. After the load, payments flow.
func TestLimitsGate(t *testing.T) {
	store := paytest.NewMemStore()
	_, lim, sim := newFlow(t, store, "limits:\n  B:ALIPAY: 5\n")
	loaded := make(chan struct{})
	gate, err := pay.NewLimitsGate(lim, loaded, "nacos")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := channel.NewRegistry(sim)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := pay.NewService(store, gate, reg, pay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Pay(context.Background(), req("r1"))
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.DependencyUnavailable || e.Details["dependency"] != "limits" || e.Details["source"] != "nacos" {
		t.Fatalf("before the load: err = %v (details %v); want DEPENDENCY_UNAVAILABLE with dependency limits, source nacos", err, e)
	}
	if sim.Calls() != 0 {
		t.Fatalf("the channel was called %d times before the load", sim.Calls())
	}
	close(loaded)
	if _, err := svc.Pay(context.Background(), req("r2")); err != nil {
		t.Fatalf("after the load: %v", err)
	}
}

// TestLimitsGatePeek: before the first limits document a peek is not
// "allowed" (every key would look unlimited): it answers as a check does.
func TestLimitsGatePeek(t *testing.T) {
	_, lim, _ := newFlow(t, paytest.NewMemStore(), "limits:\n  B:ALIPAY: 5\n")
	loaded := make(chan struct{})
	gate, err := pay.NewLimitsGate(lim, loaded, "file")
	if err != nil {
		t.Fatal(err)
	}
	r := ratelimit.Request{Key: ratelimit.Key{BizType: "B", Channel: "ALIPAY"}}
	if d, err := gate.Peek(context.Background(), r); apperr.CodeOf(err) != apperr.DependencyUnavailable || d.Allowed {
		t.Fatalf("peek before the load: allowed %v, %v; want DEPENDENCY_UNAVAILABLE", d.Allowed, err)
	}
	close(loaded)
	if d, err := gate.Peek(context.Background(), r); err != nil || !d.Allowed {
		t.Fatalf("peek after the load: allowed %v, %v", d.Allowed, err)
	}
}
