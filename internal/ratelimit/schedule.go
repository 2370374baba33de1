package ratelimit

import "time"

// Schedule replaces the rule of one key from From (inclusive) to To
// (exclusive).
type Schedule struct {
	Key      Key
	From, To time.Time
	Rule     Rule
}

// Active reports whether s applies at now.
func (s Schedule) Active(now time.Time) bool { return !now.Before(s.From) && now.Before(s.To) }

// The states of a schedule at some instant, as StateAt names them.
const (
	ScheduleActive   = "active"
	scheduleUpcoming = "upcoming"
	SchedulePast     = "past"
)

// StateAt says whether s is active at now, upcoming (it starts later) or
// past (it ended: the document may keep it, and it is ignored).
func (s Schedule) StateAt(now time.Time) string {
	switch {
	case s.Active(now):
		return ScheduleActive
	case now.Before(s.From):
		return scheduleUpcoming
	}
	return SchedulePast
}
