package repo

import (
	"context"
	"fmt"
	"time"

	"payserver/internal/pay"
)

// admissionsSQL reads the orders a channel's limiter admitted in a time
// range, by the limiter's own time, through (channel, admitted_at_us).
const admissionsSQL = "SELECT " + orderColumns + " FROM orders " +
	"WHERE channel = ? AND admitted_at_us >= ? AND admitted_at_us < ? ORDER BY admitted_at_us, id LIMIT ?"

// Admissions returns up to limit orders of channel whose slot the limiter
// admitted in [from, to) by its own time, the earliest first: what ops
// answer a channel that says "you sent us more than the limit at
// 10:03:17" with.
func (s *Orders) Admissions(ctx context.Context, channel string, from, to time.Time, limit int) ([]*pay.Order, error) {
	rows, err := s.db.ConnPool.QueryContext(ctx, admissionsSQL, channel, from.UnixMicro(), to.UnixMicro(), limit)
	if err != nil {
		return nil, fmt.Errorf("repo: admissions: %w", err)
	}
	defer rows.Close()
	var out []*pay.Order
	for rows.Next() {
		var r orderRow
		if err := r.scan(rows); err != nil {
			return nil, fmt.Errorf("repo: admissions: %w", err)
		}
		out = append(out, r.order())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: admissions: %w", err)
	}
	return out, nil
}
