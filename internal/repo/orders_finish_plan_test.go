package repo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/repo"
)

// TestOutcomeBatchDoesNotBlockClaims: while a batched outcome UPDATE's
// transaction is open (it stays open until its COMMIT's fsync), a new claim
// INSERT goes through. Left to itself MariaDB reads that UPDATE through
// (status, updated_at) when few orders are PROCESSING, and its next-key
// locks on the PROCESSING range then block every claim; the store's UPDATE
// names the request_id index. The same UPDATE forced through the status
// index is run too, to show the lock the hint avoids.
func TestOutcomeBatchDoesNotBlockClaims(t *testing.T) {
	open, ok := databases()["mariadb"]
	if !ok {
		t.Fatal("no MariaDB")
	}
	db := open(t)
	ctx := context.Background()
	s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Many final orders and a few PROCESSING ones, as in production.
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	const final = 3000
	for i := 0; i < final; i += 500 {
		var vals []string
		var args []any
		for j := i; j < i+500; j++ {
			vals = append(vals, "(?, ?, 'h', 'B', 'ALIPAY', 'M', 1, 'CNY', '', 'SUCCEEDED', '', '', '', NOW(6), NOW(6))")
			args = append(args, fmt.Sprintf("PSplan-final-%d", j), fmt.Sprintf("plan-final-%d", j))
		}
		if _, err := sqlDB.ExecContext(ctx, "INSERT INTO orders (order_no, request_id, request_hash, biz_type, channel, merchant_id, amount, currency, subject, status, channel_trade_no, failure_code, failure_message, created_at, updated_at) VALUES "+strings.Join(vals, ", "), args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sqlDB.ExecContext(ctx, "ANALYZE TABLE orders"); err != nil {
		t.Fatal(err)
	}

	for i, tc := range []struct {
		name    string
		table   string // "" is the store's
		wantKey string
		blocked bool
	}{
		{name: "as the store sends it", wantKey: "uk_orders_request_id"},
		{name: "planned through (status, updated_at)", table: "orders FORCE INDEX (idx_orders_status_updated)",
			wantKey: "idx_orders_status_updated", blocked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A batch of 8 outcomes, the size of a batch at 64 connections.
			const n = 8
			batch := make([]*pay.Order, n)
			for j := range batch {
				batch[j] = newOrder(fmt.Sprintf("plan-%c-%d", 'a'+i, j))
				if err := s.Create(ctx, batch[j]); err != nil {
					t.Fatal(err)
				}
			}
			query := repo.FinishSQL("mysql", n, tc.table)
			var args []any
			for col := 0; col < 5; col++ {
				for i, o := range batch {
					v := []any{"SUCCEEDED", fmt.Sprintf("T-%d", i), "", "", time.Now().UTC()}[col]
					args = append(args, o.OrderNo, v)
				}
			}
			for _, o := range batch {
				args = append(args, o.RequestID)
			}
			for _, o := range batch {
				args = append(args, o.OrderNo)
			}
			args = append(args, "PROCESSING", "UNKNOWN")
			var plan string
			row := sqlDB.QueryRowContext(ctx, "EXPLAIN "+query, args...)
			var cols [10]any
			ptrs := make([]any, len(cols))
			for i := range cols {
				ptrs[i] = &cols[i]
			}
			if err := row.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if k, ok := cols[5].([]byte); ok {
				plan = string(k)
			}
			t.Logf("plan: key %s", plan)

			tx, err := sqlDB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			res, err := tx.ExecContext(ctx, query, args...)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := res.RowsAffected(); got != n {
				t.Fatalf("the UPDATE changed %d rows, want %d", got, n)
			}
			// A claim while that transaction is open, bounded by a 1 s lock
			// wait. Its requestId sorts after the batch's and the other rows',
			// outside the gaps the UPDATE locks around its own request_ids
			// (the request_id range scan takes next-key locks: a new
			// requestId that falls next to one being finished waits; a
			// random one rarely does).
			conn, err := sqlDB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
				t.Fatal(err)
			}
			c := newOrder(fmt.Sprintf("plan-y-%d", i))
			_, err = conn.ExecContext(ctx, "INSERT INTO orders (order_no, request_id, request_hash, biz_type, channel, merchant_id, amount, currency, subject, status, channel_trade_no, failure_code, failure_message, created_at, updated_at) VALUES (?, ?, 'h', 'B', 'ALIPAY', 'M', 1, 'CNY', '', 'PROCESSING', '', '', '', NOW(6), NOW(6))",
				c.OrderNo, c.RequestID)
			if plan != tc.wantKey {
				t.Fatalf("plan: key %s, want %s", plan, tc.wantKey)
			}
			if blocked := err != nil; blocked != tc.blocked {
				t.Fatalf("a claim while the outcome batch is open: got err %v, want blocked %v", err, tc.blocked)
			}
		})
	}
}
