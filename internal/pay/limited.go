package pay

import (
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// LimitedError is the one REQUEST_LIMITED error, for POST /pay and for
// /v1/limits/acquire alike: the binding window in Details and the time
// until it has room in RetryAfter (the Retry-After header).
//
// A closed key (limit 0) has no reopening time (RetryAfter 0), but the
// answer always carries Retry-After: the client is told to come back after
// one window, at least a second.
func LimitedError(key ratelimit.Key, d ratelimit.Decision) *apperr.Error {
	e := apperr.New(apperr.RequestLimited, "channel %s is at its limit for %s", key.Channel, key.BizType)
	e.RetryAfter = d.RetryAfter
	if e.RetryAfter <= 0 {
		e.RetryAfter = max(d.Window, time.Second)
	}
	e.Details = map[string]any{
		"bizType":      key.BizType,
		"channel":      key.Channel,
		"limit":        d.Limit,
		"windowMs":     d.Window.Milliseconds(),
		"retryAfterMs": ceilMillis(e.RetryAfter),
	}
	return e
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
