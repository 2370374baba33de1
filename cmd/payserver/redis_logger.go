package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"payserver/internal/ratelog"
)

// go-redis's own lines (pool and dial failures while Redis is down) are
// logged at most this often after a burst, through slog.
const (
	redisLogEvery = 30 * time.Second
	redisLogBurst = 5
)

// redisLogger routes go-redis's package-level logger (redis.SetLogger,
// set once in run) through slog at warn, rate-limited, so that an outage
// does not print unstructured lines to stderr at every retry.
type redisLogger struct {
	log   *slog.Logger
	limit *ratelog.Limiter
}

func newRedisLogger(log *slog.Logger) redisLogger {
	return redisLogger{log: log.With("component", "go-redis"), limit: ratelog.New(redisLogEvery, redisLogBurst)}
}

// Printf implements go-redis's internal.Logging.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	ok, suppressed := l.limit.Allow()
	if !ok {
		return
	}
	l.log.WarnContext(ctx, "redis client", "detail", strings.TrimSpace(fmt.Sprintf(format, v...)), "suppressedSinceLast", suppressed)
}
