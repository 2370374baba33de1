package apperr

import "time"

// Ceil returns d in whole units, rounded up: the one rounding of waits
// shown to clients (details.retryAfterMs in milliseconds, the Retry-After
// header in seconds), so both round the same way. Ceil of a zero or
// negative d is 0.
func Ceil(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + unit - 1) / unit)
}
