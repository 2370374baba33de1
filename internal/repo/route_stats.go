package repo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"payserver/internal/stats"
)

// RouteStats stores per-minute routing counts in route_stats. It implements
// stats.RouteStore.
type RouteStats struct {
	db     *gorm.DB
	driver Driver
}

// NewRouteStats returns the route stats store on db (MySQL/MariaDB or
// SQLite).
func NewRouteStats(db *gorm.DB) (*RouteStats, error) {
	if db == nil {
		return nil, errors.New("repo: nil db")
	}
	switch db.Dialector.Name() {
	case "mysql":
		return &RouteStats{db: db, driver: MySQL}, nil
	case "sqlite":
		return &RouteStats{db: db, driver: SQLite}, nil
	}
	return nil, fmt.Errorf("repo: route stats: unsupported dialect %q", db.Dialector.Name())
}

var _ stats.RouteStore = (*RouteStats)(nil)

// upsertRoutesSQL adds n rows' counts to the stored ones.
func (s *RouteStats) upsertRoutesSQL(n int) string {
	q := "INSERT INTO route_stats (minute, biz_type, from_channel, to_channel, reason, count) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?), ", n), ", ")
	if s.driver == MySQL {
		return q + " ON DUPLICATE KEY UPDATE count = count + VALUES(count)"
	}
	return q + " ON CONFLICT (minute, biz_type, from_channel, to_channel, reason) DO UPDATE SET count = count + excluded.count"
}

// AddRoutes implements stats.RouteStore: one transaction of additive
// upserts, in the order given.
func (s *RouteStats) AddRoutes(ctx context.Context, rows []stats.RouteRow) error {
	err := upsertChunks(ctx, s.db, len(rows), func(start, end int) (string, []any) {
		args := make([]any, 0, 6*(end-start))
		for _, r := range rows[start:end] {
			args = append(args, r.Minute.Unix(), r.BizType, r.From, r.To, r.Reason, r.Count)
		}
		return s.upsertRoutesSQL(end - start), args
	})
	if err != nil {
		return fmt.Errorf("repo: add route stats: %w", err)
	}
	return nil
}

// Routes implements stats.RouteStore.
func (s *RouteStats) Routes(ctx context.Context, from, to time.Time, bizType string) ([]stats.RouteRow, error) {
	q := s.db.WithContext(ctx).Table("route_stats").
		Select("minute, biz_type, from_channel, to_channel, reason, count").
		Where("minute >= ? AND minute < ?", from.Unix(), to.Unix())
	if bizType != "" {
		q = q.Where("biz_type = ?", bizType)
	}
	rows, err := q.Order("minute, biz_type, from_channel, to_channel, reason").Rows()
	if err != nil {
		return nil, fmt.Errorf("repo: query route stats: %w", err)
	}
	defer rows.Close()
	out := []stats.RouteRow{}
	for rows.Next() {
		var r stats.RouteRow
		var minute int64
		if err := rows.Scan(&minute, &r.BizType, &r.From, &r.To, &r.Reason, &r.Count); err != nil {
			return nil, fmt.Errorf("repo: scan route stats: %w", err)
		}
		r.Minute = time.Unix(minute, 0).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: read route stats: %w", err)
	}
	return out, nil
}

// upsertChunks runs, in one transaction, one statement per statsChunk rows
// of n: chunk returns the statement and arguments of rows [start, end).
func upsertChunks(ctx context.Context, db *gorm.DB, n int, chunk func(start, end int) (string, []any)) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for start := 0; start < n; start += statsChunk {
			query, args := chunk(start, min(start+statsChunk, n))
			if err := tx.Exec(query, args...).Error; err != nil {
				return err
			}
		}
		return nil
	})
}
