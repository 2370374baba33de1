package emulator

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		ms        int
		admitted  bool
		retryWait time.Duration
	}
	for _, tc := range []struct {
		name     string
		capacity int
		steps    []step
	}{
		{"unlimited", Unlimited, []step{{0, true, 0}, {0, true, 0}, {0, true, 0}}},
		{"capacity 2", 2, []step{
			{0, true, 0}, {100, true, 0},
			{200, false, 800 * time.Millisecond}, // until the call at 0 leaves
			{999, false, time.Millisecond},
			{1000, true, 0}, // the call at 0 left: (0, 1000] holds 100
			{1050, false, 50 * time.Millisecond},
			{1100, true, 0},
		}},
		{"refused calls do not count", 1, []step{
			{0, true, 0}, {500, false, 500 * time.Millisecond}, {900, false, 100 * time.Millisecond},
			{1000, true, 0}, {1999, false, time.Millisecond}, {2000, true, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w window
			for _, s := range tc.steps {
				ok, wait := w.admit(at(s.ms), tc.capacity, time.Second)
				if ok != s.admitted || wait != s.retryWait {
					t.Errorf("at %d ms: got admitted %v wait %v, want %v %v", s.ms, ok, wait, s.admitted, s.retryWait)
				}
			}
		})
	}
}

func TestWindowForget(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var w window
	w.admit(t0, 1, time.Second)
	if ok, _ := w.admit(t0.Add(time.Millisecond), 1, time.Second); ok {
		t.Fatal("a full window admitted")
	}
	w.forget(t0)
	if ok, _ := w.admit(t0.Add(time.Millisecond), 1, time.Second); !ok {
		t.Error("a forgotten slot was not given back")
	}
}
