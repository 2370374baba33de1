package witness

import (
	"sync"
	"time"
)

// period names a calendar period: yyyymmdd for a day, yyyymm00 for a
// month. Periods compare as integers in time order.
type period int64

// periodOf is the calendar period holding the instant tUs (µs), worked out
// from the zone's wall clock alone (t.In(loc) and its Date and Clock), never
// by building a boundary with time.Date.
//
// The rule (docs/DESIGN.md, "The rules"): a period starts at the first
// instant whose local wall-clock time is at or after the cutoff on its date;
// where daylight saving skips the cutoff, at the transition. So the period
// of t is the latest date D (or month) such that some instant up to t had a
// local wall-clock time at or after (D, cutoff). On a wall clock that only
// moves forward that is the label of t itself; where it moves back (the
// autumn's repeated hour), the label reached just before the transition may
// be the later one, so the label of the last instant of the previous zone
// period (time.Time.ZoneBounds) is taken too. Zone periods last months, so
// one step back is enough.
func periodOf(tUs int64, calendar string, cutoffMin int, loc *time.Location) period {
	t := time.UnixMicro(tUs).In(loc)
	p := rawPeriod(t, calendar, cutoffMin)
	if start, _ := t.ZoneBounds(); !start.IsZero() {
		if before := rawPeriod(start.Add(-time.Nanosecond).In(loc), calendar, cutoffMin); before > p {
			p = before
		}
	}
	return p
}

// rawPeriod is the period named by t's own wall clock: its date if the
// clock is at or after the cutoff, else the date before (for a month: its
// month unless it is the 1st before the cutoff).
func rawPeriod(t time.Time, calendar string, cutoffMin int) period {
	y, m, d := t.Date()
	hh, mm, _ := t.Clock()
	after := hh*60+mm >= cutoffMin
	if calendar == "month" {
		if d > 1 || after {
			return period(y*10000 + int(m)*100)
		}
		y, m = previousMonth(y, m)
		return period(y*10000 + int(m)*100)
	}
	if !after {
		y, m, d = previousDay(y, m, d)
	}
	return period(y*10000 + int(m)*100 + d)
}

func previousMonth(y int, m time.Month) (int, time.Month) {
	if m == time.January {
		return y - 1, time.December
	}
	return y, m - 1
}

func previousDay(y int, m time.Month, d int) (int, time.Month, int) {
	if d > 1 {
		return y, m, d - 1
	}
	y, m = previousMonth(y, m)
	return y, m, daysIn(y, m)
}

// daysIn is the proleptic Gregorian month length.
func daysIn(y int, m time.Month) int {
	switch m {
	case time.April, time.June, time.September, time.November:
		return 30
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	}
	return 31
}

var zones sync.Map // name → *time.Location

// zone returns the location of a name the document parser accepted.
func zone(name string) *time.Location {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		l = time.UTC // unreachable: documents are parsed first
	}
	zones.Store(name, l)
	return l
}

// periodFor is the period of tUs in a calendar window.
func periodFor(id WindowID, tUs int64) period {
	return periodOf(tUs, id.Calendar, id.CutoffMin, zone(id.Zone))
}

// CalendarPeriod names the period of a calendar window ("day" or "month",
// in the IANA zone, from cutoffMin minutes past local midnight) that holds
// t: yyyymmdd for a day, yyyymm00 for a month. It is the witness's own
// rule (periodOf), for checks of payserver's periods from outside (the
// chaos calendar run compares `payserver check-limits --at` with it).
func CalendarPeriod(calendar, zoneName string, cutoffMin int, t time.Time) (int64, error) {
	loc, err := time.LoadLocation(zoneName)
	if err != nil {
		return 0, err
	}
	return int64(periodOf(t.UnixMicro(), calendar, cutoffMin, loc)), nil
}
