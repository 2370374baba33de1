package ratelimit

import (
	"time"
)

// Unlimited is the limit value that means "no limit": in the limits document,
// -1 (or a key that is not there at all) maps to it. An unlimited key is never
// checked against Redis.
const Unlimited int64 = -1

// Window is one sliding window: at most Limit admissions in any interval of
// length Size. A Limit of 0 refuses everything.
type Window struct {
	Limit int64
	Size  time.Duration
}

// Rule is the effective limit of one key: every window is enforced together,
// and a request is admitted only if each has room. The zero Rule is
// unlimited.
type Rule struct {
	// Windows are sorted by Size, shortest first, with distinct sizes. Empty
	// means unlimited.
	Windows []Window
	// Shadow makes the limiter evaluate and count the rule but always admit.
	Shadow bool
}

// IsUnlimited reports whether the rule limits nothing.
func (r Rule) IsUnlimited() bool { return len(r.Windows) == 0 }

// IsClosed reports whether some window has limit 0, so that every request is
// refused without asking Redis.
func (r Rule) IsClosed() bool {
	for _, w := range r.Windows {
		if w.Limit == 0 {
			return true
		}
	}
	return false
}

// Longest returns the longest window size, or 0 for an unlimited rule.
func (r Rule) Longest() time.Duration {
	if len(r.Windows) == 0 {
		return 0
	}
	return r.Windows[len(r.Windows)-1].Size
}

// Config is an immutable, validated snapshot of the limits document. Requests
// read it without locks; a new document produces a new Config that replaces
// the old one whole.
type Config struct {
	// DefaultWindow is the window of bare numbers in the document.
	DefaultWindow time.Duration
	// Shadow puts every key in shadow mode.
	Shadow bool
	// Rules holds every key the document names, including unlimited ones.
	Rules map[Key]Rule
}

// Rule returns the rule for k. A key the document does not name is
// unlimited; so is a nil Config.
func (c *Config) Rule(k Key) Rule {
	if c == nil {
		return Rule{}
	}
	r := c.Rules[k]
	if c.Shadow {
		r.Shadow = true
	}
	return r
}
