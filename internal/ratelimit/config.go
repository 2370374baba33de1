package ratelimit

import "time"

// Config is an immutable, validated snapshot of the limits document. Requests
// read it without locks; a new document produces a new Config that replaces
// the old one whole.
type Config struct {
	// DefaultWindow is the window of bare numbers in the document.
	DefaultWindow time.Duration
	// Zone is the default time zone of calendar windows (UTC if the document
	// names none).
	Zone *time.Location
	// Shadow puts every key in shadow mode.
	Shadow bool
	// Rules holds every key the document names, including unlimited ones.
	// A channel-wide key has BizType "*" (anyBizType).
	Rules map[Key]Rule
	// Schedules are the document's scheduled changes, sorted by key and
	// From; two schedules of one key never overlap.
	Schedules []Schedule
	// Version identifies the document the Config was read from: the hex
	// MD5 of its bytes (limits.Parse), the version the config center
	// shows and records for it. Empty for a Config made in code; the
	// Limiter then names it by a hash of its content (Decision.LimitsVersion).
	Version string
	// byKey is Schedules by key, in their order (IndexSchedules): a check
	// reads its key's schedules, not every schedule. Nil: RuleAt and
	// NextChange read Schedules.
	byKey map[Key][]Schedule
}

// IndexSchedules indexes Schedules by key, so that RuleAt and NextChange
// read only the key's own. Call it once Schedules is final and before c is
// shared (limits.Parse does); a Config whose Schedules change afterwards
// must be indexed again.
func (c *Config) IndexSchedules() {
	if len(c.Schedules) == 0 {
		c.byKey = nil
		return
	}
	idx := make(map[Key][]Schedule)
	for _, s := range c.Schedules {
		idx[s.Key] = append(idx[s.Key], s)
	}
	c.byKey = idx
}

// schedulesOf returns the schedules to look through for k: its own when
// indexed, else every schedule.
func (c *Config) schedulesOf(k Key) []Schedule {
	if c.byKey != nil {
		return c.byKey[k]
	}
	return c.Schedules
}

// RuleAt returns the rule for k in force at now: the base rule, unless a
// schedule replaces it. A key the document does not name is unlimited; so
// is a nil Config. The caller's clock says when: a Config reads none.
func (c *Config) RuleAt(k Key, now time.Time) Rule {
	if c == nil {
		return Rule{}
	}
	r := c.Rules[k]
	for _, s := range c.schedulesOf(k) {
		if s.Key == k && s.Active(now) {
			r = s.Rule
			break
		}
	}
	if c.Shadow {
		r.Shadow = true
	}
	return r
}

// NextChange returns the first schedule boundary of k after now, or the zero
// time when none is ahead: until then, RuleAt(k, ·) stays what it is at now.
func (c *Config) NextChange(k Key, now time.Time) time.Time {
	var next time.Time
	if c == nil {
		return next
	}
	for _, s := range c.schedulesOf(k) {
		if s.Key != k {
			continue
		}
		for _, t := range [2]time.Time{s.From, s.To} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}
