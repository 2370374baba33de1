package pay

import (
	"time"

	"payserver/internal/apperr"
)

// RoutesRefusedError is the REQUEST_LIMITED answer of a routed payment that
// every candidate refused. details.candidates lists each candidate in order
// of preference with its reason and, when its limiter refused, its binding
// rule (name, limit or amount, used, windowMs, scope, exceedsCap, as
// LimitedError names them); retryAfterMs is the time until it may admit
// (until a breaker's cool-down ends for an unhealthy one), absent for a
// closed candidate, which has no reopening time, and for an amount above a
// cap, which no wait makes fit. RetryAfter (the
// Retry-After header) is the smallest wait among them; when every candidate
// is closed there is none, and details.closed is true, as for a closed key.
func RoutesRefusedError(bizType string, refused []candidateRefusal) *apperr.Error {
	e := apperr.New(apperr.RequestLimited, "every candidate channel of the route of %s refused the payment", bizType)
	cands := make([]map[string]any, len(refused))
	var least time.Duration
	anyExceeds := false
	for i, r := range refused {
		c := map[string]any{"channel": r.skip.Channel, "reason": r.skip.Reason}
		exceeds := false
		if r.skip.Reason != ReasonUnhealthy && r.d.Rule != "" {
			rule := map[string]any{"name": r.d.Rule, "used": r.d.Count}
			// In process (Redis failing), Limit is this instance's share: a
			// wait can help.
			exceeds = r.d.ExceedsCap && !r.d.Degraded()
			if r.d.Amount {
				rule["amount"] = r.d.Limit
			} else {
				rule["limit"] = r.d.Limit
			}
			if r.d.Window > 0 {
				rule["windowMs"] = r.d.Window.Milliseconds()
			}
			if r.d.Scope.IsChannelWide() {
				rule["scope"] = r.d.Scope.String()
			}
			if r.d.Merchant != "" {
				rule["scope"], rule["merchantId"] = "merchant", r.d.Merchant
			}
			if exceeds {
				rule["exceedsCap"] = true
				anyExceeds = true
			}
			c["rule"] = rule
		}
		if r.skip.Reason != ReasonClosed && !exceeds {
			// At least 1 ms, as the answer promises (a cool-down ending
			// now, a window with room by the time we answer).
			wait := max(r.wait, time.Millisecond)
			c["retryAfterMs"] = apperr.Ceil(wait, time.Millisecond)
			if least == 0 || wait < least {
				least = wait
			}
		}
		cands[i] = c
	}
	e.Details = map[string]any{"bizType": bizType, "candidates": cands}
	e.RetryAfter = least
	switch {
	case least > 0:
		e.Details["retryAfterMs"] = apperr.Ceil(least, time.Millisecond)
	case anyExceeds:
		e.Details["exceedsCap"] = true // closed, or above a cap: no wait helps
	default:
		e.Details["closed"] = true // every candidate is closed: no retry can succeed
	}
	return e
}
