package repo

import (
	"context"
	"fmt"

	"payserver/internal/pay"
)

// discrepanciesSQL reads the newest orders a channel contradicted, through
// the discrepancy_at_us index.
const discrepanciesSQL = "SELECT " + orderColumns + " FROM orders WHERE discrepancy_at_us > 0 ORDER BY discrepancy_at_us DESC LIMIT ?"

// Discrepancies returns up to limit orders whose channel contradicted them
// once they were final (pay.Order.Discrepancy), the newest word first.
func (s *Orders) Discrepancies(ctx context.Context, limit int) ([]*pay.Order, error) {
	rows, err := s.db.ConnPool.QueryContext(ctx, discrepanciesSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("repo: discrepancies: %w", err)
	}
	defer rows.Close()
	var out []*pay.Order
	for rows.Next() {
		var r orderRow
		if err := r.scan(rows); err != nil {
			return nil, fmt.Errorf("repo: discrepancies: %w", err)
		}
		out = append(out, r.order())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: discrepancies: %w", err)
	}
	return out, nil
}
