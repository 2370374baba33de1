package repo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/repo"
)

// TestMarkStaleNeverWaitsForAPaymentInFlight: while a fresh order's outcome
// is being recorded (its row locked by an uncommitted UPDATE), the sweep
// still turns a stale order UNKNOWN at once. A sweep that scans the
// (status, updated_at) index under locks waits for the fresh order's lock,
// the entry just past its range, until its deadline.
func TestMarkStaleNeverWaitsForAPaymentInFlight(t *testing.T) {
	db := databases()["mariadb"](t)
	s, err := repo.NewOrders(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stale := newOrder("r-sweep-stale")
	stale.UpdatedAt = time.Now().Add(-time.Hour).UTC()
	fresh := newOrder("r-sweep-fresh")
	for _, o := range []*pay.Order{stale, fresh} {
		if err := s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Other orders, so the table is not trivially small (the old sweep
	// waited for the fresh order's lock whether it used the index or not).
	for i := range 200 {
		o := newOrder(fmt.Sprintf("r-sweep-done-%d", i))
		o.Status = pay.StatusSucceeded
		if err := s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// ANALYZE answers with rows: read them (Exec would wait for more).
	rows, err := db.Raw("ANALYZE TABLE orders").Rows()
	if err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()

	// The fresh order's outcome, in flight: its row locked until rollback.
	tx := db.Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	defer tx.Rollback()
	if err := tx.Exec("UPDATE orders SET status = ?, updated_at = ? WHERE request_id = ?",
		string(pay.StatusSucceeded), time.Now().UTC(), fresh.RequestID).Error; err != nil {
		t.Fatal(err)
	}

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	begin := time.Now()
	n, err := s.MarkStaleUnknown(sctx, time.Now().Add(-time.Minute))
	took := time.Since(begin)
	if err != nil || n != 1 {
		t.Fatalf("sweep while an outcome is in flight: %d orders, err %v after %v; want 1, nil, at once", n, err, took.Round(time.Millisecond))
	}
	if took > 2*time.Second {
		t.Fatalf("sweep took %v: it waited for the outcome in flight", took.Round(time.Millisecond))
	}
	tx.Rollback()
	wantStatus(t, s, stale.RequestID, pay.StatusUnknown)
	wantStatus(t, s, fresh.RequestID, pay.StatusProcessing) // the outcome rolled back, and it is not stale
}

// wantStatus fails t unless requestID's order has status want.
func wantStatus(t *testing.T, s *repo.Orders, requestID string, want pay.Status) {
	t.Helper()
	got, err := s.Get(context.Background(), requestID)
	if err != nil {
		t.Fatalf("get %s: %v", requestID, err)
	}
	if got.Status != want {
		t.Fatalf("order %s is %s, want %s", requestID, got.Status, want)
	}
}

// TestMarkStaleUpdateChecksAgain: the sweep's UPDATE by primary key turns
// nothing UNKNOWN that stopped being stale after its ids were read: an
// order whose outcome was recorded, and one updated since (rerouted).
func TestMarkStaleUpdateChecksAgain(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			s, err := repo.NewOrders(db)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			finished := newOrder("r-recheck-finished")
			finished.Status, finished.UpdatedAt = pay.StatusSucceeded, time.Now().Add(-time.Hour).UTC()
			fresh := newOrder("r-recheck-fresh")
			var ids []any
			for _, o := range []*pay.Order{finished, fresh} {
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				var id uint64
				if err := db.Raw("SELECT id FROM orders WHERE request_id = ?", o.RequestID).Scan(&id).Error; err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			args := append([]any{string(pay.StatusUnknown), "OUTCOME_NOT_RECORDED", "m", time.Now().UTC()}, ids...)
			args = append(args, string(pay.StatusProcessing), time.Now().Add(-time.Minute).UTC())
			res := db.Exec(repo.MarkStaleSQL(db.Dialector.Name(), len(ids)), args...)
			if res.Error != nil || res.RowsAffected != 0 {
				t.Fatalf("sweep UPDATE of orders no longer stale: %d rows, err %v; want 0, nil", res.RowsAffected, res.Error)
			}
			wantStatus(t, s, finished.RequestID, pay.StatusSucceeded)
			wantStatus(t, s, fresh.RequestID, pay.StatusProcessing)
		})
	}
}

// TestMarkStaleSweepsMoreThanABatch: the sweep turns every stale order
// UNKNOWN, however many there are, batch after batch, and leaves a fresh
// one alone.
func TestMarkStaleSweepsMoreThanABatch(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			s, err := repo.NewOrders(open(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const stale = repo.StaleBatch*2 + 7
			for i := range stale {
				o := newOrder(fmt.Sprintf("r-many-%d", i))
				o.UpdatedAt = time.Now().Add(-time.Hour).UTC()
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			fresh := newOrder("r-many-fresh")
			if err := s.Create(ctx, fresh); err != nil {
				t.Fatal(err)
			}
			n, err := s.MarkStaleUnknown(ctx, time.Now().Add(-time.Minute))
			if err != nil || n != stale {
				t.Fatalf("swept %d, err %v; want %d, nil", n, err, stale)
			}
			if n, err := s.MarkStaleUnknown(ctx, time.Now().Add(-time.Minute)); err != nil || n != 0 {
				t.Fatalf("a second sweep: %d, err %v; want 0, nil", n, err)
			}
			wantStatus(t, s, fresh.RequestID, pay.StatusProcessing)
		})
	}
}
