package channel

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestHealthCountsFailuresNotDeclines: declines keep a channel healthy;
// system errors, timeouts and refused connections open its breaker after
// Failures in a row; an open breaker refuses calls with ErrNotSent without
// calling the channel, and lets a probe through after the cool-down.
func TestHealthCountsFailuresNotDeclines(t *testing.T) {
	tests := []struct {
		name string
		cfg  SimulatorConfig
		open bool
	}{
		{"declines", SimulatorConfig{DeclineRate: 1}, false},
		{"successes", SimulatorConfig{}, false},
		{"system errors", SimulatorConfig{ErrorRate: 1}, true},
		{"timeouts", SimulatorConfig{TimeoutRate: 1}, true},
		{"refused connections", SimulatorConfig{RefuseRate: 1}, true},
		{"throttles", SimulatorConfig{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, _ := NewSimulator("A", tt.cfg)
			h := NewHealth([]string{"A"}, HealthOptions{Failures: 3, Cooldown: 100 * time.Millisecond})
			var ch Channel = sim
			if tt.name == "throttles" {
				ch = throttling{sim}
			}
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				_, _ = h.Call(ctx, ch, Request{RequestID: "r"})
				cancel()
			}
			if got := h.Unhealthy("A"); got != tt.open {
				t.Fatalf("Unhealthy = %v, want %v", got, tt.open)
			}
			if !tt.open {
				return
			}
			if ra := h.RetryAfter("A"); ra <= 0 || ra > 100*time.Millisecond {
				t.Fatalf("RetryAfter = %v, want within the cool-down", ra)
			}
			calls := sim.Calls()
			if _, err := h.Call(context.Background(), sim, Request{RequestID: "r"}); !errors.Is(err, ErrNotSent) || sim.Calls() != calls {
				t.Fatalf("open breaker: err %v, calls %d -> %d; want ErrNotSent and no call", err, calls, sim.Calls())
			}
			time.Sleep(120 * time.Millisecond)
			if h.Unhealthy("A") {
				t.Fatal("still unhealthy after the cool-down: no probe would go through")
			}
			if h.States()["A"] != "half-open" {
				t.Fatalf("state %q, want half-open", h.States()["A"])
			}
		})
	}
}

// throttling is a channel that is too busy for every call.
type throttling struct{ *Simulator }

func (t throttling) Pay(context.Context, Request) (Result, error) {
	return Result{}, &ThrottledError{Channel: t.Code(), RetryAfter: time.Second}
}

// blockingChannel answers each call once release is closed.
type blockingChannel struct{ release chan struct{} }

func (blockingChannel) Code() string { return "A" }

func (b blockingChannel) Pay(ctx context.Context, _ Request) (Result, error) {
	select {
	case <-b.release:
		return Result{}, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// TestHalfOpenWithItsProbeInFlightIsUnhealthy: after the cool-down the
// breaker lets one probe through; while it is in flight the channel is
// unhealthy (a routed payment would only take a slot and a claim for a
// call the breaker refuses), and once it succeeded the channel is healthy.
func TestHalfOpenWithItsProbeInFlightIsUnhealthy(t *testing.T) {
	failing, _ := NewSimulator("A", SimulatorConfig{ErrorRate: 1})
	h := NewHealth([]string{"A"}, HealthOptions{Failures: 1, Cooldown: 50 * time.Millisecond, Probes: 1})
	_, _ = h.Call(context.Background(), failing, Request{RequestID: "r"})
	time.Sleep(70 * time.Millisecond)
	if h.Unhealthy("A") {
		t.Fatal("unhealthy after the cool-down with no probe in flight")
	}
	probe := blockingChannel{release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := h.Call(context.Background(), probe, Request{RequestID: "probe"})
		done <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for !h.Unhealthy("A") {
		if time.Now().After(deadline) {
			t.Fatal("healthy while the half-open breaker's only probe is in flight")
		}
		time.Sleep(time.Millisecond)
	}
	if ra := h.RetryAfter("A"); ra <= 0 {
		t.Errorf("RetryAfter = %v while the probe is in flight, want > 0", ra)
	}
	close(probe.release)
	if err := <-done; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if h.Unhealthy("A") || h.States()["A"] != "closed" {
		t.Fatalf("after a successful probe: unhealthy %v, state %q; want healthy and closed", h.Unhealthy("A"), h.States()["A"])
	}
}

// panicking is a channel whose every call panics.
type panicking struct{}

func (panicking) Code() string { return "A" }

func (panicking) Pay(context.Context, Request) (Result, error) { panic("adapter bug") }

// TestPanickingProbeIsAFailure: a half-open breaker's probe whose call
// panics counts as a failure, so the breaker opens again and probes after
// the next cool-down; the probe is never kept in flight for ever.
func TestPanickingProbeIsAFailure(t *testing.T) {
	now := time.Unix(0, 0)
	h := NewHealth([]string{"A"}, HealthOptions{Failures: 1, Cooldown: time.Second, Now: func() time.Time { return now }})
	failing, _ := NewSimulator("A", SimulatorConfig{ErrorRate: 1})
	_, _ = h.Call(context.Background(), failing, Request{RequestID: "r"})
	now = now.Add(time.Second)
	func() {
		defer func() { _ = recover() }()
		_, _ = h.Call(context.Background(), panicking{}, Request{RequestID: "probe"})
	}()
	if h.States()["A"] != "open" {
		t.Fatalf("after a panicking probe: state %q, want open again", h.States()["A"])
	}
	now = now.Add(time.Second)
	ok, _ := NewSimulator("A", SimulatorConfig{})
	if _, err := h.Call(context.Background(), ok, Request{RequestID: "next"}); err != nil || h.Unhealthy("A") {
		t.Fatalf("the next probe after the cool-down: %v, unhealthy %v; want it sent and the breaker closed", err, h.Unhealthy("A"))
	}
}
