package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestLocalStoreKeepsACalendarPeriodOnARealClock: on the wall clock, with
// nanoseconds, the in-process store's calendar window keeps its period:
// before, the period's start was found a microsecond off now and then, and
// the window started afresh, admitting a day's cap again.
func TestLocalStoreKeepsACalendarPeriodOnARealClock(t *testing.T) {
	s := NewLocalStore(nil)
	w := []KeyWindow{{Key: Key{BizType: "B", Channel: "C"}, Window: Window{Limit: 1000, Calendar: Calendar{Unit: CalendarDay, Zone: time.UTC}}}}
	for i := range 500 {
		res, err := s.Check(context.Background(), w, fmt.Sprintf("m%d", i), 0)
		if err != nil || !res.Allowed || res.Counts[0] != int64(i+1) {
			t.Fatalf("check %d: %+v, %v; want the day's count %d", i, res, err, i+1)
		}
	}
}
