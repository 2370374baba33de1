package pay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
)

// resolverRig is a resolver on a real SQLite order store, a real
// in-process limiter and a simulated channel that counts its lookups.
type resolverRig struct {
	t      *testing.T
	orders *repo.Orders
	lim    *ratelimit.Limiter
	sim    *countingSim
	now    time.Time
}

// countingSim is a simulator that counts queries and closes.
type countingSim struct {
	*channel.Simulator
	queries, closes atomic.Int64
}

func (c *countingSim) Query(ctx context.Context, r channel.Request) (channel.Result, error) {
	c.queries.Add(1)
	return c.Simulator.Query(ctx, r)
}

func (c *countingSim) Close(ctx context.Context, r channel.Request) (channel.CloseResult, error) {
	c.closes.Add(1)
	return c.Simulator.Close(ctx, r)
}

func newResolverRig(t *testing.T, limits string) *resolverRig {
	t.Helper()
	ctx := context.Background()
	db, err := repo.Open(ctx, repo.OpenOptions{Driver: repo.SQLite, DSN: filepath.Join(t.TempDir(), "p.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = repo.Close(db) })
	if _, err := repo.Migrate(ctx, db, repo.SQLite); err != nil {
		t.Fatal(err)
	}
	orders, err := repo.NewOrdersWithOptions(db, repo.OrdersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lim := localLimiter(t, limits)
	sim, err := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &resolverRig{t: t, orders: orders, lim: lim, sim: &countingSim{Simulator: sim}, now: time.Now()}
}

func (r *resolverRig) resolver(owner string) *pay.Resolver {
	r.t.Helper()
	return r.resolverWith(owner, nil)
}

func (r *resolverRig) resolverWith(owner string, obs pay.ResolveObserver) *pay.Resolver {
	r.t.Helper()
	return r.resolverOn(r.lim, pay.ResolverOptions{Owner: owner, Observer: obs})
}

// resolverOn is a resolver of the rig's orders and channel on lim, with
// opts and millisecond backoffs.
func (r *resolverRig) resolverOn(lim pay.Limiter, opts pay.ResolverOptions) *pay.Resolver {
	r.t.Helper()
	reg, err := channel.NewRegistry(r.sim)
	if err != nil {
		r.t.Fatal(err)
	}
	opts.Backoff, opts.MaxBackoff = time.Millisecond, time.Millisecond
	res, err := pay.NewResolver(r.orders, lim, reg, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

// unknownOrder stores an UNKNOWN order that holds a slot of amount on
// B:ALIPAY; sent says whether the channel processed it (its answer lost).
func (r *resolverRig) unknownOrder(id string, amount int64, sent bool) *pay.Order {
	r.t.Helper()
	ctx := context.Background()
	d, err := r.lim.Check(ctx, ratelimit.Request{Key: ratelimit.Key{BizType: "B", Channel: "ALIPAY"}, Member: id, Amount: amount, Currency: "CNY"})
	if err != nil || !d.Allowed {
		r.t.Fatalf("slot for %s: %+v %v", id, d, err)
	}
	now := time.Now().UTC()
	o := &pay.Order{OrderNo: "O" + id, RequestID: id, RequestHash: "h", BizType: "B", Channel: "ALIPAY",
		MerchantID: "m", Amount: amount, Currency: "CNY", Status: pay.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if err := r.orders.Create(ctx, o); err != nil {
		r.t.Fatal(err)
	}
	if sent {
		if _, err := r.sim.Pay(ctx, channel.Request{OrderNo: o.OrderNo, RequestID: id, Amount: amount, Currency: "CNY"}); err != nil {
			r.t.Fatal(err)
		}
	}
	o.Status, o.FailureCode = pay.StatusUnknown, "CHANNEL_TIMEOUT"
	if err := r.orders.Finish(ctx, o); err != nil {
		r.t.Fatal(err)
	}
	return o
}

func (r *resolverRig) get(id string) *pay.Order {
	r.t.Helper()
	o, err := r.orders.Get(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return o
}

func (r *resolverRig) used(window int) int64 {
	r.t.Helper()
	_, u, err := r.lim.Usage(context.Background(), ratelimit.Key{BizType: "B", Channel: "ALIPAY"})
	if err != nil {
		r.t.Fatal(err)
	}
	return u[window]
}

const resolverLimits = "limits:\n  B:ALIPAY: [{limit: 100, window: 1h}, {amount: 100000, calendar: day, currency: CNY}]\n"

// TestResolverEndsUnknownOrdersAsTheChannelSays: an UNKNOWN order the
// channel processed ends SUCCEEDED by query and keeps its slot; one it
// never saw is closed, ends NOT_SENT by close and its slot is released,
// and the channel then refuses to process it ever.
func TestResolverEndsUnknownOrdersAsTheChannelSays(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	r.unknownOrder("sent", 300, true)
	lost := r.unknownOrder("lost", 500, false)
	if got := r.used(0); got != 2 {
		t.Fatalf("count window holds %d, want 2", got)
	}
	if err := r.resolver("a").ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent := r.get("sent")
	if sent.Status != pay.StatusSucceeded || sent.ResolvedBy != pay.ResolvedByQuery || sent.ResolvedAt.IsZero() || sent.ChannelTradeNo == "" {
		t.Fatalf("processed order: %+v, want SUCCEEDED by query with a trade number", sent)
	}
	gone := r.get("lost")
	if pay.StateOf(gone) != pay.StateNotSent || gone.ResolvedBy != pay.ResolvedByClose {
		t.Fatalf("unprocessed order: %+v, want NOT_SENT by close", gone)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d after the resolution, want 1 (the NOT_SENT slot released)", got)
	}
	if got := r.used(1); got != 300 {
		t.Fatalf("amount window holds %d, want 300", got)
	}
	res, err := r.sim.Pay(context.Background(), channel.Request{OrderNo: lost.OrderNo, RequestID: "lost", Amount: 500, Currency: "CNY"})
	if err != nil || res.Status != channel.Declined {
		t.Fatalf("a closed order sent late: %+v %v, want declined", res, err)
	}
}

// TestResolverQueriesCountOnlyOnTheResolveKey: with RESOLVE:ALIPAY at 2 a
// minute, a burst of 6 UNKNOWN orders gets 2 queries; the rest wait. The
// queries are not counted in the payment windows.
func TestResolverQueriesCountOnlyOnTheResolveKey(t *testing.T) {
	r := newResolverRig(t, resolverLimits+"  RESOLVE:ALIPAY: [{limit: 2, window: 1m}]\n")
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
		r.unknownOrder(id, 100, true)
	}
	if err := r.resolver("a").ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := r.sim.queries.Load(); q != 2 {
		t.Fatalf("%d queries, want 2 (RESOLVE:ALIPAY limit 2/1m)", q)
	}
	if got := r.used(0); got != 6 {
		t.Fatalf("the payments' window holds %d, want 6: queries must not count there", got)
	}
}

// TestTwoResolversAskOncePerOrder: two instances resolving the same
// orders at once ask the channel once per order: when it answers (the
// lease), and when it is still processing (a lease needs the order due,
// so the other's earlier read cannot take it again past its backoff).
func TestTwoResolversAskOncePerOrder(t *testing.T) {
	for _, processing := range []bool{false, true} {
		t.Run(fmt.Sprintf("processing=%v", processing), func(t *testing.T) {
			r := newResolverRig(t, resolverLimits)
			const n = 20
			for i := range n {
				r.unknownOrder(fmt.Sprintf("t%d", i), 100, true)
			}
			var ch channel.Channel = r.sim
			if processing {
				ch = processingChannel{r.sim}
			}
			reg, err := channel.NewRegistry(ch)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, owner := range []string{"a", "b"} {
				res, err := pay.NewResolver(r.orders, r.lim, reg, pay.ResolverOptions{Owner: owner, Backoff: time.Hour, MaxBackoff: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = res.ResolveOnce(context.Background())
				}()
			}
			wg.Wait()
			if q := r.sim.queries.Load(); q != n {
				t.Fatalf("%d queries for %d orders, want one each", q, n)
			}
		})
	}
}

// TestNotifyEndsAnOrderOnceAndNeverChangesAFinalOne: a notification ends
// an UNKNOWN order; a duplicate, or a contrary one after, changes nothing;
// a notification for another channel's order is refused.
func TestNotifyEndsAnOrderOnceAndNeverChangesAFinalOne(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	o := r.unknownOrder("n1", 200, true)
	res := r.resolver("a")
	ctx := context.Background()
	ok := pay.Notification{Channel: "ALIPAY", OrderNo: o.OrderNo, Result: channel.Result{Status: channel.Succeeded, TradeNo: "T1"}}
	if _, err := res.Notify(ctx, ok); err != nil {
		t.Fatal(err)
	}
	first := r.get("n1")
	if first.Status != pay.StatusSucceeded || first.ResolvedBy != pay.ResolvedByNotify || first.ChannelTradeNo != "T1" {
		t.Fatalf("after the notification: %+v", first)
	}
	if _, err := res.Notify(ctx, ok); err != nil {
		t.Fatalf("duplicate: %v", err)
	}
	declined := ok
	declined.Result = channel.Result{Status: channel.Declined, DeclineCode: "X"}
	if _, err := res.Notify(ctx, declined); err != nil {
		t.Fatalf("late contrary notification: %v", err)
	}
	if again := r.get("n1"); again.Status != pay.StatusSucceeded || !again.ResolvedAt.Equal(first.ResolvedAt) {
		t.Fatalf("a final order changed: %+v", again)
	}
	if _, err := res.Notify(ctx, pay.Notification{Channel: "WECHAT", OrderNo: o.OrderNo, Result: ok.Result}); err == nil {
		t.Fatal("a notification naming another channel was taken")
	}
	if q := r.sim.queries.Load(); q != 0 {
		t.Fatalf("%d queries, want none", q)
	}
}

// lateChannel has not processed an order when queried, and has when the
// close arrives: the close came too late.
type lateChannel struct{ *countingSim }

func (l lateChannel) Query(context.Context, channel.Request) (channel.Result, error) {
	return channel.Result{}, channel.ErrNotFound
}

func (l lateChannel) Close(context.Context, channel.Request) (channel.CloseResult, error) {
	return channel.CloseResult{Processed: true, Result: channel.Result{Status: channel.Succeeded, TradeNo: "LATE-1"}}, nil
}

// TestACloseTooLateFollowsThePaymentsRealOutcome: NOT_FOUND is not proof;
// when the close says the order was processed after all, the order follows
// the payment's outcome and keeps its slot.
func TestACloseTooLateFollowsThePaymentsRealOutcome(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	r.unknownOrder("late", 700, false)
	reg, err := channel.NewRegistry(lateChannel{r.sim})
	if err != nil {
		t.Fatal(err)
	}
	res, err := pay.NewResolver(r.orders, r.lim, reg, pay.ResolverOptions{Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := r.get("late")
	if o.Status != pay.StatusSucceeded || o.ResolvedBy != pay.ResolvedByClose || o.ChannelTradeNo != "LATE-1" {
		t.Fatalf("%+v, want SUCCEEDED by close", o)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d, want 1: the slot of a processed payment is kept", got)
	}
}

// TestAQueryAndItsCloseNeverStarveEachOther: with room for one call per
// window, an order the channel never saw needs a query and then a close.
// The close refused by the RESOLVE key is made first on the next attempt
// (no query again), so the order ends; asking again first would take the
// one slot every time and never close it.
func TestAQueryAndItsCloseNeverStarveEachOther(t *testing.T) {
	r := newResolverRig(t, resolverLimits+"  RESOLVE:ALIPAY: [{limit: 1, window: 1s}]\n")
	r.unknownOrder("starved", 100, false)
	res := r.resolver("a")
	for i := 0; i < 3 && r.get("starved").Status == pay.StatusUnknown; i++ {
		if err := res.ResolveOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	if o := r.get("starved"); pay.StateOf(o) != pay.StateNotSent {
		t.Fatalf("%+v after 3 windows: want NOT_SENT by close", o)
	}
	if q, c := r.sim.queries.Load(), r.sim.closes.Load(); q != 1 || c != 1 {
		t.Fatalf("%d queries, %d closes; want one of each", q, c)
	}
}

// TestARestartedSimulatorLeavesEarlierOrdersUnknown: an in-process
// simulator keeps its books in memory; after a restart it cannot say
// whether an earlier order was processed, so the order stays UNKNOWN
// (never closed as NOT_SENT on a guess).
func TestARestartedSimulatorLeavesEarlierOrdersUnknown(t *testing.T) {
	r := newResolverRig(t, resolverLimits)
	r.unknownOrder("before", 100, true)
	time.Sleep(2 * time.Millisecond)
	restarted, err := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r.sim = &countingSim{Simulator: restarted}
	if err := r.resolver("a").ResolveOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := r.get("before"); o.Status != pay.StatusUnknown {
		t.Fatalf("%+v: want UNKNOWN, the restarted simulator cannot know", o)
	}
	if got := r.used(0); got != 1 {
		t.Fatalf("count window holds %d, want 1: the slot is kept", got)
	}
}

// processingChannel answers every query PROCESSING (TestTwoResolversAskOncePerOrder).
type processingChannel struct{ *countingSim }

func (p processingChannel) Query(context.Context, channel.Request) (channel.Result, error) {
	p.queries.Add(1)
	return channel.Result{Status: channel.Processing}, nil
}
