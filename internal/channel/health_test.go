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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, _ := NewSimulator("A", tt.cfg)
			h := NewHealth([]string{"A"}, HealthOptions{Failures: 3, Cooldown: 100 * time.Millisecond})
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				_, _ = h.Call(ctx, sim, Request{RequestID: "r"})
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
