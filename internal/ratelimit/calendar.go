package ratelimit

import (
	"fmt"
	"time"
	_ "time/tzdata" // calendar zones resolve the same on every host, with or without a system zoneinfo
)

// Calendar is a window that resets at calendar boundaries: each day or
// month in Zone, starting at Cutoff past local midnight (of the 1st, for a
// month). A daylight-saving day lasts 23 or 25 hours.
type Calendar struct {
	// Unit is CalendarDay, CalendarMonth, or empty for a sliding window.
	Unit CalendarUnit
	// Zone is the IANA time zone the periods are counted in.
	Zone *time.Location
	// Cutoff is when a period starts, past local midnight: 0 ≤ Cutoff < 24h,
	// whole minutes.
	Cutoff time.Duration
}

// CalendarUnit is the length of a calendar period.
type CalendarUnit string

// The calendar units.
const (
	CalendarDay   CalendarUnit = "day"
	CalendarMonth CalendarUnit = "month"
)

// periodStart returns when the calendar period with offset n from label
// (year, month, day) starts: the day (CalendarDay) n days after that date,
// or the month (CalendarMonth) n months after that month, at the cutoff in
// the calendar's zone. A period starts at the first instant whose local
// wall-clock time is at or after the cutoff on its date (wallClockStart).
func (c Calendar) periodStart(year int, month time.Month, day, n int) time.Time {
	h, m := int(c.Cutoff/time.Hour), int(c.Cutoff%time.Hour/time.Minute)
	if c.Unit == CalendarMonth {
		return wallClockStart(time.Date(year, month+time.Month(n), 1, h, m, 0, 0, time.UTC), c.Zone)
	}
	return wallClockStart(time.Date(year, month, day+n, h, m, 0, 0, time.UTC), c.Zone)
}

// maxOffsetShift bounds how far a zone's UTC offset moves at one
// transition (the tz database's largest is under 2 hours; 24 hours covers
// a date-line change).
const maxOffsetShift = 25 * time.Hour

// wallClockStart returns the first instant whose wall-clock time in zone is
// at or after wall (a civil date and time, written in UTC). Where that time
// exists once, it is that instant; where a fall-back makes it exist twice,
// the earlier; where a spring-forward skips it, the instant of the
// transition, the first whose wall clock is past it. time.Date alone gets
// the last case wrong: it answers the hour before the gap, on the previous
// date when the gap starts at midnight.
func wallClockStart(wall time.Time, zone *time.Location) time.Time {
	t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), 0, 0, zone)
	if start, _ := t.ZoneBounds(); sameWall(t, wall) && (start.IsZero() || t.Sub(start) >= maxOffsetShift) {
		return t
	}
	// Near a transition: try each offset in force within a day of wall and
	// keep the earliest instant that reads wall; else the transition that
	// jumps over it.
	var best time.Time
	x := time.Unix(wall.Unix()-int64(2*maxOffsetShift/time.Second), 0).In(zone)
	limit := wall.Add(2 * maxOffsetShift)
	for {
		segStart, segEnd := x.ZoneBounds()
		_, off := x.Zone()
		cand := time.Unix(wall.Unix()-int64(off), 0).In(zone)
		if !cand.Before(segStart) && (segEnd.IsZero() || cand.Before(segEnd)) && (best.IsZero() || cand.Before(best)) {
			best = cand
		}
		if segEnd.IsZero() || segEnd.After(limit) {
			break
		}
		if best.IsZero() && localAsUTC(segEnd).After(wall) {
			// wall falls in the gap this transition opens.
			return segEnd.In(zone)
		}
		x = segEnd.In(zone)
	}
	if best.IsZero() {
		return t
	}
	return best
}

// localAsUTC is t's wall clock in its zone, written in UTC.
func localAsUTC(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

func sameWall(t, wall time.Time) bool { return localAsUTC(t).Equal(wall) }

// Periods returns four consecutive period boundaries around now: the start
// of the period before the current one, the current period's start and end,
// and the end of the period after it. The current period is
// [b[1], b[2]); a daylight-saving day lasts 23 or 25 hours, as the zone's
// clock says.
func (c Calendar) Periods(now time.Time) [4]time.Time {
	t := now.In(c.Zone)
	y, mo, d := t.Date()
	if c.Unit == CalendarMonth {
		d = 1
	}
	off := 0
	if c.periodStart(y, mo, d, 0).After(now) {
		off = -1
	}
	var b [4]time.Time
	for i := range b {
		b[i] = c.periodStart(y, mo, d, off+i-1)
	}
	return b
}

// Period returns the calendar period that holds now: [start, end).
func (c Calendar) Period(now time.Time) (start, end time.Time) {
	b := c.Periods(now)
	return b[1], b[2]
}

// FormatCutoff renders a calendar cutoff as the document writes it, "HH:MM".
func FormatCutoff(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
