package pay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/pay"
)

// discrepancyCount records the discrepancies a resolver reports.
type discrepancyCount struct {
	mu    sync.Mutex
	count map[string]int
}

func (d *discrepancyCount) Resolved(string, string, pay.State) {}
func (d *discrepancyCount) Queried(string, string, string)     {}
func (d *discrepancyCount) Unresolved(int64, time.Duration)    {}
func (d *discrepancyCount) Discrepancy(channel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.count == nil {
		d.count = map[string]int{}
	}
	d.count[channel]++
}

// TestANotificationContradictingAFinalOrderIsRecorded: a channel that
// notifies SUCCEEDED for an order closed NOT_SENT broke its close
// guarantee and moved money. The order stays final, but the contradiction
// is recorded on it, reported, and its slot counts again: money moved
// under it. Taken silently, nothing showed that the channel paid an order
// payserver had given up.
func TestANotificationContradictingAFinalOrderIsRecorded(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	lost := r.unknownOrder("closed", 500, false)
	obs := &discrepancyCount{}
	res := r.resolverWith("a", obs)
	ctx := context.Background()
	if err := res.ResolveOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if o := r.get("closed"); pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("the order: %+v, want NOT_SENT by close", o)
	}
	if got := r.used(0); got != 0 {
		t.Fatalf("count window holds %d after the close, want 0", got)
	}
	paid := pay.Notification{Channel: "ALIPAY", OrderNo: lost.OrderNo, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T9"}}
	if _, err := res.Notify(ctx, paid); err != nil {
		t.Fatalf("the contradicting notification: %v", err)
	}
	o := r.get("closed")
	if pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("a final order changed: %+v", o)
	}
	if o.Discrepancy == nil || o.Discrepancy.Channel != "ALIPAY" || o.Discrepancy.Reported != "SUCCEEDED" || o.Discrepancy.At.IsZero() {
		t.Fatalf("the order's discrepancy: %+v, want ALIPAY reported SUCCEEDED", o.Discrepancy)
	}
	if n := obs.count["ALIPAY"]; n != 1 {
		t.Fatalf("%d discrepancies reported on ALIPAY, want 1", n)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d, want 1: the channel paid under the slot", got)
	}
	if got := r.used(1); got != 500 {
		t.Fatalf("amount window holds %d, want 500", got)
	}
	// The same word again is the same discrepancy; a notification that
	// agrees with a final order is none.
	if _, err := res.Notify(ctx, paid); err != nil {
		t.Fatal(err)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d after the repeat, want 1", got)
	}
	ok := r.unknownOrder("ok", 100, true)
	if err := res.ResolveOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Notify(ctx, pay.Notification{Channel: "ALIPAY", OrderNo: ok.OrderNo, Result: channel.Result{Status: channel.Succeeded}}); err != nil {
		t.Fatal(err)
	}
	if o := r.get("ok"); o.Discrepancy != nil {
		t.Fatalf("an agreeing notification recorded %+v", o.Discrepancy)
	}
	if n := obs.count["ALIPAY"]; n != 1 {
		t.Fatalf("%d discrepancies reported on ALIPAY, want 1 (a repeat of the same order's and an agreeing word count none)", n)
	}
}

// TestADiscrepancyCountsInAFullWindow: a channel that reports paid an
// order payserver had closed moved money under a slot given back when the
// order ended. The slot counts again even where the windows filled since:
// the money moved whatever the limits say now, and the channel counts it.
func TestADiscrepancyCountsInAFullWindow(t *testing.T) {
	r := newResolverRig(t, "limits:\n  B:ALIPAY: [{limit: 1, window: 1h}, {amount: 1000, calendar: day, currency: CNY}]\n")
	lost := r.unknownOrder("closed", 500, false)
	res := r.resolver("a")
	ctx := context.Background()
	if err := res.ResolveOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if o := r.get("closed"); pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("the order: %+v, want NOT_SENT by close", o)
	}
	r.unknownOrder("filler", 800, true) // the windows fill after the close
	paid := pay.Notification{Channel: "ALIPAY", OrderNo: lost.OrderNo, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T9"}}
	if _, err := res.Notify(ctx, paid); err != nil {
		t.Fatalf("the contradicting notification: %v", err)
	}
	if got := r.used(0); got != 2 {
		t.Fatalf("count window holds %d, want 2 (over its limit of 1): the channel paid under the closed order's slot", got)
	}
	if got := r.used(1); got != 1300 {
		t.Fatalf("amount window holds %d, want 1300 (over its cap of 1000)", got)
	}
}
