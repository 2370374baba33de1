package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"payserver/internal/pay"
)

// The resolver's statements (pay.ResolveStore). An UNKNOWN order is leased
// by one instance at a time: the lease is a time in resolve_lease_us,
// taken with a conditional UPDATE, so two instances never query one order
// at once; an instance that dies holding one loses it when it expires.
const (
	unresolvedSQL = "SELECT " + orderColumns + ", resolve_attempts, resolve_close FROM orders " +
		"WHERE status = ? AND resolve_next_us <= ? AND resolve_lease_us < ? ORDER BY resolve_next_us LIMIT ?"
	leaseSQL = "UPDATE orders SET resolve_owner = ?, resolve_lease_us = ? " +
		"WHERE request_id = ? AND order_no = ? AND status = ? AND resolve_lease_us < ? AND resolve_next_us <= ?"
	leasedSQL     = "SELECT resolve_attempts, resolve_close FROM orders WHERE request_id = ? AND resolve_owner = ?"
	rescheduleSQL = "UPDATE orders SET resolve_next_us = ?, resolve_lease_us = 0, resolve_attempts = resolve_attempts + ?, resolve_close = ? " +
		"WHERE request_id = ? AND resolve_owner = ? AND status = ?"
	resolveSQL = "UPDATE orders SET status = ?, channel_trade_no = ?, failure_code = ?, failure_message = ?, updated_at = ?, " +
		"resolved_by = ?, resolved_at_us = ?, resolve_lease_us = 0 " +
		"WHERE request_id = ? AND order_no = ? AND channel = ? AND status IN (?, ?)"
	discrepancySQL = "UPDATE orders SET discrepancy_channel = ?, discrepancy_reported = ?, discrepancy_trade_no = ?, discrepancy_at_us = ? " +
		"WHERE order_no = ? AND discrepancy_at_us = 0"
	byOrderNoSQL        = "SELECT " + orderColumns + " FROM orders WHERE order_no = ?"
	countUnresolvedSQL  = "SELECT COUNT(*) FROM orders WHERE status = ?"
	oldestUnresolvedSQL = "SELECT updated_at FROM orders WHERE status = ? ORDER BY updated_at LIMIT 1"
)

var _ pay.ResolveStore = (*Orders)(nil)

// Unresolved implements pay.ResolveStore.
func (s *Orders) Unresolved(ctx context.Context, now time.Time, limit int) ([]pay.Unresolved, error) {
	us := now.UnixMicro()
	rows, err := s.db.ConnPool.QueryContext(ctx, unresolvedSQL, string(pay.StatusUnknown), us, us, limit)
	if err != nil {
		return nil, fmt.Errorf("repo: unresolved orders: %w", err)
	}
	defer rows.Close()
	var out []pay.Unresolved
	for rows.Next() {
		var r orderRow
		var attempts, closeNext int
		if err := r.scan(rows, &attempts, &closeNext); err != nil {
			return nil, fmt.Errorf("repo: unresolved orders: %w", err)
		}
		out = append(out, pay.Unresolved{Order: r.order(), Attempts: attempts, CloseNext: closeNext == 1})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: unresolved orders: %w", err)
	}
	return out, nil
}

