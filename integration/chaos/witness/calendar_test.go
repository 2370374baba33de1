package witness

import (
	"testing"
	"time"
)

func mustTime(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func mustZone(tb testing.TB, name string) *time.Location {
	tb.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// The cases docs/DESIGN.md and docs/OPERATIONS.md state: a period starts at
// the first instant at or after the cutoff on its date, at the transition
// where daylight saving skips the cutoff.
func TestPeriodOfDocumentedCases(t *testing.T) {
	tests := []struct {
		name     string
		zone     string
		calendar string
		cutoff   int
		at       string
		want     period
	}{
		{"Santiago: the last instant of 09-07", "America/Santiago", "day", 0, "2024-09-08T03:59:59.999999Z", 20240907},
		{"Santiago: 09-08 starts at the transition (local 01:00)", "America/Santiago", "day", 0, "2024-09-08T04:00:00Z", 20240908},
		{"Santiago: 09-08 lasts 23 hours", "America/Santiago", "day", 0, "2024-09-09T02:59:59.999999Z", 20240908},
		{"Santiago: 09-09 at local midnight -03", "America/Santiago", "day", 0, "2024-09-09T03:00:00Z", 20240909},
		{"New York 02:30: the 03-07 day runs to the transition", "America/New_York", "day", 150, "2026-03-08T06:59:59Z", 20260307},
		{"New York 02:30: 03-08 starts at the transition (local 03:00)", "America/New_York", "day", 150, "2026-03-08T07:00:00Z", 20260308},
		{"New York 02:30: 03-08 ends at 02:30 EDT on 03-09", "America/New_York", "day", 150, "2026-03-09T06:29:59Z", 20260308},
		{"New York 02:30: 03-09 starts at 02:30 EDT", "America/New_York", "day", 150, "2026-03-09T06:30:00Z", 20260309},
		{"New York 01:30: 11-01 starts at the first 01:30 (EDT)", "America/New_York", "day", 90, "2026-11-01T05:30:00Z", 20261101},
		{"New York 01:30: the repeated 01:10 (EST) stays in 11-01", "America/New_York", "day", 90, "2026-11-01T06:10:00Z", 20261101},
		{"Shanghai 23:00 cutoff: 22:59 is the day before", "Asia/Shanghai", "day", 23 * 60, "2026-11-21T14:59:00Z", 20261120},
		{"Shanghai 23:00 cutoff: 23:00 names its date", "Asia/Shanghai", "day", 23 * 60, "2026-11-21T15:00:00Z", 20261121},
		{"month: the 1st before midnight Shanghai is the month before", "Asia/Shanghai", "month", 0, "2026-11-30T15:59:59Z", 20261100},
		{"month: Shanghai's December starts at 16:00Z", "Asia/Shanghai", "month", 0, "2026-11-30T16:00:00Z", 20261200},
		{"month: a 02:30 cutoff keeps the 1st's early hours in the month before", "UTC", "month", 150, "2027-01-01T02:29:00Z", 20261200},
		{"month: across a year", "UTC", "month", 0, "2027-01-01T00:00:00Z", 20270100},
		{"day: a leap day's eve", "UTC", "day", 60, "2028-03-01T00:30:00Z", 20280229},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := periodOf(mustTime(t, tt.at).UnixMicro(), tt.calendar, tt.cutoff, mustZone(t, tt.zone))
			if got != tt.want {
				t.Errorf("periodOf(%s) = %d, want %d", tt.at, got, tt.want)
			}
		})
	}
}

// TestPeriodsTile walks zones with daylight saving and odd offsets minute
// by minute over two years: periods never go back, never skip a day, and
// each starts at an instant whose wall clock is at or past the cutoff on
// its date, or at a transition (the clock jumped over the cutoff).
func TestPeriodsTile(t *testing.T) {
	if testing.Short() {
		t.Skip("walks two years minute by minute")
	}
	zonesToWalk := []string{"America/Santiago", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham"}
	for _, name := range zonesToWalk {
		for _, cutoff := range []int{0, 90, 150, 23 * 60} {
			loc := mustZone(t, name)
			start := mustTime(t, "2024-01-01T00:00:00Z")
			prev := periodOf(start.UnixMicro(), "day", cutoff, loc)
			for m := 1; m < 2*366*24*60; m++ {
				at := start.Add(time.Duration(m) * time.Minute)
				p := periodOf(at.UnixMicro(), "day", cutoff, loc)
				if p == prev {
					continue
				}
				local := at.In(loc)
				y, mo, d := local.Date()
				py, pmo, pd := previousDay(y, mo, d)
				if cutoff > 0 && (local.Hour()*60+local.Minute() < cutoff) {
					y, mo, d = py, pmo, pd
				}
				if want := period(y*10000 + int(mo)*100 + d); p != want {
					t.Fatalf("%s cutoff %d: the period starting at %s is %d, want %d", name, cutoff, local, p, want)
				}
				ny, nmo, nd := nextDayForTest(prev)
				if p != period(ny*10000+int(nmo)*100+nd) {
					t.Fatalf("%s cutoff %d: at %s the period went from %d to %d", name, cutoff, local, prev, p)
				}
				before := at.Add(-time.Minute).In(loc)
				_, offBefore := before.Zone()
				_, offAt := local.Zone()
				if clock := local.Hour()*60 + local.Minute(); clock != cutoff && offBefore == offAt {
					t.Fatalf("%s cutoff %d: period %d starts at %s, neither the cutoff nor a transition", name, cutoff, p, local)
				}
				prev = p
			}
		}
	}
}

func nextDayForTest(p period) (int, time.Month, int) {
	y, m, d := int(p)/10000, time.Month(int(p)/100%100), int(p)%100
	if d < daysIn(y, m) {
		return y, m, d + 1
	}
	if m == time.December {
		return y + 1, time.January, 1
	}
	return y, m + 1, 1
}
