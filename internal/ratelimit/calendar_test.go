package ratelimit

import (
	"testing"
	"time"
)

// TestCalendarPeriods: period boundaries worked out by hand from the
// calendars, including the daylight-saving days of a zone that has them.
func TestCalendarPeriods(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	santiago, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name       string
		cal        Calendar
		now        string
		start, end string
		hours      float64
	}{
		{"Shanghai natural day", Calendar{Unit: CalendarDay, Zone: sh}, "2026-11-23T10:00:00Z",
			"2026-11-22T16:00:00Z", "2026-11-23T16:00:00Z", 24},
		{"Shanghai day from 23:00, before the cutoff", Calendar{Unit: CalendarDay, Zone: sh, Cutoff: 23 * time.Hour}, "2026-11-23T14:59:59Z",
			"2026-11-22T15:00:00Z", "2026-11-23T15:00:00Z", 24},
		{"Shanghai day from 23:00, at the cutoff", Calendar{Unit: CalendarDay, Zone: sh, Cutoff: 23 * time.Hour}, "2026-11-23T15:00:00Z",
			"2026-11-23T15:00:00Z", "2026-11-24T15:00:00Z", 24},
		{"New York spring-forward day has 23 hours", Calendar{Unit: CalendarDay, Zone: ny}, "2026-03-08T12:00:00Z",
			"2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 23},
		{"New York fall-back day has 25 hours", Calendar{Unit: CalendarDay, Zone: ny}, "2026-11-01T12:00:00Z",
			"2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", 25},
		{"month in Shanghai", Calendar{Unit: CalendarMonth, Zone: sh}, "2026-01-31T16:00:00Z",
			"2026-01-31T16:00:00Z", "2026-02-28T16:00:00Z", 28 * 24},
		{"month before its first instant", Calendar{Unit: CalendarMonth, Zone: sh}, "2026-01-31T15:59:59Z",
			"2025-12-31T16:00:00Z", "2026-01-31T16:00:00Z", 31 * 24},
		{"Santiago: DST starts at midnight, the day starts at 01:00", Calendar{Unit: CalendarDay, Zone: santiago}, "2024-09-08T12:00:00Z",
			"2024-09-08T04:00:00Z", "2024-09-09T03:00:00Z", 23},
		{"Santiago: the day before the gap ends where the next starts", Calendar{Unit: CalendarDay, Zone: santiago}, "2024-09-08T02:20:00Z",
			"2024-09-07T04:00:00Z", "2024-09-08T04:00:00Z", 24},
		{"New York: a 02:30 cutoff on the spring-forward day starts at 03:00 EDT", Calendar{Unit: CalendarDay, Zone: ny, Cutoff: 150 * time.Minute}, "2026-03-08T07:10:00Z",
			"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", 23.5},
		{"New York: a 01:30 cutoff on the fall-back day starts at its first 01:30", Calendar{Unit: CalendarDay, Zone: ny, Cutoff: 90 * time.Minute}, "2026-11-01T06:00:00Z",
			"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", 25},
		{"December rolls into January", Calendar{Unit: CalendarMonth, Zone: time.UTC}, "2026-12-15T00:00:00Z",
			"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", 31 * 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := tt.cal.Period(utc(tt.now))
			if !start.Equal(utc(tt.start)) || !end.Equal(utc(tt.end)) {
				t.Fatalf("Period(%s) = [%s, %s), want [%s, %s)", tt.now, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), tt.start, tt.end)
			}
			if h := end.Sub(start).Hours(); h != tt.hours {
				t.Fatalf("period lasts %vh, want %vh", h, tt.hours)
			}
			b := tt.cal.Periods(utc(tt.now))
			if !b[0].Before(b[1]) || !b[2].Before(b[3]) {
				t.Fatalf("Periods = %v: want four increasing boundaries", b)
			}
		})
	}
}
