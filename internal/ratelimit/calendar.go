package ratelimit

import "time"

// periodStart returns when the calendar period with offset n from label
// (year, month, day) starts: the day (CalendarDay) n days after that date,
// or the month (CalendarMonth) n months after that month, at the cutoff in
// the calendar's zone. time.Date normalizes the overflowing day or month.
func (c Calendar) periodStart(year int, month time.Month, day, n int) time.Time {
	h, m := int(c.Cutoff/time.Hour), int(c.Cutoff%time.Hour/time.Minute)
	if c.Unit == CalendarMonth {
		return time.Date(year, month+time.Month(n), 1, h, m, 0, 0, c.Zone)
	}
	return time.Date(year, month, day+n, h, m, 0, 0, c.Zone)
}

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
