package pay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// dyingStore is an order store whose Create never commits: the process
// "dies" there, after the limiter admitted the payment and before its
// claim. entered is closed when the first Create starts; Create returns
// (uncommitted) only when the test ends.
type dyingStore struct {
	pay.OrderStore
	once    sync.Once
	entered chan struct{}
	dead    chan struct{}
}

func (s *dyingStore) Create(ctx context.Context, o *pay.Order) error {
	s.once.Do(func() { close(s.entered) })
	<-s.dead
	return pay.ErrNotCommitted
}

// TestAKillBetweenTheCheckAndTheClaimLeavesTheSlotToTheNextRun: a payment
// whose process is killed after the limiter admitted it and before its
// claim is committed leaves no order and has answered nothing. The next
// run finds it in the ledger's directory and, its client not having
// retried within the grace, closes it NOT_SENT and releases its slot.
// Kept nowhere, such a slot would stay held by nobody until its window
// passed (a day window: until the next day).
func TestAKillBetweenTheCheckAndTheClaimLeavesTheSlotToTheNextRun(t *testing.T) {
	for _, routed := range []bool{false, true} {
		name := "pinned"
		if routed {
			name = "routed"
		}
		t.Run(name, func(t *testing.T) {
			lim := localLimiter(t, "routes:\n  B: [ALIPAY, WECHAT]\nlimits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n  B:WECHAT: [{limit: 5, calendar: day}]\n")
			mem := paytest.NewMemStore()
			dir := filepath.Join(t.TempDir(), "ledger") // made by NewLedger
			dying := &dyingStore{OrderStore: mem, entered: make(chan struct{}), dead: make(chan struct{})}
			first, err := pay.NewLedger(dying, lim, pay.LedgerOptions{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			ali, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
			wx, _ := channel.NewSimulator("WECHAT", channel.SimulatorConfig{})
			reg, _ := channel.NewRegistry(ali, wx)
			opts := pay.Options{Ledger: first}
			if routed {
				opts.Routes = staticRoutes{lim}
			}
			svc, err := pay.NewService(dying, lim, reg, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := req("killed")
			if routed {
				r.Channel = ""
			}
			answered := make(chan error, 1)
			go func() { _, err := svc.Pay(context.Background(), r); answered <- err }()
			t.Cleanup(func() { close(dying.dead); <-answered })
			<-dying.entered
			key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
			if got := dayCount(t, lim, key); got != 1 {
				t.Fatalf("the day window holds %d before the claim, want the admitted payment's 1", got)
			}
			// The process dies here; the next run starts on the same
			// directory and the same databases.
			second, err := pay.NewLedger(mem, lim, pay.LedgerOptions{Dir: dir, Grace: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if second.Size() == 0 {
				t.Fatal("the next run's ledger keeps nothing: the admitted slot has no owner")
			}
			runUntil(t, second, func() bool { return dayCount(t, lim, key) == 0 && second.Size() == 0 })
			o, err := mem.Get(context.Background(), "killed")
			if err != nil || pay.StateOf(o) != pay.StateNotSent {
				t.Fatalf("the killed payment's order: %+v, %v; want FAILED NOT_SENT", o, err)
			}
			if ali.Calls()+wx.Calls() != 0 {
				t.Fatalf("%d channel calls, want none", ali.Calls()+wx.Calls())
			}
		})
	}
}

// ledgeredService is a pay service on lim and a memory order store, with a
// ledger in a directory of its own (returned) and a simulated ALIPAY.
func ledgeredService(t *testing.T, lim *ratelimit.Limiter) (*pay.Service, *paytest.MemStore, string) {
	t.Helper()
	mem := paytest.NewMemStore()
	dir := t.TempDir()
	l, err := pay.NewLedger(mem, lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(mem, lim, reg, pay.Options{Ledger: l})
	if err != nil {
		t.Fatal(err)
	}
	return svc, mem, dir
}

// TestAnAdmissionInFlightLeavesNothingBehind: a payment that ends (paid,
// refused) removes what it kept on disk while its admission was in flight;
// a refused one has nothing for the next run to close.
func TestAnAdmissionInFlightLeavesNothingBehind(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 1, calendar: day}]\n")
	svc, mem, dir := ledgeredService(t, lim)
	if o, err := svc.Pay(context.Background(), req("paid")); err != nil || o.Status != pay.StatusSucceeded {
		t.Fatalf("paid: %+v, %v", o, err)
	}
	if _, err := svc.Pay(context.Background(), req("refused")); apperr.CodeOf(err) != apperr.RequestLimited {
		t.Fatalf("refused: %v, want REQUEST_LIMITED", err)
	}
	next, err := pay.NewLedger(mem, lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if next.Size() != 0 {
		t.Fatalf("the next run keeps %d entries, want none", next.Size())
	}
	if _, err := mem.Get(context.Background(), "refused"); !errors.Is(err, pay.ErrOrderNotFound) {
		t.Fatalf("the refused payment has an order (%v)", err)
	}
}

// committedThenDyingStore commits the claim, then the process "dies"
// before Create returns: the file of the admission in flight is left
// behind with a PROCESSING claim whose channel call may follow.
type committedThenDyingStore struct{ dyingStore }

func (s *committedThenDyingStore) Create(ctx context.Context, o *pay.Order) error {
	if err := s.OrderStore.Create(ctx, o); err != nil {
		return err
	}
	return s.dyingStore.Create(ctx, o)
}

// TestAFileLeftAfterTheClaimNeverClosesTheClaim: killed right after its
// claim committed, a payment leaves its admission's file; the next run
// must not end that claim NOT_SENT (the channel may have been called under
// it): the slot follows the claim, kept while it is in flight.
func TestAFileLeftAfterTheClaimNeverClosesTheClaim(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n")
	mem := paytest.NewMemStore()
	dir := t.TempDir()
	dying := &committedThenDyingStore{dyingStore{OrderStore: mem, entered: make(chan struct{}), dead: make(chan struct{})}}
	first, err := pay.NewLedger(dying, lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(dying, lim, reg, pay.Options{Ledger: first})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() { _, err := svc.Pay(context.Background(), req("claimed")); answered <- err }()
	t.Cleanup(func() { close(dying.dead); <-answered })
	<-dying.entered
	second, err := pay.NewLedger(mem, lim, pay.LedgerOptions{Dir: dir, Grace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { second.Run(ctx); close(done) }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	o, err := mem.Get(context.Background(), "claimed")
	if err != nil || o.Status != pay.StatusProcessing {
		t.Fatalf("the claim: %+v, %v; want it left PROCESSING for the sweeper and the resolver", o, err)
	}
	if got := dayCount(t, lim, ratelimit.Key{BizType: "B", Channel: "ALIPAY"}); got != 1 {
		t.Fatalf("the day window holds %d, want the claim's slot kept", got)
	}
}

// TestANearCacheRefusalKeepsNothingOnDisk: a payment is kept in the log of
// admissions in flight only once the limiter can hold a slot for it. A 429
// the near-cache answers (the key known full) holds nothing, so it writes
// nothing; the refusal that filled the near-cache came from Redis, which
// could have admitted it, so it was kept (and removed).
func TestANearCacheRefusalKeepsNothingOnDisk(t *testing.T) {
	c := testutil.MustRedis(t)
	s, err := redisstore.New(c, redisstore.Options{Prefix: "test:nearlog:" + testutil.UniqueName("") + ":"})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.New(s, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	setDoc(t, lim, "limits:\n  B:ALIPAY: [{limit: 1, window: 1h}]\n")
	svc, _, dir := ledgeredService(t, lim)
	logSize := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, "inflight.log"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	if o, err := svc.Pay(context.Background(), req("paid")); err != nil || o.Status != pay.StatusSucceeded {
		t.Fatalf("paid: %+v, %v", o, err)
	}
	before := logSize()
	if _, err := svc.Pay(context.Background(), req("from-redis")); apperr.CodeOf(err) != apperr.RequestLimited {
		t.Fatalf("from-redis: %v, want REQUEST_LIMITED", err)
	}
	if logSize() == before {
		t.Fatal("the refusal Redis answered was not kept while in flight: Redis could have admitted it")
	}
	before = logSize()
	for i := range 20 {
		if _, err := svc.Pay(context.Background(), req(fmt.Sprint("near-", i))); apperr.CodeOf(err) != apperr.RequestLimited {
			t.Fatalf("near-%d: %v, want REQUEST_LIMITED", i, err)
		}
	}
	if grew := logSize() - before; grew != 0 {
		t.Fatalf("20 refusals from the near-cache wrote %d bytes to the log of admissions in flight, want none", grew)
	}
}
