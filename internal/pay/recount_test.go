package pay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// hookLimiter wraps the rig's limiter: beforeRelease runs before the first
// Release (a notification arriving between the order's commit and its
// slot's release), fail makes Release fail (the store unreachable), and
// failChecks makes Check fail.
type hookLimiter struct {
	*ratelimit.Limiter
	beforeRelease func()
	fired         atomic.Bool
	fail          atomic.Bool
	failChecks    atomic.Bool
}

func (h *hookLimiter) Check(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	if h.failChecks.Load() {
		return ratelimit.Decision{Key: r.Key}, ratelimit.ErrUnavailable
	}
	return h.Limiter.Check(ctx, r)
}

func (h *hookLimiter) Release(ctx context.Context, hd ratelimit.Hold) error {
	if h.beforeRelease != nil && h.fired.CompareAndSwap(false, true) {
		h.beforeRelease()
	}
	if h.fail.Load() {
		return errors.New("store unreachable")
	}
	return h.Limiter.Release(ctx, hd)
}

// hooked returns a hookLimiter over r's limiter, a ledger on it, and r's
// resolver on both.
func (r *resolverRig) hooked() (*hookLimiter, *pay.Ledger, *pay.Resolver) {
	r.t.Helper()
	hl := &hookLimiter{Limiter: r.lim}
	led, err := pay.NewLedger(r.orders, hl, pay.LedgerOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return hl, led, r.resolverOn(hl, pay.ResolverOptions{Owner: "a", Ledger: led})
}

// TestAReleaseAfterTheRecountCountsItAgain: a channel's word that it paid
// an order closed NOT_SENT lands between the close's commit and its
// slot's release. The word counts the slot again (a duplicate: it is
// still held); the release that follows reads the order and counts it
// again, so the money the channel moved stays counted.
func TestAReleaseAfterTheRecountCountsItAgain(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	lost := r.unknownOrder("closed", 500, false)
	hl, _, res := r.hooked()
	hl.beforeRelease = func() {
		paid := pay.Notification{Channel: "ALIPAY", OrderNo: lost.OrderNo, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T9"}}
		if _, err := res.Notify(context.Background(), paid); err != nil {
			t.Errorf("notify: %v", err)
		}
	}
	if err := res.ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := r.get("closed"); o.Discrepancy == nil {
		t.Fatalf("no discrepancy recorded: %+v", o)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d, want 1: the channel paid under the slot, and the close's release undid the re-count", got)
	}
}

// TestAnOwedReleaseAfterTheRecountCountsItAgain: the close's release
// fails and the ledger owes it; the channel's word that it paid counts the
// slot again; the ledger then makes the release it owed, reads the order,
// and counts the slot again.
func TestAnOwedReleaseAfterTheRecountCountsItAgain(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	lost := r.unknownOrder("closed", 500, false)
	hl, led, res := r.hooked()
	hl.fail.Store(true)
	if err := res.ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := led.Sizes(); s["carry"] != 1 {
		t.Fatalf("ledger %v, want one carry", s)
	}
	hl.fail.Store(false)
	paid := pay.Notification{Channel: "ALIPAY", OrderNo: lost.OrderNo, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T9"}}
	if _, err := res.Notify(context.Background(), paid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { led.Run(ctx); close(done) }()
	deadline := time.Now().Add(3 * time.Second)
	for led.Size() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d, want 1: the ledger's carry released the slot the discrepancy counted again (ledger %v)", got, led.Sizes())
	}
}

// TestARecountTheLimiterFailedIsRepeated: when the limiter fails the
// re-count of a slot a channel reported paid, the notification is
// answered with an error, so the channel repeats its word, and the repeat
// counts the slot. Answered as taken, the count was lost.
func TestARecountTheLimiterFailedIsRepeated(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	lost := r.unknownOrder("closed", 500, false)
	hl, _, res := r.hooked()
	ctx := context.Background()
	if err := res.ResolveOnce(ctx); err != nil {
		t.Fatal(err)
	}
	paid := pay.Notification{Channel: "ALIPAY", OrderNo: lost.OrderNo, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T9"}}
	hl.failChecks.Store(true)
	if _, err := res.Notify(ctx, paid); err == nil {
		t.Fatal("the notification whose re-count failed was answered as taken; want an error, so that the channel repeats it")
	}
	if o := r.get("closed"); o.Discrepancy == nil {
		t.Fatalf("the discrepancy was not recorded: %+v", o)
	}
	hl.failChecks.Store(false)
	if _, err := res.Notify(ctx, paid); err != nil {
		t.Fatalf("the repeat: %v", err)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d after the repeat, want 1", got)
	}
}
