package ratelog

import (
	"testing"
	"time"
)

func TestLimiterCountsSuppressed(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	l := New(time.Hour, 2)
	l.now = func() time.Time { return at }
	tests := []struct {
		name           string
		wantOK         bool
		wantSuppressed int64
	}{
		{"first of the burst", true, 0},
		{"second of the burst", true, 0},
		{"over the burst", false, 0},
		{"still over", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, n := l.Allow()
			if ok != tt.wantOK || n != tt.wantSuppressed {
				t.Errorf("Allow() = %v, %d; want %v, %d", ok, n, tt.wantOK, tt.wantSuppressed)
			}
		})
	}
	at = at.Add(time.Hour) // one more token: the next line reports the two dropped
	if ok, n := l.Allow(); !ok || n != 2 {
		t.Errorf("after refill Allow() = %v, %d; want true, 2", ok, n)
	}
}
