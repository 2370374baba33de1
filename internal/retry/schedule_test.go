package retry

import (
	"context"
	"testing"
	"time"
)

func TestScheduleDoublesToMostAndResets(t *testing.T) {
	b := Schedule{First: 10 * time.Millisecond, Most: 50 * time.Millisecond}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Wait())
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	b.Reset()
	if w := b.Wait(); w != 10*time.Millisecond {
		t.Fatalf("after Reset: %v, want 10ms", w)
	}
}

func TestEveryCallsUnderItsDeadlineUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan time.Duration, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, 5*time.Millisecond, time.Hour, func(c context.Context) {
			d, ok := c.Deadline()
			if !ok {
				t.Error("a call with a timeout has no deadline")
			}
			select {
			case calls <- time.Until(d):
			default:
			}
		})
	}()
	for range 3 {
		if left := <-calls; left <= 0 || left > time.Hour {
			t.Fatalf("deadline %v away, want within the hour", left)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return once its context ended")
	}
}

func TestEveryWithoutTimeoutPassesItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan bool, 1)
	go Every(ctx, time.Millisecond, 0, func(c context.Context) {
		_, ok := c.Deadline()
		select {
		case got <- ok:
		default:
		}
		cancel()
	})
	if <-got {
		t.Fatal("a call without a timeout got a deadline")
	}
}
