package pay

import (
	"fmt"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// LimitedError is the one REQUEST_LIMITED error, for POST /pay and for
// /v1/limits/acquire alike: the binding window in Details and the time
// until it has room in RetryAfter (the Retry-After header).
//
// A closed key (limit 0) has no time after which a retry succeeds: its
// answer has no Retry-After and no retryAfterMs, and says details.closed,
// so that clients do not poll it.
func LimitedError(key ratelimit.Key, d ratelimit.Decision) *apperr.Error {
	e := apperr.New(apperr.RequestLimited, "channel %s is at its limit for %s", key.Channel, key.BizType)
	e.Details = map[string]any{
		"bizType":  key.BizType,
		"channel":  key.Channel,
		"limit":    d.Limit,
		"windowMs": d.Window.Milliseconds(),
	}
	if d.Closed() {
		e.Message = fmt.Sprintf("channel %s is closed for %s", key.Channel, key.BizType)
		e.Details["closed"] = true
		return e
	}
	e.RetryAfter = d.RetryAfter
	e.Details["retryAfterMs"] = apperr.Ceil(d.RetryAfter, time.Millisecond)
	return e
}
