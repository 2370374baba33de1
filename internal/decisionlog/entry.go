// Package decisionlog records every limiter decision, release, give-back
// and throttle or reset of learned limits (Entry) in the database payserver
// uses, for `payserver what-if` to replay a proposed limits document over
// the traffic payserver saw (internal/whatif). It is analytics, not money: a Log takes entries on the
// request path into a bounded buffer, never waiting, and one worker (Run,
// owned by Main) writes them in batches at least every second; a full
// buffer drops entries and counts them.
package decisionlog

import (
	"context"
	"time"

	"payserver/internal/ratelimit"
)

// Kind says what an Entry records.
type Kind string

// Entry kinds.
const (
	KindDecision Kind = "decision" // a check (Limiter.Check)
	KindRelease  Kind = "release"  // a slot given back (Limiter.Release)
	KindGiveBack Kind = "giveback" // an amount given back (Limiter.ReleaseAmount)
	KindThrottle Kind = "throttle" // the store learned from a channel's throttle (Limiter.Throttled)
	KindReset    Kind = "reset"    // the store forgot a key's learned limits (Limiter.ResetLearned)
)

// Outcome is what a decision answered.
type Outcome string

// Decision outcomes.
const (
	Admitted    Outcome = "admitted"    // a new admission (a shadow admission too)
	Duplicate   Outcome = "duplicate"   // the member was already admitted
	Refused     Outcome = "refused"     // a window (or a merchant's use of one) was full, or the key closed
	Conflict    Outcome = "conflict"    // a window holds the member with another amount
	Unavailable Outcome = "unavailable" // the store could not decide (PolicyDeny), or its answer was lost
)

// Admits reports whether o let the request through.
func (o Outcome) Admits() bool { return o == Admitted || o == Duplicate }

// Entry is one row of the decision log.
type Entry struct {
	// ID orders entries recorded at one instant; set when read back.
	ID uint64
	// At is the instant, whole microseconds: Decision.DecidedAt (Redis TIME
	// for a Redis decision, the limiter's clock otherwise); a release's is
	// the limiter's clock.
	At   time.Time
	Kind Kind
	Key  ratelimit.Key
	// Member is the requestId (or the limits API's member).
	Member   string
	Merchant string
	// Amount is a decision's or a give-back's amount; for a throttle, the
	// channel's retry-after in µs.
	Amount   int64
	Currency string
	// Outcome and Source are a decision's; empty for the other kinds.
	Outcome Outcome
	Source  ratelimit.Source
	// Version is the limits version the decision, throttle or reset was
	// taken under (Decision.LimitsVersion); empty for a release.
	Version string
}

// Filter selects entries: those at or after From and before To, of the
// keys Keys names (every key when empty).
type Filter struct {
	From, To time.Time
	Keys     []ratelimit.Key
}

// Store keeps the decision log. repo.DecisionLog implements it.
type Store interface {
	// Insert writes entries in one statement (or a few).
	Insert(ctx context.Context, entries []Entry) error
	// Prune deletes at most limit entries older than before and says how
	// many it deleted.
	Prune(ctx context.Context, before time.Time, limit int) (int, error)
	// SaveDocument keeps a limits document by its version; a version kept
	// already is left as it is.
	SaveDocument(ctx context.Context, version string, content []byte, at time.Time) error
}

// outcomeOf maps a Decision to its Outcome.
func outcomeOf(d ratelimit.Decision) Outcome {
	switch {
	case d.Unknown:
		return Unavailable
	case d.Conflict:
		return Conflict
	case d.Allowed && d.Duplicate:
		return Duplicate
	case d.Allowed:
		return Admitted
	default:
		return Refused
	}
}
