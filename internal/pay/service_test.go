package pay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

func newFlow(t *testing.T, store pay.OrderStore, doc string) (*pay.Service, *ratelimit.Limiter, *channel.Simulator) {
	t.Helper()
	lim := localLimiter(t, doc)
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(store, lim, reg, pay.Options{ChannelTimeout: 200 * time.Millisecond, ClaimTimeout: 200 * time.Millisecond,
		Ledger: runLedger(t, store, lim, pay.LedgerOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	return svc, lim, sim
}

// runLedger starts a ledger of store's slots on lim for the test, and
// stops it (waiting for its workers) when the test ends.
func runLedger(t *testing.T, store pay.OrderStore, lim pay.Limiter, opts pay.LedgerOptions) *pay.Ledger {
	t.Helper()
	s, err := pay.NewLedger(store, lim, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return s
}

// localLimiter is an in-process limiter with doc in force. Without the
// near-cache: its refusals do not look at members, and tests probe windows
// with members of their own.
func localLimiter(t *testing.T, doc string) *ratelimit.Limiter {
	t.Helper()
	lim, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	setDoc(t, lim, doc)
	return lim
}

func req(id string) pay.PayRequest {
	return pay.PayRequest{RequestID: id, BizType: "B", Channel: "ALIPAY", MerchantID: "M", Amount: 1, Currency: "CNY"}
}

// TestFailedClaimKeepsTheSlotForItsRetry: a claim that failed without
// proof that nothing was committed keeps its limiter slot (another request
// with the same requestId may hold the member), and the retry of that
// requestId is admitted under it without taking a second slot.
func TestFailedClaimKeepsTheSlotForItsRetry(t *testing.T) {
	store := paytest.NewMemStore()
	svc, _, sim := newFlow(t, store, "limits:\n  B:ALIPAY: 1\n")
	store.SetFailures(errors.New("connection refused"), nil)
	_, err := svc.Pay(context.Background(), req("r1"))
	if apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("err = %v, want DEPENDENCY_UNAVAILABLE", err)
	}
	store.SetFailures(nil, nil)
	if _, err := svc.Pay(context.Background(), req("r2")); apperr.CodeOf(err) != apperr.RequestLimited {
		t.Fatalf("r2 = %v, want REQUEST_LIMITED: the failed claim's slot is kept", err)
	}
	if o, err := svc.Pay(context.Background(), req("r1")); err != nil || o.Status != pay.StatusSucceeded {
		t.Fatalf("retry of r1 = %v, %v; want SUCCEEDED under its kept slot", o, err)
	}
	if sim.Calls() != 1 {
		t.Fatalf("channel calls %d, want 1", sim.Calls())
	}
}

func TestUnrecordedOutcomeIsNotASuccess(t *testing.T) {
	store := paytest.NewMemStore()
	svc, _, _ := newFlow(t, store, "limits:\n  B:ALIPAY: 5\n")
	store.SetFailures(nil, errors.New("connection refused"))
	o, err := svc.Pay(context.Background(), req("r1"))
	if o != nil || apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("got %v, %v; want no order and DEPENDENCY_UNAVAILABLE", o, err)
	}
	var e *apperr.Error
	errors.As(err, &e)
	if e.Details["status"] != "UNKNOWN" || e.Details["orderNo"] == "" {
		t.Fatalf("details %v do not report the outcome as unknown with the order", e.Details)
	}
}

func TestDuplicateClaimDoesNotReleaseTheWinnersSlot(t *testing.T) {
	store := paytest.NewMemStore()
	svc, lim, _ := newFlow(t, store, "limits:\n  B:ALIPAY: 1\n")
	// Simulate the race: r1 is claimed by a concurrent request whose outcome
	// is recorded a little later.
	_ = store.Create(context.Background(), &pay.Order{RequestID: "r1", RequestHash: req("r1").Hash(), Status: pay.StatusProcessing})
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = store.Finish(context.Background(), &pay.Order{RequestID: "r1", RequestHash: req("r1").Hash(), Status: pay.StatusSucceeded})
	}()
	if _, err := lim.Allow(context.Background(), req("r1").Key(), "r1"); err != nil {
		t.Fatal(err)
	}
	o, err := svc.Pay(context.Background(), req("r1"))
	if err != nil || o.Status != pay.StatusSucceeded {
		t.Fatalf("duplicate: %v %v, want the winner's SUCCEEDED order", o, err)
	}
	if d, _ := lim.Allow(context.Background(), req("r2").Key(), "r2"); d.Allowed {
		t.Fatal("the winner's slot was released by the duplicate")
	}
}

// lateCommitStore commits the first Finish but answers it with a deadline
// error, as a batched statement that outlived its caller's deadline does.
type lateCommitStore struct {
	*paytest.MemStore
	finishes int
}

func (s *lateCommitStore) Finish(ctx context.Context, o *pay.Order) error {
	s.finishes++
	err := s.MemStore.Finish(ctx, o)
	if s.finishes == 1 && err == nil {
		return context.DeadlineExceeded
	}
	return err
}

// TestOutcomeCommittedLateIsASuccess: the retry of an outcome whose first
// attempt was committed after its caller gave up finds nothing to update;
// the flow must see that the stored outcome is its own and answer it, not
// report the payment as unrecorded.
func TestOutcomeCommittedLateIsASuccess(t *testing.T) {
	store := &lateCommitStore{MemStore: paytest.NewMemStore()}
	svc, _, sim := newFlow(t, store, "limits:\n  B:ALIPAY: 5\n")
	o, err := svc.Pay(context.Background(), req("r1"))
	if err != nil || o.Status != pay.StatusSucceeded {
		t.Fatalf("got %v, %v; want the SUCCEEDED order", o, err)
	}
	if store.finishes != 2 || sim.Calls() != 1 {
		t.Fatalf("finishes %d, channel calls %d; want 2 and 1", store.finishes, sim.Calls())
	}
	got, err := svc.Get(context.Background(), "r1")
	if err != nil || got.Status != pay.StatusSucceeded {
		t.Fatalf("stored %v, %v", got, err)
	}
}

// slowClaimStore takes a while to claim and honours its context, as a
// database statement does.
type slowClaimStore struct{ *paytest.MemStore }

func (s slowClaimStore) Create(ctx context.Context, o *pay.Order) error {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.MemStore.Create(ctx, o)
}

// TestClientLeavingMidClaimStillPays: the claim is detached from the
// caller's cancellation like the channel call, so a client that leaves
// while its claim is being written does not leave the claim half-decided:
// the payment goes through and is recorded.
func TestClientLeavingMidClaimStillPays(t *testing.T) {
	store := slowClaimStore{paytest.NewMemStore()}
	svc, _, sim := newFlow(t, store, "limits:\n  B:ALIPAY: 5\n")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	_, _ = svc.Pay(ctx, req("r1"))
	got, err := svc.Get(context.Background(), "r1")
	if err != nil || got.Status != pay.StatusSucceeded || sim.Calls() != 1 {
		t.Fatalf("stored %v, %v after %d channel calls; want SUCCEEDED after 1", got, err, sim.Calls())
	}
}
