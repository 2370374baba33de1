package pay

import (
	"time"

	"payserver/internal/apperr"
)

// RoutesRefusedError is the REQUEST_LIMITED answer of a routed payment that
// every candidate refused. details.candidates lists each candidate in order
// of preference with its reason and, when its limiter refused, its binding
// rule ({limit, windowMs}); retryAfterMs is the time until it may admit
// (until a breaker's cool-down ends for an unhealthy one), absent for a
// closed candidate, which has no reopening time. RetryAfter (the
// Retry-After header) is the smallest wait among them; when every candidate
// is closed there is none, and details.closed is true, as for a closed key.
func RoutesRefusedError(bizType string, refused []candidateRefusal) *apperr.Error {
	e := apperr.New(apperr.RequestLimited, "every candidate channel of the route of %s refused the payment", bizType)
	cands := make([]map[string]any, len(refused))
	var least time.Duration
	for i, r := range refused {
		c := map[string]any{"channel": r.skip.Channel, "reason": r.skip.Reason}
		if r.d.Window > 0 {
			c["rule"] = map[string]any{"limit": r.d.Limit, "windowMs": r.d.Window.Milliseconds()}
		}
		if r.skip.Reason != ReasonClosed {
			c["retryAfterMs"] = apperr.Ceil(r.wait, time.Millisecond)
			if least == 0 || r.wait < least {
				least = max(r.wait, time.Millisecond)
			}
		}
		cands[i] = c
	}
	e.Details = map[string]any{"bizType": bizType, "candidates": cands}
	e.RetryAfter = least
	if least > 0 {
		e.Details["retryAfterMs"] = apperr.Ceil(least, time.Millisecond)
	} else {
		e.Details["closed"] = true // every candidate is closed: no retry can succeed
	}
	return e
}