// Lease implements pay.ResolveStore. It takes the order only if it is
// still UNKNOWN, due and not leased, and then reads its attempts and close
// step as they are now (another instance may have moved them since u was
// read).
func (s *Orders) Lease(ctx context.Context, u *pay.Unresolved, owner string, now, until time.Time) (bool, error) {
	o := u.Order
	res, err := s.db.ConnPool.ExecContext(ctx, leaseSQL, owner, until.UnixMicro(), o.RequestID, o.OrderNo,
		string(pay.StatusUnknown), now.UnixMicro(), now.UnixMicro())
	if err != nil {
		return false, fmt.Errorf("repo: lease order: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("repo: lease order: %w", err)
	}
	if n != 1 {
		return false, nil
	}
	var closeNext int
	rows, err := s.db.ConnPool.QueryContext(ctx, leasedSQL, o.RequestID, owner)
	if err == nil {
		defer rows.Close()
		if !rows.Next() {
			err = sql.ErrNoRows
		} else {
			err = rows.Scan(&u.Attempts, &closeNext)
		}
	}
	if err != nil {
		return false, fmt.Errorf("repo: read a leased order: %w", err)
	}
	u.CloseNext = closeNext == 1
	return true, nil
}

// Reschedule implements pay.ResolveStore.
func (s *Orders) Reschedule(ctx context.Context, requestID, owner string, next time.Time, asked, closeNext bool) error {
	add, closing := 0, 0
	if asked {
		add = 1
	}
	if closeNext {
		closing = 1
	}
	if _, err := s.db.ConnPool.ExecContext(ctx, rescheduleSQL, next.UnixMicro(), add, closing, requestID, owner,
		string(pay.StatusUnknown)); err != nil {
		return fmt.Errorf("repo: reschedule order: %w", err)
	}
	return nil
}

// Resolve implements pay.ResolveStore.
func (s *Orders) Resolve(ctx context.Context, o *pay.Order) error {
	if err := pay.CheckFinish(o); err != nil {
		return err
	}
	o.UpdatedAt, o.ResolvedAt = stored(o.UpdatedAt), stored(o.ResolvedAt)
	res, err := s.db.ConnPool.ExecContext(ctx, resolveSQL, string(o.Status), o.ChannelTradeNo, o.FailureCode,
		o.FailureMessage, o.UpdatedAt, o.ResolvedBy, unixMicro(o.ResolvedAt), o.RequestID, o.OrderNo, o.Channel,
		string(pay.StatusProcessing), string(pay.StatusUnknown))
	if err != nil {
		return fmt.Errorf("repo: resolve order: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("repo: resolve order: %w", err)
	}
	if n == 0 {
		return pay.ErrOrderNotFound
	}
	return nil
}

// GetByOrderNo implements pay.ResolveStore.
func (s *Orders) GetByOrderNo(ctx context.Context, orderNo string) (*pay.Order, error) {
	rows, err := s.db.ConnPool.QueryContext(ctx, byOrderNoSQL, orderNo)
	var r orderRow
	if err == nil {
		err = scanOne(rows, &r)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, pay.ErrOrderNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("repo: get order by orderNo: %w", err)
	}
	return r.order(), nil
}

// UnresolvedStats implements pay.ResolveStore: how many orders are
// UNKNOWN, and the last update of the oldest of them (zero when none),
// both through the (status, updated_at) index.
func (s *Orders) UnresolvedStats(ctx context.Context) (int64, time.Time, error) {
	var n int64
	var oldest time.Time
	err := s.scalar(ctx, countUnresolvedSQL, &n)
	if err == nil && n > 0 {
		err = s.scalar(ctx, oldestUnresolvedSQL, &oldest)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("repo: unresolved stats: %w", err)
	}
	return n, oldest.UTC(), nil
}

// scalar reads the one value of query's first row (of UNKNOWN orders)
// into dst; Rows, not Row: see getOne.
func (s *Orders) scalar(ctx context.Context, query string, dst any) error {
	rows, err := s.db.ConnPool.QueryContext(ctx, query, string(pay.StatusUnknown))
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	return rows.Close()
}

// RecordDiscrepancy implements pay.ResolveStore.
func (s *Orders) RecordDiscrepancy(ctx context.Context, orderNo string, d pay.Discrepancy) (bool, error) {
	d.At = stored(d.At)
	res, err := s.db.ConnPool.ExecContext(ctx, discrepancySQL, d.Channel, d.Reported, d.TradeNo, unixMicro(d.At), orderNo)
	if err != nil {
		return false, fmt.Errorf("repo: record a discrepancy: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("repo: record a discrepancy: %w", err)
	}
	return n == 1, nil
}
