// Package ratelog throttles repetitive log lines (a dependency's retry
// loop, failed logins): a burst passes, then at most one line per interval,
// each carrying how many lines were suppressed since the last one logged.
package ratelog

import (
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limiter decides which of a stream of similar log lines to write. It is
// safe for concurrent use. The zero value is not usable; call New.
type Limiter struct {
	lim        *rate.Limiter
	suppressed atomic.Int64
	now        func() time.Time
}

// New lets burst lines through at once and then one per every.
func New(every time.Duration, burst int) *Limiter {
	return &Limiter{lim: rate.NewLimiter(rate.Every(every), burst), now: time.Now}
}

// Allow reports whether a line may be written now and, when it may, how
// many lines were suppressed since the last one allowed.
func (l *Limiter) Allow() (ok bool, suppressed int64) {
	if !l.lim.AllowN(l.now(), 1) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
