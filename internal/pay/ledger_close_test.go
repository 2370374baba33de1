package pay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

// lossyLimiter records every check in a real limiter, but loses the answer
// while lose is set (as a Redis call that timed out after the script ran).
type lossyLimiter struct {
	*ratelimit.Limiter
	mu   sync.Mutex
	lose bool
}

func (l *lossyLimiter) Check(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	d, err := l.Limiter.Check(ctx, r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose && err == nil {
		// As the limiter answers a lost call: the slot it may have taken.
		return ratelimit.Decision{Key: r.Key, Unknown: true, Source: ratelimit.SourceLocal, Hold: d.Hold}, nil
	}
	return d, err
}

func (l *lossyLimiter) setLose(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose = v
}

// TestLostAnswerWithoutRetryFreesItsSlot: a payment whose limiter answer
// was lost (503) took a slot after all. Not retried, it is closed NOT_SENT
// after the grace and its slot released, so the day's cap is not short of
// it; retried in time, its order owns the slot and nothing is released.
func TestLostAnswerWithoutRetryFreesItsSlot(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 2, calendar: day}]\n")
	lossy := &lossyLimiter{Limiter: lim}
	store := paytest.NewMemStore()
	lost, err := pay.NewLedger(store, lossy, pay.LedgerOptions{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { lost.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(store, lossy, reg, pay.Options{Ledger: lost})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	lossy.setLose(true)
	for _, id := range []string{"gone", "retried"} {
		if _, err := svc.Pay(context.Background(), req(id)); apperr.CodeOf(err) != apperr.DependencyUnavailable {
			t.Fatalf("%s with the answer lost: %v, want DEPENDENCY_UNAVAILABLE", id, err)
		}
	}
	lossy.setLose(false)
	if o, err := svc.Pay(context.Background(), req("retried")); err != nil || o.Status != pay.StatusSucceeded {
		t.Fatalf("retry: %v, %v", o, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := store.Get(context.Background(), "gone")
		if err == nil {
			if o.Status != pay.StatusFailed || o.FailureCode != pay.FailureNotSent {
				t.Fatalf("the lost payment was closed %s %s, want FAILED NOT_SENT", o.Status, o.FailureCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lost payment was never closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if _, counts, _ := lim.Usage(context.Background(), key); counts[0] == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, counts, _ := lim.Usage(context.Background(), key); counts[0] != 1 {
		t.Fatalf("the day window holds %d, want 1: the retried payment's slot, not the closed one's", counts[0])
	}
	if o, _ := svc.Pay(context.Background(), req("gone")); o == nil || o.Status != pay.StatusFailed {
		t.Fatalf("a late retry of the closed payment: %+v, want its FAILED NOT_SENT outcome", o)
	}
	if sim.Calls() != 1 {
		t.Errorf("%d channel calls, want 1", sim.Calls())
	}
}

// TestLostAnswerFreesItsSlotAfterALimitsChange: the day window a lost
// answer's call took a slot in is freed even though the document in force
// when the grace ends names another day (its cut-off moved). Released from
// the windows the limits give the key then, the slot would stay for the
// rest of the day.
func TestLostAnswerFreesItsSlotAfterALimitsChange(t *testing.T) {
	const midnight, noon = "limits:\n  B:ALIPAY: [{limit: 2, calendar: day}]\n", "limits:\n  B:ALIPAY: [{limit: 2, calendar: day, cutoff: \"12:00\"}]\n"
	lim := localLimiter(t, midnight)
	store := paytest.NewMemStore()
	lost := loseAnAnswer(t, lim, store, "")
	setDoc(t, lim, noon)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { lost.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if o, err := store.Get(context.Background(), "gone"); err == nil && o.FailureCode == pay.FailureNotSent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lost payment was never closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	setDoc(t, lim, midnight)
	if _, counts, _ := lim.Usage(context.Background(), ratelimit.Key{BizType: "B", Channel: "ALIPAY"}); counts[0] != 0 {
		t.Fatalf("the midnight day window still holds %d, want 0: the lost call's slot was not freed", counts[0])
	}
}

// TestFailedClaimNotRetriedFreesItsSlot: the database refused a claim
// (nothing committed): 503, the slot kept for a retry. Not retried within
// the grace, the payment is closed FAILED NOT_SENT and its slot released,
// so a day window is not short of it until the day ends.
func TestFailedClaimNotRetriedFreesItsSlot(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 2, calendar: day}]\n")
	store := paytest.NewMemStore()
	lost, err := pay.NewLedger(store, lim, pay.LedgerOptions{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { lost.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(store, lim, reg, pay.Options{Ledger: lost, ClaimTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	store.SetFailures(fmt.Errorf("connection refused: %w", pay.ErrNotCommitted), nil)
	if _, err := svc.Pay(context.Background(), req("refused")); apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("claim refused: %v, want DEPENDENCY_UNAVAILABLE", err)
	}
	store.SetFailures(nil, nil)
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := store.Get(context.Background(), "refused")
		_, counts, _ := lim.Usage(context.Background(), key)
		if err == nil && o.FailureCode == pay.FailureNotSent && counts[0] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %+v (%v), day window %v: want FAILED NOT_SENT and the slot released", o, err, counts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sim.Calls() != 0 {
		t.Errorf("%d channel calls, want none", sim.Calls())
	}
}

// TestLostAnswerSurvivesARestart: a lost answer queued by one run whose
// process then died is settled by the next run (its file in Dir): closed
// NOT_SENT and its slot released. Kept in memory only, its day slot would
// stay until the day ended (an instance killed within the grace).
func TestLostAnswerSurvivesARestart(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 2, calendar: day}]\n")
	store := paytest.NewMemStore()
	dir := t.TempDir()
	loseAnAnswer(t, lim, store, dir)
	// The first run never ran: the process died within the grace.
	second, err := pay.NewLedger(store, lim, pay.LedgerOptions{Grace: 50 * time.Millisecond, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { second.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := store.Get(context.Background(), "gone")
		_, counts, _ := lim.Usage(context.Background(), key)
		if err == nil && o.FailureCode == pay.FailureNotSent && counts[0] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %+v (%v), day window %v: want FAILED NOT_SENT and the slot released by the next run", o, err, counts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the settled lost answer's file is still there")
}

// loseAnAnswer pays "gone" through a limiter whose answer is lost (a 503),
// with a Ledger keeping its entries in dir ("": memory only), not yet
// run; it returns that Ledger.
func loseAnAnswer(t *testing.T, lim *ratelimit.Limiter, store pay.OrderStore, dir string) *pay.Ledger {
	t.Helper()
	lossy := &lossyLimiter{Limiter: lim}
	lost, err := pay.NewLedger(store, lossy, pay.LedgerOptions{Grace: 50 * time.Millisecond, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(store, lossy, reg, pay.Options{Ledger: lost})
	if err != nil {
		t.Fatal(err)
	}
	lossy.setLose(true)
	if _, err := svc.Pay(context.Background(), req("gone")); apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("the answer lost: %v, want DEPENDENCY_UNAVAILABLE", err)
	}
	return lost
}

// TestLostAnswerWaitsForAWinnerInFlightElsewhere: a lost answer on one
// channel whose requestId is claimed by a duplicate pinned to another
// channel, still in flight when the grace ends, waits for that order's
// fate: once it ends on the other channel, the lost call's slot is
// released. Settled while the winner was in flight, the slot was kept
// (its fate was "wait") and forgotten: a day cap lost it until midnight.
func TestLostAnswerWaitsForAWinnerInFlightElsewhere(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:CA: [{limit: 5, calendar: day}]\n  B:CB: [{limit: 5, calendar: day}]\n")
	store := paytest.NewMemStore()
	lost, err := pay.NewLedger(store, lim, pay.LedgerOptions{Grace: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ca := ratelimit.Key{BizType: "B", Channel: "CA"}
	d, err := lim.Check(ctx, ratelimit.Request{Key: ca, Member: "dup", Amount: 7, Currency: "CNY"})
	if err != nil || !d.Allowed {
		t.Fatalf("the lost call's slot: %+v, %v", d, err)
	}
	now := time.Now().UTC()
	winner := &pay.Order{OrderNo: "W1", RequestID: "dup", RequestHash: "w", BizType: "B", Channel: "CB", MerchantID: "M",
		Amount: 7, Currency: "CNY", Status: pay.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, winner); err != nil {
		t.Fatal(err)
	}
	lost.AddLostAnswer(pay.PayRequest{RequestID: "dup", BizType: "B", Channel: "CA", MerchantID: "M", Amount: 7, Currency: "CNY"}, d.Hold)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { lost.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(200 * time.Millisecond) // past the grace, the winner still in flight
	winner.Status, winner.ChannelTradeNo = pay.StatusSucceeded, "T1"
	if err := store.Finish(ctx, winner); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, counts, err := lim.Usage(ctx, ca)
		if err == nil && counts[0] == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CA's day window holds %v (%v), want 0: the winner ended on CB, no call can follow on CA", counts, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLostAnswerWaitingElsewhereHoldsUpNoOther: a lost answer whose fate
// waits on an order in flight becomes a watched slot, and the lost answers
// behind it are closed at once. Waited for in the worker that closed it,
// it held up every one behind it for minutes.
func TestLostAnswerWaitingElsewhereHoldsUpNoOther(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:CA: [{limit: 5, calendar: day}]\n  B:CB: [{limit: 5, calendar: day}]\n")
	store := paytest.NewMemStore()
	lost, err := pay.NewLedger(store, lim, pay.LedgerOptions{Grace: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ca := ratelimit.Key{BizType: "B", Channel: "CA"}
	first, err := lim.Check(ctx, ratelimit.Request{Key: ca, Member: "dup", Amount: 7, Currency: "CNY"})
	if err != nil || !first.Allowed {
		t.Fatalf("the first lost call's slot: %+v, %v", first, err)
	}
	second, err := lim.Check(ctx, ratelimit.Request{Key: ca, Member: "alone", Amount: 7, Currency: "CNY"})
	if err != nil || !second.Allowed {
		t.Fatalf("the second lost call's slot: %+v, %v", second, err)
	}
	now := time.Now().UTC()
	winner := &pay.Order{OrderNo: "W1", RequestID: "dup", RequestHash: "w", BizType: "B", Channel: "CB", MerchantID: "M",
		Amount: 7, Currency: "CNY", Status: pay.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, winner); err != nil {
		t.Fatal(err)
	}
	lost.AddLostAnswer(pay.PayRequest{RequestID: "dup", BizType: "B", Channel: "CA", MerchantID: "M", Amount: 7, Currency: "CNY"}, first.Hold)
	lost.AddLostAnswer(pay.PayRequest{RequestID: "alone", BizType: "B", Channel: "CA", MerchantID: "M", Amount: 7, Currency: "CNY"}, second.Hold)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { lost.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if o, err := store.Get(ctx, "alone"); err == nil && pay.StateOf(o) == pay.StateNotSent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lost answer behind one waiting on an order in flight was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	winner.Status, winner.ChannelTradeNo = pay.StatusSucceeded, "T1"
	if err := store.Finish(ctx, winner); err != nil {
		t.Fatal(err)
	}
	for {
		if _, counts, err := lim.Usage(ctx, ca); err == nil && counts[0] == 0 {
			return
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("CA's day window still holds a slot after the winner ended on CB")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
