package console

import (
	"context"
	"time"
)

// UnresolvedOrder is one UNKNOWN order the dashboard lists, with what the
// resolver does next.
type UnresolvedOrder struct {
	RequestID, Channel string
	// Since is when its outcome became unknown (its last update).
	Since time.Time
	// Next is when the resolver may try again (zero or past: now);
	// LeasedUntil, when ahead, says an instance is trying now.
	Next, LeasedUntil time.Time
	// Close is true when the next step is to close the payment (the
	// channel answered NOT_FOUND); otherwise it is a query.
	Close    bool
	Attempts int
}

// unresolvedListed is how many of the oldest UNKNOWN orders the dashboard
// lists.
const unresolvedListed = 20

// unresolvedLine is one listed order, for people.
type unresolvedLine struct {
	RequestID, Channel, Age, Step, When string
}

// unresolvedLines reads the oldest UNKNOWN orders and says, for each, its
// age and the resolver's next step and when; "" and nil when they cannot
// be read (the count says the rest).
func (d *dashboard) unresolvedLines(ctx context.Context, now time.Time) ([]unresolvedLine, string) {
	if d.r.opts.OldestUnresolved == nil {
		return nil, ""
	}
	list, err := d.r.opts.OldestUnresolved(ctx, unresolvedListed)
	if err != nil {
		d.r.log.Warn("dashboard: could not list the unresolved orders", "err", err)
		return nil, "The orders database did not answer; the oldest are not listed."
	}
	out := make([]unresolvedLine, 0, len(list))
	for _, u := range list {
		l := unresolvedLine{RequestID: u.RequestID, Channel: u.Channel, Age: max(now.Sub(u.Since), 0).Round(time.Second).String(),
			Step: "query the channel", When: "now"}
		if u.Close {
			l.Step = "close the payment"
		}
		switch {
		case u.LeasedUntil.After(now):
			l.When = "now (an instance is on it)"
		case u.Next.After(now):
			l.When = "in " + u.Next.Sub(now).Round(time.Second).String()
		}
		out = append(out, l)
	}
	return out, ""
}
