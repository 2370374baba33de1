package repo_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"payserver/internal/pay"
	"payserver/internal/repo"
)

// groupedOptions batches every kind of call.
var groupedOptions = repo.OrdersOptions{GroupCommit: true, BatchGets: true}

func grouped(t *testing.T, db *gorm.DB) *repo.Orders {
	t.Helper()
	s, err := repo.NewOrdersWithOptions(db, groupedOptions)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// oneBatch runs lead, holds its statement until every one of calls is
// queued behind it, then lets go, so that calls go out as one batch of kind
// (calls must fit one batch: for creates, a size in createSizes). during,
// if set, runs at the start of that batch. It returns the sizes of the
// flushes of kind.
func oneBatch(t *testing.T, s *repo.Orders, kind string, lead func(), calls []func(), during func()) []int {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	repo.SetFlushHook(s, kind, func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-gate
		} else if during != nil {
			during()
		}
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); lead() }()
	<-entered
	for _, c := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); c() }()
	}
	waitFor(t, "the calls to queue", func() bool { return repo.Queued(s, kind) == len(calls) })
	close(gate)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return append([]int(nil), sizes...)
}

func mustGet(t *testing.T, s *repo.Orders, id string) *pay.Order {
	t.Helper()
	o, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return o
}

func TestGroupCommit(t *testing.T) {
	for name, open := range databases() {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			ctx := context.Background()

			t.Run("concurrent creates of distinct ids all commit", func(t *testing.T) {
				s := grouped(t, db)
				const n = 300
				orders := make([]*pay.Order, n)
				var wg sync.WaitGroup
				for i := range orders {
					orders[i] = newOrder(fmt.Sprintf("many-%d", i))
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := s.Create(ctx, orders[i]); err != nil {
							t.Errorf("create %d: %v", i, err)
						}
					}()
				}
				wg.Wait()
				for _, o := range orders {
					if got := mustGet(t, s, o.RequestID); !reflect.DeepEqual(*got, *o) {
						t.Fatalf("got %+v\nwant %+v", got, o)
					}
				}
				st := s.Stats().Create
				if st.Calls != n || st.Retried != 0 {
					t.Fatalf("stats %+v, want %d calls and no retries", st, n)
				}
				t.Logf("create stats: %+v", st)
			})

			t.Run("one batch of distinct ids is one statement", func(t *testing.T) {
				s := grouped(t, db)
				orders := make([]*pay.Order, 16)
				errs := make([]error, len(orders))
				var calls []func()
				for i := range orders {
					orders[i] = newOrder(fmt.Sprintf("batch16-%d", i))
					calls = append(calls, func() { errs[i] = s.Create(ctx, orders[i]) })
				}
				sizes := oneBatch(t, s, "create", func() {
					if err := s.Create(ctx, newOrder("batch16-lead")); err != nil {
						t.Errorf("lead: %v", err)
					}
				}, calls, nil)
				if fmt.Sprint(sizes) != "[1 16]" {
					t.Fatalf("flush sizes %v, want [1 16]", sizes)
				}
				for i, o := range orders {
					if errs[i] != nil {
						t.Fatalf("create %d: %v", i, errs[i])
					}
					if got := mustGet(t, s, o.RequestID); !reflect.DeepEqual(*got, *o) {
						t.Fatalf("got %+v\nwant %+v", got, o)
					}
				}
				if st := s.Stats().Create; st.Batches != 1 || st.Batched != 16 || st.Retried != 0 {
					t.Fatalf("stats %+v", st)
				}
			})

			t.Run("batches are bounded", func(t *testing.T) {
				for _, tc := range []struct {
					max, calls int
					want       string
				}{
					{0, 70, "[1 64 6]"}, // the default bound, 64
					{4, 10, "[1 4 4 2]"},
					{5, 11, "[1 4 4 3]"}, // an INSERT takes a prepared size: 5 rows go as 4
				} {
					s, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{GroupCommit: true, MaxBatch: tc.max})
					if err != nil {
						t.Fatal(err)
					}
					errs := make([]error, tc.calls)
					var calls []func()
					for i := range errs {
						calls = append(calls, func() { errs[i] = s.Create(ctx, newOrder(fmt.Sprintf("bound-%d-%d", tc.max, i))) })
					}
					sizes := oneBatch(t, s, "create", func() { _ = s.Create(ctx, newOrder(fmt.Sprintf("bound-%d-lead", tc.max))) }, calls, nil)
					if fmt.Sprint(sizes) != tc.want {
						t.Fatalf("MaxBatch %d, %d calls: flush sizes %v, want %s", tc.max, tc.calls, sizes, tc.want)
					}
					for i, err := range errs {
						if err != nil {
							t.Fatalf("create %d: %v", i, err)
						}
					}
				}
			})

			t.Run("the same id many times in one batch: exactly one wins", func(t *testing.T) {
				s := grouped(t, db)
				orders := make([]*pay.Order, 16)
				errs := make([]error, len(orders))
				var calls []func()
				for i := range orders {
					orders[i] = newOrder("same-id")
					calls = append(calls, func() { errs[i] = s.Create(ctx, orders[i]) })
				}
				sizes := oneBatch(t, s, "create", func() { _ = s.Create(ctx, newOrder("same-id-lead")) }, calls, nil)
				if fmt.Sprint(sizes) != "[1 16]" {
					t.Fatalf("flush sizes %v, want [1 16]", sizes)
				}
				winner := -1
				for i, err := range errs {
					switch {
					case err == nil && winner < 0:
						winner = i
					case err == nil:
						t.Fatalf("calls %d and %d both won", winner, i)
					case !errors.Is(err, pay.ErrDuplicateOrder):
						t.Fatalf("call %d: %v, want ErrDuplicateOrder", i, err)
					}
				}
				if winner < 0 {
					t.Fatal("no call won")
				}
				if got := mustGet(t, s, "same-id"); !reflect.DeepEqual(*got, *orders[winner]) {
					t.Fatalf("stored %+v\nwant the winner's %+v", got, orders[winner])
				}
				if st := s.Stats().Create; st.Retried != 16 {
					t.Fatalf("stats %+v, want the batch retried row by row", st)
				}
			})

			t.Run("a batch with an existing id: only that call is refused", func(t *testing.T) {
				s := grouped(t, db)
				existing := newOrder("pre-existing")
				if err := s.Create(ctx, existing); err != nil {
					t.Fatal(err)
				}
				orders := make([]*pay.Order, 12)
				errs := make([]error, len(orders))
				var calls []func()
				for i := range orders {
					orders[i] = newOrder(fmt.Sprintf("mixed-%d", i))
					if i == 5 {
						orders[i] = newOrder("pre-existing")
					}
					calls = append(calls, func() { errs[i] = s.Create(ctx, orders[i]) })
				}
				sizes := oneBatch(t, s, "create", func() { _ = s.Create(ctx, newOrder("mixed-lead")) }, calls, nil)
				if fmt.Sprint(sizes) != "[1 12]" {
					t.Fatalf("flush sizes %v, want [1 12]", sizes)
				}
				for i, o := range orders {
					if i == 5 {
						if !errors.Is(errs[i], pay.ErrDuplicateOrder) {
							t.Fatalf("the existing id: %v, want ErrDuplicateOrder", errs[i])
						}
						continue
					}
					if errs[i] != nil {
						t.Fatalf("create %d: %v", i, errs[i])
					}
					if got := mustGet(t, s, o.RequestID); !reflect.DeepEqual(*got, *o) {
						t.Fatalf("got %+v\nwant %+v", got, o)
					}
				}
				if got := mustGet(t, s, "pre-existing"); !reflect.DeepEqual(*got, *existing) {
					t.Fatalf("the existing order changed: %+v", got)
				}
			})

			t.Run("finish batch: missing and finished orders are not found, the others are recorded", func(t *testing.T) {
				s := grouped(t, db)
				// Case-F and case-f are two orders: each must get its own outcome.
				ids := []string{"fin-0", "fin-1", "Case-F", "case-f", "fin-missing", "fin-done", "fin-unknown", "fin-7"}
				want := map[string]*pay.Order{}
				for i, id := range ids {
					if id == "fin-missing" {
						continue
					}
					o := newOrder(id)
					if err := s.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
					switch id {
					case "fin-done":
						o.Status, o.ChannelTradeNo = pay.StatusSucceeded, "T-done"
						if err := s.Finish(ctx, o); err != nil {
							t.Fatal(err)
						}
					case "fin-unknown":
						o.Status, o.FailureCode = pay.StatusUnknown, "CHANNEL_TIMEOUT"
						if err := s.Finish(ctx, o); err != nil {
							t.Fatal(err)
						}
					}
					o.Status, o.ChannelTradeNo = pay.StatusSucceeded, fmt.Sprintf("T-%d-%s", i, id)
					o.FailureCode, o.FailureMessage = "", ""
					if i%2 == 1 {
						o.Status, o.ChannelTradeNo = pay.StatusFailed, ""
						o.FailureCode, o.FailureMessage = fmt.Sprintf("DECLINED_%d", i), "余额不足 "+id
					}
					o.UpdatedAt = o.UpdatedAt.Add(time.Duration(i+1)*time.Second + time.Duration(i+1)*time.Microsecond)
					want[id] = o
				}
				lead := newOrder("fin-lead")
				if err := s.Create(ctx, lead); err != nil {
					t.Fatal(err)
				}
				errs := make([]error, len(ids))
				var calls []func()
				for i, id := range ids {
					o := want[id]
					if o == nil {
						o = newOrder(id)
						o.Status = pay.StatusSucceeded
					}
					calls = append(calls, func() { errs[i] = s.Finish(ctx, o) })
				}
				sizes := oneBatch(t, s, "finish", func() {
					lead.Status = pay.StatusSucceeded
					if err := s.Finish(ctx, lead); err != nil {
						t.Errorf("lead: %v", err)
					}
				}, calls, nil)
				if fmt.Sprint(sizes) != "[1 8]" {
					t.Fatalf("flush sizes %v, want [1 8]", sizes)
				}
				for i, id := range ids {
					switch id {
					case "fin-missing", "fin-done":
						if !errors.Is(errs[i], pay.ErrOrderNotFound) {
							t.Fatalf("%s: %v, want ErrOrderNotFound", id, errs[i])
						}
						if id == "fin-done" {
							if got := mustGet(t, s, id); got.ChannelTradeNo != "T-done" || got.Status != pay.StatusSucceeded {
								t.Fatalf("a finished order was overwritten: %+v", got)
							}
						}
						continue
					}
					if errs[i] != nil {
						t.Fatalf("%s: %v", id, errs[i])
					}
					if got := mustGet(t, s, id); !reflect.DeepEqual(*got, *want[id]) {
						t.Fatalf("%s: got %+v\nwant %+v", id, got, want[id])
					}
				}
				if st := s.Stats().Finish; st.Batches != 1 || st.Retried != 8 {
					t.Fatalf("stats %+v, want one batch retried call by call", st)
				}
			})

			t.Run("finish batch: one transaction when every order is found", func(t *testing.T) {
				s := grouped(t, db)
				var orders []*pay.Order
				for i := 0; i < 6; i++ {
					o := newOrder(fmt.Sprintf("finall-%d", i))
					if err := s.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
					o.Status, o.ChannelTradeNo = pay.StatusSucceeded, fmt.Sprintf("T-%d", i)
					o.UpdatedAt = o.UpdatedAt.Add(time.Duration(i+1) * 1001 * time.Microsecond)
					orders = append(orders, o)
				}
				lead := newOrder("finall-lead")
				_ = s.Create(ctx, lead)
				errs := make([]error, len(orders))
				var calls []func()
				for i, o := range orders {
					calls = append(calls, func() { errs[i] = s.Finish(ctx, o) })
				}
				sizes := oneBatch(t, s, "finish", func() { lead.Status = pay.StatusFailed; _ = s.Finish(ctx, lead) }, calls, nil)
				if fmt.Sprint(sizes) != "[1 6]" {
					t.Fatalf("flush sizes %v, want [1 6]", sizes)
				}
				for i, o := range orders {
					if errs[i] != nil {
						t.Fatalf("finish %d: %v", i, errs[i])
					}
					if got := mustGet(t, s, o.RequestID); !reflect.DeepEqual(*got, *o) {
						t.Fatalf("got %+v\nwant %+v", got, o)
					}
				}
				if st := s.Stats().Finish; st.Batches != 1 || st.Batched != 6 || st.Retried != 0 {
					t.Fatalf("stats %+v", st)
				}
				// Finishing them again finds nothing to finish.
				s2 := grouped(t, db)
				errs = make([]error, len(orders))
				calls = nil
				for i, o := range orders {
					calls = append(calls, func() { errs[i] = s2.Finish(ctx, o) })
				}
				oneBatch(t, s2, "finish", func() { _ = s2.Finish(ctx, lead) }, calls, nil)
				for i, err := range errs {
					if !errors.Is(err, pay.ErrOrderNotFound) {
						t.Fatalf("second finish %d: %v, want ErrOrderNotFound", i, err)
					}
				}
			})

			t.Run("batched gets", func(t *testing.T) {
				s := grouped(t, db)
				var ids []string
				want := map[string]*pay.Order{}
				for i := 0; i < 5; i++ {
					o := newOrder(fmt.Sprintf("get-%d", i))
					if err := s.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
					want[o.RequestID] = o
					ids = append(ids, o.RequestID, fmt.Sprintf("get-missing-%d", i), "GET-0")
				}
				ids = append(ids, "get-1", "get-2") // asked twice in one batch; 17 calls, padded to 32
				got := make([]*pay.Order, len(ids))
				errs := make([]error, len(ids))
				var calls []func()
				for i, id := range ids {
					calls = append(calls, func() { got[i], errs[i] = s.Get(ctx, id) })
				}
				sizes := oneBatch(t, s, "get", func() { _, _ = s.Get(ctx, "get-0") }, calls, nil)
				if fmt.Sprint(sizes) != fmt.Sprintf("[1 %d]", len(ids)) {
					t.Fatalf("flush sizes %v", sizes)
				}
				for i, id := range ids {
					if w := want[id]; w != nil {
						if errs[i] != nil || !reflect.DeepEqual(*got[i], *w) {
							t.Fatalf("get %s: %+v, %v", id, got[i], errs[i])
						}
						continue
					}
					if !errors.Is(errs[i], pay.ErrOrderNotFound) {
						t.Fatalf("get %s: %v, want ErrOrderNotFound", id, errs[i])
					}
				}
				if ids[1*3] != ids[len(ids)-2] || got[1*3] == got[len(ids)-2] { // get-1, asked twice
					t.Fatal("two callers share one *pay.Order")
				}
			})

			t.Run("a call alone is sent at once, without batching", func(t *testing.T) {
				s := grouped(t, db)
				for i := 0; i < 20; i++ {
					o := newOrder(fmt.Sprintf("alone-%d", i))
					if err := s.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
					mustGet(t, s, o.RequestID)
					o.Status = pay.StatusSucceeded
					if err := s.Finish(ctx, o); err != nil {
						t.Fatal(err)
					}
				}
				if st := s.Stats(); st.Create.Batches+st.Finish.Batches+st.Get.Batches != 0 || st.Create.Calls != 20 {
					t.Fatalf("stats %+v, want 20 calls each and no batches", st)
				}
			})

			t.Run("a caller whose context ends while queued writes nothing", func(t *testing.T) {
				s := grouped(t, db)
				entered, gate := make(chan struct{}), make(chan struct{})
				var once sync.Once
				repo.SetFlushHook(s, "create", func(n int) {
					once.Do(func() { close(entered); <-gate })
				})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); _ = s.Create(ctx, newOrder("q-lead")) }()
				<-entered
				cctx, cancel := context.WithCancel(ctx)
				var leftErr error
				wg.Add(1)
				go func() { defer wg.Done(); leftErr = s.Create(cctx, newOrder("q-left")) }()
				stay := make([]error, 3)
				for i := range stay {
					wg.Add(1)
					go func() { defer wg.Done(); stay[i] = s.Create(ctx, newOrder(fmt.Sprintf("q-stay-%d", i))) }()
				}
				waitFor(t, "4 queued", func() bool { return repo.Queued(s, "create") == 4 })
				cancel()
				waitFor(t, "the canceled call to leave", func() bool { return repo.Queued(s, "create") == 3 })
				close(gate)
				wg.Wait()
				if !errors.Is(leftErr, context.Canceled) {
					t.Fatalf("canceled create: %v, want context.Canceled", leftErr)
				}
				if _, err := s.Get(ctx, "q-left"); !errors.Is(err, pay.ErrOrderNotFound) {
					t.Fatalf("the canceled call's row: %v, want none", err)
				}
				for i, err := range stay {
					if err != nil {
						t.Fatalf("create %d: %v", i, err)
					}
					mustGet(t, s, fmt.Sprintf("q-stay-%d", i))
				}
				if st := s.Stats().Create; st.Canceled != 1 {
					t.Fatalf("stats %+v", st)
				}
			})

			t.Run("a caller that leaves mid-batch does not cut off the others", func(t *testing.T) {
				s := grouped(t, db)
				cctx, cancel := context.WithCancel(ctx)
				errs := make([]error, 8)
				var calls []func()
				for i := range errs {
					c := ctx
					if i == 3 {
						c = cctx
					}
					calls = append(calls, func() { errs[i] = s.Create(c, newOrder(fmt.Sprintf("mid-%d", i))) })
				}
				sizes := oneBatch(t, s, "create", func() { _ = s.Create(ctx, newOrder("mid-lead")) }, calls, func() {
					cancel()
					time.Sleep(20 * time.Millisecond) // let the canceled caller return
				})
				if fmt.Sprint(sizes) != "[1 8]" {
					t.Fatalf("flush sizes %v, want [1 8]", sizes)
				}
				if errs[3] != nil && !errors.Is(errs[3], context.Canceled) {
					t.Fatalf("canceled caller: %v", errs[3])
				}
				for i, err := range errs {
					if i == 3 {
						continue
					}
					if err != nil {
						t.Fatalf("create %d: %v", i, err)
					}
					mustGet(t, s, fmt.Sprintf("mid-%d", i))
				}
			})

			t.Run("a batch whose callers all left is cut off, and the store goes on", func(t *testing.T) {
				s := grouped(t, db)
				cctx, cancel := context.WithCancel(ctx)
				errs := make([]error, 4)
				var calls []func()
				succeeded := func(id string) *pay.Order {
					o := newOrder(id)
					o.Status = pay.StatusSucceeded
					return o
				}
				for i := range errs {
					calls = append(calls, func() { errs[i] = s.Finish(cctx, succeeded(fmt.Sprintf("gone-%d", i))) })
				}
				oneBatch(t, s, "finish", func() { _ = s.Finish(ctx, succeeded("gone-lead")) }, calls, func() {
					cancel()
					time.Sleep(20 * time.Millisecond)
				})
				for i, err := range errs {
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("finish %d: %v, want context.Canceled", i, err)
					}
				}
				o := newOrder("gone-after")
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				o.Status = pay.StatusSucceeded
				if err := s.Finish(ctx, o); err != nil {
					t.Fatal(err)
				}
			})

			t.Run("database closed: every caller gets an error", func(t *testing.T) {
				db := open(t)
				s := grouped(t, db)
				o := newOrder("closed-warm")
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				// Hold a batch of each kind, close the pool, let them go.
				var failures atomic.Int64
				check := func(what string, err error) {
					if err == nil || errors.Is(err, pay.ErrDuplicateOrder) || errors.Is(err, pay.ErrOrderNotFound) {
						t.Errorf("%s with the pool closed: %v, want an error", what, err)
					}
					failures.Add(1)
				}
				entered, gate := make(chan struct{}), make(chan struct{})
				var once sync.Once
				repo.SetFlushHook(s, "create", func(n int) {
					once.Do(func() { close(entered); <-gate })
				})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); check("create", s.Create(ctx, newOrder("closed-lead"))) }()
				<-entered
				for i := 0; i < 16; i++ {
					wg.Add(1)
					go func() { defer wg.Done(); check("create", s.Create(ctx, newOrder(fmt.Sprintf("closed-%d", i)))) }()
				}
				waitFor(t, "the creates to queue", func() bool { return repo.Queued(s, "create") == 16 })
				if err := repo.Close(db); err != nil {
					t.Fatal(err)
				}
				close(gate)
				wg.Wait()
				if st := s.Stats().Create; st.Batches != 1 || st.Batched != 16 {
					t.Fatalf("stats %+v, want the 16 creates in one batch", st)
				}
				for i := 0; i < 20; i++ {
					wg.Add(3)
					go func() { defer wg.Done(); check("create", s.Create(ctx, newOrder(fmt.Sprintf("closed-more-%d", i)))) }()
					go func() { defer wg.Done(); o := *o; o.Status = pay.StatusSucceeded; check("finish", s.Finish(ctx, &o)) }()
					go func() { defer wg.Done(); _, err := s.Get(ctx, "closed-warm"); check("get", err) }()
				}
				wg.Wait()
				if failures.Load() != 17+60 {
					t.Fatalf("%d failures, want %d", failures.Load(), 17+60)
				}
			})
		})
	}
}

