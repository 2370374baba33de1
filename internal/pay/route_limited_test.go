package pay

import (
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// TestRoutesRefusedExceedsCap: a candidate refused because the payment is
// above its amount cap has no wait (exceedsCap); the same refusal decided
// in process while Redis fails (its limit is this instance's share) has
// one, as a pinned 429 has.
func TestRoutesRefusedExceedsCap(t *testing.T) {
	refusal := func(src ratelimit.Source) []candidateRefusal {
		d := ratelimit.Decision{Rule: "amount/day", Amount: true, Limit: 100, RequestAmount: 500, RetryAfter: time.Second, Source: src, ExceedsCap: true}
		return []candidateRefusal{{skip: RouteSkip{Channel: "A", Reason: ReasonLimited}, d: d, wait: d.RetryAfter}}
	}
	for _, tc := range []struct {
		src     ratelimit.Source
		exceeds bool
	}{{ratelimit.SourceRedis, true}, {ratelimit.SourceLocal, false}} {
		e := RoutesRefusedError("B", refusal(tc.src))
		rule := e.Details["candidates"].([]map[string]any)[0]["rule"].(map[string]any)
		if got := rule["exceedsCap"] == true; got != tc.exceeds || (e.RetryAfter > 0) == tc.exceeds {
			t.Errorf("%s: exceedsCap %v, RetryAfter %v; want exceedsCap %v and a Retry-After exactly when not", tc.src, got, e.RetryAfter, tc.exceeds)
		}
	}
}
