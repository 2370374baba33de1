package repo

import (
	"context"
	"log/slog"
	"time"

	"gorm.io/gorm/logger"
)

// sqlLogger is gorm's logger with failed statements left to their callers:
// every repo method returns its error, and the caller knows whether it is
// expected (a duplicate requestId, a cancelled request) or a fault to log
// (pay's storeDown, the HTTP layer's INTERNAL). gorm itself would log each
// failed statement at error level, so an expected conflict showed up as
// `level=ERROR … UNIQUE constraint failed`. Failed statements are logged at
// debug level here; slow statements are still logged by gorm at warn.
type sqlLogger struct {
	logger.Interface
	log *slog.Logger
}

// LogMode implements logger.Interface.
func (l sqlLogger) LogMode(level logger.LogLevel) logger.Interface {
	return sqlLogger{Interface: l.Interface.LogMode(level), log: l.log}
}

// Trace implements logger.Interface.
func (l sqlLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if err == nil {
		l.Interface.Trace(ctx, begin, fc, nil)
		return
	}
	if l.log.Enabled(ctx, slog.LevelDebug) {
		sql, rows := fc()
		l.log.DebugContext(ctx, "SQL statement failed; the caller handles the error",
			"sql", sql, "rows", rows, "duration", time.Since(begin), "err", err)
	}
}

// ParamsFilter implements gorm.ParamsFilter by delegating, so that the
// inner logger's ParameterizedQueries (never log values) still applies:
// gorm asks the outermost logger.
func (l sqlLogger) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := l.Interface.(interface {
		ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any)
	}); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, nil
}