// TestClosedDatabase: with the pool closed every call fails with an error,
// and none panics (gorm's prepared-statement pool answers QueryRowContext
// with an empty sql.Row when it cannot prepare).
func TestClosedDatabase(t *testing.T) {
	for name, open := range databases() {
		for _, opts := range []repo.OrdersOptions{{}, groupedOptions} {
			t.Run(fmt.Sprintf("%s/%+v", name, opts), func(t *testing.T) {
				ctx := context.Background()
				db := open(t)
				s, err := repo.NewOrdersWithOptions(db, opts)
				if err != nil {
					t.Fatal(err)
				}
				o := newOrder("warm")
				if err := s.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				if err := repo.Close(db); err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{"warm", "never-prepared"} {
					if _, err := s.Get(ctx, id); err == nil || errors.Is(err, pay.ErrOrderNotFound) {
						t.Fatalf("get %s: %v, want an error", id, err)
					}
				}
				if err := s.Create(ctx, newOrder("after")); err == nil || errors.Is(err, pay.ErrDuplicateOrder) {
					t.Fatalf("create: %v, want an error", err)
				}
				o.Status = pay.StatusSucceeded
				if err := s.Finish(ctx, o); err == nil || errors.Is(err, pay.ErrOrderNotFound) {
					t.Fatalf("finish: %v, want an error", err)
				}
			})
		}
	}
}
