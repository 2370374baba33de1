package limitapi

import (
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// Ledger keeps the member of every acquire whose limiter answer was lost
// until its fate is known, on disk across restarts, with the slots of
// POST /pay whose fate is not known yet. *pay.Ledger implements it.
type Ledger interface {
	// Admitting returns nil while the ledger can take what a new acquire
	// may leave, else DEPENDENCY_UNAVAILABLE (dependency "ledger"): it is
	// full or cannot write to disk. It is asked before a slot is taken.
	Admitting() error
	// KeepLostAcquire keeps h, to be released once grace has passed
	// unless AcquiredAgain names it first. It never drops h, and has
	// written it to disk when it returns.
	KeepLostAcquire(h ratelimit.Hold, grace time.Duration)
	// AcquiredAgain forgets the lost acquire of member on key, if one is
	// kept: its slot is the retry's (or its client released it).
	AcquiredAgain(key ratelimit.Key, member string)
}

// LostAnswerGrace is how long the member of an acquire whose limiter
// answer was lost waits for its client's retry with the same requestId
// before it is released: the lost call may have recorded it, and a client
// answered 503 that never retries would leave the slot held until its
// window passes (midnight, for a calendar day).
const LostAnswerGrace = 60 * time.Second

// LostAnswer is Decide's answer to a check whose limiter answer was lost
// (d.Unknown): the decision, and a DEPENDENCY_UNAVAILABLE error with
// details.dependency "limiter" and details.outcome "unknown", never a
// refusal: the member may hold a slot after all. A retry with the same
// requestId is admitted as the same slot, or refused.
func LostAnswer(r AcquireRequest, d ratelimit.Decision) (Acquired, error) {
	e := apperr.New(apperr.DependencyUnavailable,
		"the limiter's answer was lost; the slot may be held: retry with the same requestId, which is never counted twice").
		WithDetails(map[string]any{"dependency": "limiter", "outcome": "unknown"})
	e.RetryAfter = max(d.RetryAfter, time.Second)
	return Acquired{Decision: d, Windows: []WindowUsage{}}, e
}

// ReleaseLater hands h, the member of client's acquire whose limiter
// answer was lost, to the ledger: it is released once LostAnswerGrace has
// passed unless the same requestId is admitted (or released) again
// meanwhile. It is on disk when ReleaseLater returns.
func (s *Service) ReleaseLater(client string, h ratelimit.Hold) {
	s.opts.Ledger.KeepLostAcquire(h, LostAnswerGrace)
}
