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

// notLoadedLimiter is an in-process limiter that answers
// pay.LimitsNotLoaded(source) until its first limits document, as
// payserver wires it.
func notLoadedLimiter(t *testing.T, source string) *ratelimit.Limiter {
	t.Helper()
	lim, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{DisableNearCache: true,
		NotLoaded: func() error { return pay.LimitsNotLoaded(source) }})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestLimitsNotLoaded: before the first limits document no payment reaches
// the limiter's windows or the channel; the answer is
// DEPENDENCY_UNAVAILABLE naming the limits source. After the load,
// payments flow.
func TestLimitsNotLoaded(t *testing.T) {
	store := paytest.NewMemStore()
	lim := notLoadedLimiter(t, "nacos")
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, err := channel.NewRegistry(sim)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := pay.NewService(store, lim, reg, pay.Options{})
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
	setDoc(t, lim, "limits:\n  B:ALIPAY: 5\n")
	if _, err := svc.Pay(context.Background(), req("r2")); err != nil {
		t.Fatalf("after the load: %v", err)
	}
}

// TestLimitsNotLoadedPeek: before the first limits document a peek is not
// "allowed" (every key would look unlimited): it answers as a check does.
func TestLimitsNotLoadedPeek(t *testing.T) {
	lim := notLoadedLimiter(t, "file")
	r := ratelimit.Request{Key: ratelimit.Key{BizType: "B", Channel: "ALIPAY"}}
	if d, err := lim.Peek(context.Background(), r); apperr.CodeOf(err) != apperr.DependencyUnavailable || d.Allowed {
		t.Fatalf("peek before the load: allowed %v, %v; want DEPENDENCY_UNAVAILABLE", d.Allowed, err)
	}
	setDoc(t, lim, "limits:\n  B:ALIPAY: 5\n")
	if d, err := lim.Peek(context.Background(), r); err != nil || !d.Allowed {
		t.Fatalf("peek after the load: allowed %v, %v", d.Allowed, err)
	}
}
