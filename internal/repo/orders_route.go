package repo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"payserver/internal/pay"
)

// rerouteOrderSQL moves a PROCESSING claim to another channel. It names the
// claim by request_id and order_no (only its owner moves it) and by the
// channel it leaves, so that it can never move a claim twice or one that
// the sweeper has turned UNKNOWN.
const rerouteOrderSQL = "UPDATE orders SET channel = ?, routed_from = ?, updated_at = ?, " +
	"admitted_at_us = ?, admitted_keys = ?, limits_version = ? " +
	"WHERE request_id = ? AND order_no = ? AND channel = ? AND status = ?"

// Reroute implements pay.OrderStore. It runs as one autocommit UPDATE of its
// own, also under group commit: it is rare (a payment that provably never
// reached its first channel), and its answer must be its own. It sets
// o.UpdatedAt to what is stored.
func (s *Orders) Reroute(ctx context.Context, o *pay.Order, from string) error {
	o.UpdatedAt = stored(o.UpdatedAt)
	begin := time.Now()
	res, err := s.db.ConnPool.ExecContext(ctx, rerouteOrderSQL, o.Channel, routedFromColumn(o.RoutedFrom),
		o.UpdatedAt, unixMicro(o.Admission.At), keysColumn(o.Admission.Keys), o.Admission.LimitsVersion, o.RequestID, o.OrderNo, from, string(pay.StatusProcessing))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	s.trace(ctx, begin, rerouteOrderSQL, err)
	if err != nil {
		return fmt.Errorf("repo: reroute order: %w", err)
	}
	if n == 0 {
		return pay.ErrOrderNotFound
	}
	return nil
}

// routedFromColumn encodes an order's RoutedFrom for the routed_from
// column: ” for a pinned order (nil), else a JSON list ('[]' when the
// payment went to its first candidate).
func routedFromColumn(skips []pay.RouteSkip) string {
	if skips == nil {
		return ""
	}
	b, err := json.Marshal(skips)
	if err != nil {
		return "[]" // unreachable: two strings per element
	}
	return string(b)
}

// routedFromOf decodes the routed_from column; ” (a pinned order, or one
// stored before routing) is nil.
func routedFromOf(col string) []pay.RouteSkip {
	if col == "" {
		return nil
	}
	skips := []pay.RouteSkip{}
	if err := json.Unmarshal([]byte(col), &skips); err != nil {
		return []pay.RouteSkip{}
	}
	return skips
}
