package apperr

import (
	"testing"
	"time"
)

func TestCeil(t *testing.T) {
	tests := []struct {
		d, unit time.Duration
		want    int64
	}{
		{0, time.Second, 0},
		{-time.Second, time.Second, 0},
		{time.Nanosecond, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{1001 * time.Microsecond, time.Millisecond, 2},
		{420 * time.Millisecond, time.Second, 1},
		{time.Second, time.Second, 1},
		{1500 * time.Millisecond, time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.d.String()+"/"+tt.unit.String(), func(t *testing.T) {
			if got := Ceil(tt.d, tt.unit); got != tt.want {
				t.Errorf("Ceil(%v, %v) = %d, want %d", tt.d, tt.unit, got, tt.want)
			}
		})
	}
}
