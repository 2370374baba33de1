package pay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/repo/repotest"
	"payserver/internal/testutil"
)

// realStores opens an order store on each database payserver supports:
// real MariaDB and an SQLite file.
func realStores() map[string]func(t *testing.T) *repo.Orders {
	out := map[string]func(t *testing.T) *repo.Orders{}
	for name, open := range repotest.Databases() {
		out[name] = func(t *testing.T) *repo.Orders {
			s, err := repo.NewOrders(open(t))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	return out
}

// errLostConn is what a client sees when the connection breaks after the
// statement was sent: the database may or may not have committed it.
var errLostConn = fmt.Errorf("repo: create order: %w", mysql.ErrInvalidConn)

// faultStore wraps a real order store and injects faults around its calls.
// The database is real; what is injected is the answer the flow sees.
type faultStore struct {
	pay.OrderStore
	// claim, when set, replaces the first Create: real runs the real
	// INSERT with the context given.
	claim   func(ctx context.Context, o *pay.Order, real func(context.Context) error) error
	claimed atomic.Bool
	// down, while set, fails every call with a lost connection before it
	// reaches the database.
	down atomic.Bool
}

func (f *faultStore) Create(ctx context.Context, o *pay.Order) error {
	if f.down.Load() {
		return errLostConn
	}
	if f.claim != nil && f.claimed.CompareAndSwap(false, true) {
		return f.claim(ctx, o, func(c context.Context) error { return f.OrderStore.Create(c, o) })
	}
	return f.OrderStore.Create(ctx, o)
}

func (f *faultStore) Get(ctx context.Context, id string) (*pay.Order, error) {
	if f.down.Load() {
		return nil, fmt.Errorf("repo: get order: %w", mysql.ErrInvalidConn)
	}
	return f.OrderStore.Get(ctx, id)
}

func (f *faultStore) Finish(ctx context.Context, o *pay.Order) error {
	if f.down.Load() {
		return fmt.Errorf("repo: finish order: %w", mysql.ErrInvalidConn)
	}
	return f.OrderStore.Finish(ctx, o)
}

// claimFlow is a payment flow on store with a limit of one payment per
// minute on req's key, so that any slot released by mistake shows.
type claimFlow struct {
	svc *pay.Service
	lim *ratelimit.Limiter
	sim *channel.Simulator
}

func newClaimFlow(t *testing.T, store pay.OrderStore) *claimFlow {
	t.Helper()
	svc, lim, sim := newFlow(t, store, "limits:\n  B:ALIPAY: {limit: 1, window: 1m}\n")
	return &claimFlow{svc: svc, lim: lim, sim: sim}
}

// slotHeld reports whether the key's only slot is still taken: a probe with
// a fresh member is refused.
func (f *claimFlow) slotHeld(t *testing.T) bool {
	t.Helper()
	d, err := f.lim.Allow(context.Background(), req("r1").Key(), testutil.UniqueName("probe"))
	if err != nil {
		t.Fatal(err)
	}
	return !d.Allowed
}

// wantNoRoomFor pays id, a new requestId, on the key whose one slot is
// taken, and fails unless it is refused and the channel was called calls
// times in all.
func (f *claimFlow) wantNoRoomFor(t *testing.T, id string, calls int64) {
	t.Helper()
	_, err := f.svc.Pay(context.Background(), req(id))
	if got := f.sim.Calls(); got != calls {
		t.Errorf("channel calls %d on a limit of 1, want %d: a slot was released under a claim", got, calls)
	}
	if apperr.CodeOf(err) != apperr.RequestLimited {
		t.Errorf("%s on the full key: %v, want REQUEST_LIMITED", id, err)
	}
}

// TestAmbiguousClaim injects each outcome of a claim INSERT that answered
// an error, against real databases, and checks that the flow reads the row
// back instead of guessing: the payment goes on when our claim committed,
// the duplicate's outcome is answered when another request holds the
// requestId, and the limiter slot is kept whenever a channel call may
// happen under it.
func TestAmbiguousClaim(t *testing.T) {
	for name, open := range realStores() {
		t.Run(name, func(t *testing.T) {
			t.Run("committed, but the client saw an error", func(t *testing.T) {
				store := &faultStore{OrderStore: open(t)}
				store.claim = func(ctx context.Context, o *pay.Order, real func(context.Context) error) error {
					if err := real(ctx); err != nil {
						return err
					}
					return errLostConn
				}
				f := newClaimFlow(t, store)
				o, err := f.svc.Pay(context.Background(), req("r1"))
				f.wantNoRoomFor(t, "r2", 1)
				if err != nil || o.Status != pay.StatusSucceeded {
					t.Fatalf("Pay = %v, %v; want the SUCCEEDED order (the claim was committed)", o, err)
				}
				wantStored(t, store, "r1", pay.StateSucceeded)
			})
			t.Run("committed after the claim timed out", func(t *testing.T) {
				store := &faultStore{OrderStore: open(t)}
				store.claim = func(ctx context.Context, o *pay.Order, _ func(context.Context) error) error {
					// The INSERT reaches the database only after the caller's
					// deadline: a late commit nobody waits for.
					// The statement holds its own copy of the row, as the
					// driver's packet does.
					row := *o
					<-ctx.Done()
					go func() {
						time.Sleep(20 * time.Millisecond)
						_ = store.OrderStore.Create(context.Background(), &row)
					}()
					return ctx.Err()
				}
				f := newClaimFlow(t, store)
				o, err := f.svc.Pay(context.Background(), req("r1"))
				time.Sleep(100 * time.Millisecond) // let the late INSERT land
				f.wantNoRoomFor(t, "r2", 1)
				if err != nil || o.Status != pay.StatusSucceeded {
					t.Fatalf("Pay = %v, %v; want the SUCCEEDED order", o, err)
				}
				wantStored(t, store, "r1", pay.StateSucceeded)
			})
			t.Run("a concurrent duplicate holds the requestId", func(t *testing.T) {
				store := &faultStore{OrderStore: open(t)}
				theirs := &pay.Order{
					OrderNo: "PS20260101000000aaaaaaaaaaaa", RequestID: "r1", RequestHash: req("r1").Hash(),
					BizType: "B", Channel: "ALIPAY", MerchantID: "M", Amount: 1, Currency: "CNY",
					Status: pay.StatusProcessing, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(),
				}
				var wg sync.WaitGroup
				t.Cleanup(wg.Wait)
				store.claim = func(ctx context.Context, o *pay.Order, real func(context.Context) error) error {
					// Another instance's request for the same requestId,
					// admitted under the same limiter member, claims first and
					// is calling the channel; our INSERT's answer is lost.
					if err := store.OrderStore.Create(ctx, theirs); err != nil {
						return err
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(100 * time.Millisecond)
						done := *theirs
						done.Status, done.ChannelTradeNo = pay.StatusSucceeded, "T-THEIRS"
						if err := store.OrderStore.Finish(context.Background(), &done); err != nil {
							t.Errorf("finishing the duplicate's order: %v", err)
						}
					}()
					_ = real(ctx) // refused: the requestId is taken
					return errLostConn
				}
				f := newClaimFlow(t, store)
				o, err := f.svc.Pay(context.Background(), req("r1"))
				// The duplicate's call counts in the one slot: r2 has no room.
				f.wantNoRoomFor(t, "r2", 0)
				if err != nil || o.OrderNo != theirs.OrderNo || o.Status != pay.StatusSucceeded {
					t.Fatalf("Pay = %+v, %v; want the duplicate's SUCCEEDED order %s", o, err, theirs.OrderNo)
				}
			})
			t.Run("provably not committed, database answering", func(t *testing.T) {
				store := &faultStore{OrderStore: open(t)}
				store.claim = func(context.Context, *pay.Order, func(context.Context) error) error {
					return fmt.Errorf("repo: create order: %w: dial tcp: connection refused", pay.ErrNotCommitted)
				}
				f := newClaimFlow(t, store)
				o, err := f.svc.Pay(context.Background(), req("r1"))
				if err != nil || o.Status != pay.StatusSucceeded {
					t.Fatalf("Pay = %v, %v; want the SUCCEEDED order (claimed again)", o, err)
				}
				if got := f.sim.Calls(); got != 1 {
					t.Fatalf("channel calls %d, want 1", got)
				}
			})
			t.Run("still unknown: the database stops answering", func(t *testing.T) {
				store := &faultStore{OrderStore: open(t)}
				store.claim = func(ctx context.Context, o *pay.Order, real func(context.Context) error) error {
					if err := real(ctx); err != nil {
						return err
					}
					store.down.Store(true)
					return errLostConn
				}
				f := newClaimFlow(t, store)
				o, err := f.svc.Pay(context.Background(), req("r1"))
				var e *apperr.Error
				if o != nil || !errors.As(err, &e) || e.Code != apperr.DependencyUnavailable || e.Details["orderNo"] != nil {
					t.Fatalf("Pay = %v, %v; want 503 DEPENDENCY_UNAVAILABLE without an orderNo (nothing was sent)", o, err)
				}
				if got := f.sim.Calls(); got != 0 {
					t.Fatalf("channel calls %d, want 0", got)
				}
				if !f.slotHeld(t) {
					t.Fatal("the slot was released while the claim may be committed")
				}
				// The database comes back: the committed, never-sent claim is
				// settled as FAILED NOT_SENT (not left to be swept UNKNOWN),
				// and only then is its slot released.
				store.down.Store(false)
				waitUntil(t, "the abandoned claim to be settled", func() bool {
					got, err := store.Get(context.Background(), "r1")
					return err == nil && pay.StateOf(got) == pay.StateNotSent
				})
				waitUntil(t, "the slot of the settled claim to be released", func() bool { return !f.slotHeld(t) })
				if n, err := f.svc.SweepStale(context.Background()); err != nil || n != 0 {
					t.Fatalf("sweep: %d, %v; want nothing to sweep", n, err)
				}
				o, err = f.svc.Pay(context.Background(), req("r1"))
				if err != nil || pay.StateOf(o) != pay.StateNotSent {
					t.Fatalf("replay = %+v, %v; want the FAILED NOT_SENT order", o, err)
				}
			})
			t.Run("provably not committed, database down", func(t *testing.T) {
				store := &faultStore{OrderStore: open(t)}
				store.claim = func(context.Context, *pay.Order, func(context.Context) error) error {
					store.down.Store(true)
					return fmt.Errorf("repo: create order: %w: dial tcp: connection refused", pay.ErrNotCommitted)
				}
				f := newClaimFlow(t, store)
				begin := time.Now()
				_, err := f.svc.Pay(context.Background(), req("r1"))
				if apperr.CodeOf(err) != apperr.DependencyUnavailable {
					t.Fatalf("err = %v, want DEPENDENCY_UNAVAILABLE", err)
				}
				if d := time.Since(begin); d > 250*time.Millisecond {
					t.Fatalf("answered after %v: nothing can be committed later, so there is nothing to wait for", d)
				}
				// The slot stays: a duplicate of r1 on another instance may be
				// admitted under the same member and be calling the channel.
				if !f.slotHeld(t) {
					t.Fatal("the slot was released although another request may hold the member")
				}
				// A retry of r1 is admitted under the member it already holds.
				store.down.Store(false)
				if o, err := f.svc.Pay(context.Background(), req("r1")); err != nil || o.Status != pay.StatusSucceeded {
					t.Fatalf("retry = %v, %v; want SUCCEEDED under the kept slot", o, err)
				}
			})
		})
	}
}

// wantStored fails unless the stored order of id is in state want.
func wantStored(t *testing.T, s pay.OrderStore, id string, want pay.State) {
	t.Helper()
	got, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("stored %s: %v", id, err)
	}
	if pay.StateOf(got) != want {
		t.Fatalf("stored %s is %s (%s), want %s", id, got.Status, got.FailureCode, want)
	}
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
