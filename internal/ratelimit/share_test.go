package ratelimit

import (
	"testing"
	"time"
)

func TestSetLocalShare(t *testing.T) {
	l, err := New(NewLocalStore(nil), Options{LocalShare: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.LocalShare(); got != 0.5 {
		t.Fatalf("LocalShare() = %v, want 0.5", got)
	}
	for _, bad := range []float64{0, -0.1, 1.5} {
		if err := l.SetLocalShare(bad); err == nil {
			t.Errorf("SetLocalShare(%v) = nil, want an error", bad)
		}
	}
	if err := l.SetLocalShare(1.0 / 3); err != nil {
		t.Fatal(err)
	}
	if got := l.scaled(plan{windows: KeyWindows(Key{"A", "B"}, []Window{{Limit: 90, Size: time.Second}})})[0].Limit; got != 30 {
		t.Fatalf("scaled limit = %d, want 30", got)
	}
}
