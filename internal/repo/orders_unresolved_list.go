package repo

import (
	"context"
	"fmt"
	"time"

	"payserver/internal/pay"
)

// UnresolvedOrder is one UNKNOWN order as the dashboard lists it: what the
// resolver will do next, and when.
type UnresolvedOrder struct {
	RequestID string
	Channel   string
	// Since is the order's last update: when its outcome became unknown.
	Since time.Time
	// Next is when the resolver may next try (zero: at once); LeasedUntil,
	// when not zero and ahead, is the lease of the instance trying now.
	Next, LeasedUntil time.Time
	// Close is true when the channel answered NOT_FOUND and the next step
	// is to close the payment; otherwise it is a query.
	Close    bool
	Attempts int
}

const oldestUnresolvedListSQL = "SELECT request_id, channel, updated_at, resolve_next_us, resolve_lease_us, resolve_close, resolve_attempts " +
	"FROM orders WHERE status = ? ORDER BY updated_at LIMIT ?"

// OldestUnresolved returns up to limit UNKNOWN orders, the oldest (by
// their last update) first, through the (status, updated_at) index.
func (s *Orders) OldestUnresolved(ctx context.Context, limit int) ([]UnresolvedOrder, error) {
	rows, err := s.db.ConnPool.QueryContext(ctx, oldestUnresolvedListSQL, string(pay.StatusUnknown), limit)
	if err != nil {
		return nil, fmt.Errorf("repo: oldest unresolved orders: %w", err)
	}
	defer rows.Close()
	var out []UnresolvedOrder
	for rows.Next() {
		var u UnresolvedOrder
		var next, lease int64
		var closeNext int
		if err := rows.Scan(&u.RequestID, &u.Channel, &u.Since, &next, &lease, &closeNext, &u.Attempts); err != nil {
			return nil, fmt.Errorf("repo: oldest unresolved orders: %w", err)
		}
		u.Since = u.Since.UTC()
		if next > 0 {
			u.Next = time.UnixMicro(next).UTC()
		}
		if lease > 0 {
			u.LeasedUntil = time.UnixMicro(lease).UTC()
		}
		u.Close = closeNext == 1
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: oldest unresolved orders: %w", err)
	}
	return out, nil
}
