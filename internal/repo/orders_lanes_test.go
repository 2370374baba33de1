package repo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/repo"
)

// TestBatchesInFlight: with OrdersOptions.InFlight lanes, a statement held
// in flight does not hold the calls behind it while a lane is idle, and what
// group commit guarantees still holds across lanes: concurrent claims of one
// requestId let exactly one win, and every outcome is recorded once.
func TestBatchesInFlight(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			ctx := context.Background()

			t.Run("a deep queue behind a held statement spills into the next lane", func(t *testing.T) {
				for _, tc := range []struct {
					inFlight   int
					wantQueued int // of the 3 calls made once lane 0 is full
				}{
					{inFlight: 1, wantQueued: 3},
					{inFlight: 4, wantQueued: 0},
				} {
					t.Run(fmt.Sprintf("InFlight %d", tc.inFlight), func(t *testing.T) {
						s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{GroupCommit: true, BatchGets: true, InFlight: tc.inFlight})
						if err != nil {
							t.Fatal(err)
						}
						entered, gate := make(chan struct{}), make(chan struct{})
						// Not sync.Once: its other callers would wait for the held one.
						var first atomic.Bool
						repo.SetFlushHook(s, "create", func(int) {
							if first.CompareAndSwap(false, true) {
								close(entered)
								<-gate
							}
						})
						prefix := fmt.Sprintf("spill-%d-", tc.inFlight)
						var wg sync.WaitGroup
						errs := make(chan error, 64)
						create := func(id string) {
							defer wg.Done()
							if err := s.Create(ctx, newOrder(id)); err != nil {
								errs <- fmt.Errorf("create %s: %w", id, err)
							}
						}
						wg.Add(1)
						go create(prefix + "lead")
						<-entered
						// Fill lane 0: the held statement and 16 queued behind it.
						for i := 0; i < 16; i++ {
							wg.Add(1)
							go create(fmt.Sprintf("%sfill-%d", prefix, i))
							waitFor(t, "the call to queue", func() bool { return repo.Queued(s, "create") == i+1 })
						}
						done := make(chan error, 3)
						for i := 0; i < 3; i++ {
							go func() { done <- s.Create(ctx, newOrder(fmt.Sprintf("%sspill-%d", prefix, i))) }()
						}
						finished := 0
						timeout := time.After(3 * time.Second)
					wait:
						for finished < 3-tc.wantQueued {
							select {
							case err := <-done:
								if err != nil {
									t.Fatalf("create while lane 0 is held: %v", err)
								}
								finished++
							case <-timeout:
								break wait
							}
						}
						if got := 3 - finished; got != tc.wantQueued {
							t.Fatalf("calls still waiting while lane 0 is held and full: got %d, want %d", got, tc.wantQueued)
						}
						waitFor(t, "the rest to queue", func() bool { return repo.Queued(s, "create") == 16+tc.wantQueued })
						close(gate)
						wg.Wait()
						for ; finished < 3; finished++ {
							if err := <-done; err != nil {
								t.Fatal(err)
							}
						}
						close(errs)
						for err := range errs {
							t.Fatal(err)
						}
						for i := 0; i < 3; i++ {
							mustGet(t, s, fmt.Sprintf("%sspill-%d", prefix, i))
						}
					})
				}
			})

			t.Run("a shallow queue stays in lane 0", func(t *testing.T) {
				s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{GroupCommit: true, BatchGets: true, InFlight: 4})
				if err != nil {
					t.Fatal(err)
				}
				orders := make([]*pay.Order, 8)
				errs := make([]error, len(orders))
				var calls []func()
				for i := range orders {
					orders[i] = newOrder(fmt.Sprintf("shallow-%d", i))
					calls = append(calls, func() { errs[i] = s.Create(ctx, orders[i]) })
				}
				sizes := oneBatch(t, s, "create", func() { _ = s.Create(ctx, newOrder("shallow-lead")) }, calls, nil)
				if fmt.Sprint(sizes) != "[1 8]" {
					t.Fatalf("flush sizes %v, want [1 8]: one batch, as with one lane", sizes)
				}
				for i, err := range errs {
					if err != nil {
						t.Fatalf("create %d: %v", i, err)
					}
				}
			})

			t.Run("concurrent claims of one requestId in several lanes: exactly one wins", func(t *testing.T) {
				s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{GroupCommit: true, BatchGets: true, InFlight: 4})
				if err != nil {
					t.Fatal(err)
				}
				const ids, copies = 16, 8
				orders := make([][]*pay.Order, ids)
				errs := make([][]error, ids)
				var wg sync.WaitGroup
				for i := range orders {
					orders[i], errs[i] = make([]*pay.Order, copies), make([]error, copies)
					for j := range orders[i] {
						orders[i][j] = newOrder(fmt.Sprintf("lanes-dup-%d", i))
						wg.Add(1)
						go func() { defer wg.Done(); errs[i][j] = s.Create(ctx, orders[i][j]) }()
					}
				}
				wg.Wait()
				for i := range orders {
					winner := -1
					for j, err := range errs[i] {
						switch {
						case err == nil && winner < 0:
							winner = j
						case err == nil:
							t.Fatalf("id %d: copies %d and %d both won", i, winner, j)
						case !errors.Is(err, pay.ErrDuplicateOrder):
							t.Fatalf("id %d copy %d: %v, want nil or ErrDuplicateOrder", i, j, err)
						}
					}
					if winner < 0 {
						t.Fatalf("id %d: no copy won", i)
					}
					if got := mustGet(t, s, orders[i][winner].RequestID); got.OrderNo != orders[i][winner].OrderNo {
						t.Fatalf("id %d: stored order %s, want the winner's %s", i, got.OrderNo, orders[i][winner].OrderNo)
					}
				}
				t.Logf("create stats: %+v", s.Stats().Create)
			})

			t.Run("concurrent outcomes in several lanes are each recorded", func(t *testing.T) {
				s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{GroupCommit: true, BatchGets: true, InFlight: 4})
				if err != nil {
					t.Fatal(err)
				}
				const n = 200
				orders := make([]*pay.Order, n)
				var wg sync.WaitGroup
				for i := range orders {
					orders[i] = newOrder(fmt.Sprintf("lanes-fin-%d", i))
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := s.Create(ctx, orders[i]); err != nil {
							t.Errorf("create %d: %v", i, err)
							return
						}
						o := *orders[i]
						o.Status, o.ChannelTradeNo = pay.StatusSucceeded, fmt.Sprintf("T-%d", i)
						if err := s.Finish(ctx, &o); err != nil {
							t.Errorf("finish %d: %v", i, err)
						}
						orders[i] = &o
					}()
				}
				wg.Wait()
				for i, o := range orders {
					got := mustGet(t, s, o.RequestID)
					if got.Status != pay.StatusSucceeded || got.ChannelTradeNo != fmt.Sprintf("T-%d", i) {
						t.Fatalf("order %d: got %s %s, want SUCCEEDED T-%d", i, got.Status, got.ChannelTradeNo, i)
					}
				}
				st := s.Stats()
				t.Logf("create %+v finish %+v get %+v", st.Create, st.Finish, st.Get)
			})
		})
	}
}
