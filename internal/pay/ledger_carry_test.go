package pay_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

// outageLimiter is a real limiter whose releases fail while down is set:
// Redis unreachable, or the limiter's breaker open.
type outageLimiter struct {
	*ratelimit.Limiter
	down atomic.Bool
}

var errOutage = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (l *outageLimiter) Release(ctx context.Context, h ratelimit.Hold) error {
	if l.down.Load() {
		return errOutage
	}
	return l.Limiter.Release(ctx, h)
}

func (l *outageLimiter) ReleaseAmount(ctx context.Context, h ratelimit.Hold) error {
	if l.down.Load() {
		return errOutage
	}
	return l.Limiter.ReleaseAmount(ctx, h)
}

// mustLedger is a ledger of releases on lim, kept in dir ("": memory
// only), not run.
func mustLedger(t *testing.T, lim pay.Limiter, dir string) *pay.Ledger {
	t.Helper()
	l, err := pay.NewLedger(paytest.NewMemStore(), lim, pay.LedgerOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// endedOrder is requestID's order on B:ALIPAY, ended status, failureCode.
func endedOrder(requestID string, status pay.Status, failureCode string) *pay.Order {
	return &pay.Order{OrderNo: "O-" + requestID, RequestID: requestID, BizType: "B", Channel: "ALIPAY", Amount: 1, Currency: "CNY",
		Status: status, FailureCode: failureCode}
}

// dayCount is what key's day window holds now.
func dayCount(t *testing.T, lim *ratelimit.Limiter, key ratelimit.Key) int64 {
	t.Helper()
	_, counts, err := lim.Usage(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return counts[0]
}

// TestReleaseFailedInAnOutageIsMadeLater: a payment refused before it was
// sent ends NOT_SENT while the limiter cannot release (an outage of
// 0.6 s). Its day slot is given back once the limiter answers again; only
// logged, the slot would stay held by nobody until the day ended.
func TestReleaseFailedInAnOutageIsMadeLater(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n")
	out := &outageLimiter{Limiter: lim}
	store := paytest.NewMemStore()
	owed, err := pay.NewLedger(store, out, pay.LedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{RefuseRate: 1})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(store, out, reg, pay.Options{Ledger: owed})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	out.down.Store(true)
	o, err := svc.Pay(context.Background(), req("refused"))
	if err != nil || pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("pay: %+v, %v; want FAILED NOT_SENT", o, err)
	}
	if n := dayCount(t, lim, key); n != 1 || owed.Size() != 1 {
		t.Fatalf("in the outage: day window %d, %d owed; want the slot still held and owed", n, owed.Size())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { owed.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond) // a few rounds fail
	out.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for dayCount(t, lim, key) != 0 || owed.Size() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the outage: day window %d, %d owed; want the slot given back", dayCount(t, lim, key), owed.Size())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOwedReleaseSurvivesARestart: a release owed by a process that then
// died is made by the next one (its file in Dir), and the file goes.
func TestOwedReleaseSurvivesARestart(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n")
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	d, err := lim.Check(context.Background(), ratelimit.Request{Key: key, Member: "gone", Amount: 1, Currency: "CNY"})
	if err != nil || !d.Allowed {
		t.Fatalf("check: %+v, %v", d, err)
	}
	dir := t.TempDir()
	out := &outageLimiter{Limiter: lim}
	out.down.Store(true)
	first := mustLedger(t, out, dir)
	first.Settle(context.Background(), d.Hold, nil, endedOrder("gone", pay.StatusFailed, "DECLINED"))
	first.Settle(context.Background(), d.Hold, nil, endedOrder("gone", pay.StatusFailed, pay.FailureNotSent))
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 2 || first.Size() != 2 {
		t.Fatalf("%d files, %d owed; want two (the amounts and the whole release, each made)", len(files), first.Size())
	}
	// The first process dies; the next starts with Redis back.
	second := mustLedger(t, lim, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { second.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if dayCount(t, lim, key) == 0 && len(files) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("day window %d, %d files: want the owed release made by the next run", dayCount(t, lim, key), len(files))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gatedLimiter fails releases while down is set, and holds each release
// that reaches the limiter until gate is closed.
type gatedLimiter struct {
	outageLimiter
	entered chan struct{}
	gate    chan struct{}
}

func (l *gatedLimiter) Release(ctx context.Context, h ratelimit.Hold) error {
	if l.down.Load() {
		return errOutage
	}
	l.entered <- struct{}{}
	<-l.gate
	return l.Limiter.Release(ctx, h)
}

// TestOwedReleaseKeptDuringItsMakingStaysOwed: a release of a slot owed
// again while the worker is making the earlier one (the same slot, the
// limiter failing for the second caller) is not forgotten with the
// earlier one: it is made in its turn. Forgotten, a release that failed
// after the earlier one was made was never made.
func TestOwedReleaseKeptDuringItsMakingStaysOwed(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 5, calendar: day}]\n")
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	g := &gatedLimiter{outageLimiter: outageLimiter{Limiter: lim}, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	g.down.Store(true)
	owed := mustLedger(t, g, "")
	h, ended := ratelimit.HoldOf(key, "m"), endedOrder("m", pay.StatusFailed, pay.FailureNotSent)
	if owed.Settle(context.Background(), h, nil, ended); owed.Size() != 1 {
		t.Fatalf("first release: %d owed", owed.Size())
	}
	g.down.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { owed.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-g.entered // the worker is making the first
	g.down.Store(true)
	owed.Settle(context.Background(), h, nil, ended)
	g.down.Store(false)
	close(g.gate)
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	done = make(chan struct{})
	close(done)
	// The second release is either made (the worker went round again) or
	// still owed; it is never forgotten unmade.
	if owed.Size() == 0 && len(g.entered) == 0 {
		t.Fatal("the release owed during the making of the first was forgotten without being made")
	}
}

// TestOwedOwnKeyReleaseStaysNarrowAfterARestart: a release of a loser's own
// key's windows only (another bizType holds the requestId and counts it in
// the channel-wide windows), owed and read back by the next run, still
// leaves the channel-wide windows. Kept on disk as key, member and window
// names only, it came back widened and took the winner's channel-wide slot.
func TestOwedOwnKeyReleaseStaysNarrowAfterARestart(t *testing.T) {
	lim := localLimiter(t, "limits:\n  P:C1: [{limit: 5, calendar: day}]\n  Q:C1: [{limit: 5, calendar: day}]\n  \"*:C1\": [{limit: 5, calendar: day}]\n")
	ctx := context.Background()
	p, q, wide := ratelimit.Key{BizType: "P", Channel: "C1"}, ratelimit.Key{BizType: "Q", Channel: "C1"}, ratelimit.ChannelWide("C1")
	if d, err := lim.Check(ctx, ratelimit.Request{Key: q, Member: "r", Amount: 1, Currency: "CNY"}); err != nil || !d.Allowed {
		t.Fatalf("the winner: %+v, %v", d, err)
	}
	loser, err := lim.Check(ctx, ratelimit.Request{Key: p, Member: "r", Amount: 1, Currency: "CNY"})
	if err != nil || !loser.Allowed {
		t.Fatalf("the loser: %+v, %v", loser, err)
	}
	dir := t.TempDir()
	out := &outageLimiter{Limiter: lim}
	out.down.Store(true)
	first := mustLedger(t, out, dir)
	winner := &pay.Order{OrderNo: "W", RequestID: "r", BizType: "Q", Channel: "C1", Amount: 1, Currency: "CNY", Status: pay.StatusSucceeded}
	mine := &pay.Order{OrderNo: "L", RequestID: "r", BizType: "P", Channel: "C1", Amount: 1, Currency: "CNY"}
	if d := first.Settle(ctx, loser.Hold, mine, winner); d.Where != pay.OwnKey || first.Size() != 1 {
		t.Fatalf("owed: %+v, %d", d, first.Size())
	}
	second := mustLedger(t, lim, dir)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { second.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for dayCount(t, lim, p) != 0 || second.Size() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("P:C1 holds %d, %d owed: the owed release was not made", dayCount(t, lim, p), second.Size())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := dayCount(t, lim, wide); n != 1 {
		t.Fatalf("*:C1 holds %d after the owed own-key release, want 1: the winner's slot", n)
	}
}
