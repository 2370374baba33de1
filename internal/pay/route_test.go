package pay_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
)

// routeFlow is a payment service with three simulated channels A, B and C,
// the in-process limiter (the Redis one is tested against the model in
// route_property_test.go and end to end in integration/routing_test.go),
// and the routes of doc.
type routeFlow struct {
	svc    *pay.Service
	lim    *ratelimit.Limiter
	store  pay.OrderStore
	sims   map[string]*channel.Simulator
	health *channel.Health
}

// routesOf holds the document each test limiter was last given (setDoc):
// as in payserver, where the config center holds the document in force,
// the routes are read beside the limiter, not through it.
var routesOf sync.Map // *ratelimit.Limiter → *limits.Document

// staticRoutes routes by the document last given to lim.
type staticRoutes struct{ lim *ratelimit.Limiter }

func (r staticRoutes) Route(biz string) ([]string, error) {
	doc, _ := routesOf.Load(r.lim)
	return doc.(*limits.Document).Route(biz), nil
}

// simulators returns a simulated channel of each code, configured by
// sims, and their registry.
func simulators(t *testing.T, sims map[string]channel.SimulatorConfig, codes ...string) (map[string]*channel.Simulator, *channel.Registry) {
	t.Helper()
	out := map[string]*channel.Simulator{}
	var chs []channel.Channel
	for _, code := range codes {
		sim, err := channel.NewSimulator(code, sims[code])
		if err != nil {
			t.Fatal(err)
		}
		out[code] = sim
		chs = append(chs, sim)
	}
	reg, err := channel.NewRegistry(chs...)
	if err != nil {
		t.Fatal(err)
	}
	return out, reg
}

func newRouteFlow(t *testing.T, store pay.OrderStore, doc string, sims map[string]channel.SimulatorConfig, health channel.HealthOptions) *routeFlow {
	t.Helper()
	lim := localLimiter(t, doc)
	codes := []string{"A", "B", "C"}
	f := &routeFlow{lim: lim, store: store}
	var reg *channel.Registry
	f.sims, reg = simulators(t, sims, codes...)
	f.health = channel.NewHealth(codes, health)
	svc, err := pay.NewService(store, lim, reg, pay.Options{
		ChannelTimeout: 100 * time.Millisecond, ClaimTimeout: 200 * time.Millisecond, InFlightWait: 2 * time.Second,
		Routes: staticRoutes{lim}, Health: f.health, Ledger: runLedger(t, store, lim, pay.LedgerOptions{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	return f
}

func setDoc(t *testing.T, lim *ratelimit.Limiter, doc string) {
	t.Helper()
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	routesOf.Store(lim, parsed)
	lim.SetConfig(parsed.Config)
}

// held returns how many admissions the 1-minute window of B:ch holds.
func (f *routeFlow) held(t *testing.T, ch string) int64 {
	t.Helper()
	_, counts, err := f.lim.Usage(context.Background(), ratelimit.Key{BizType: "B", Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) == 0 {
		return 0
	}
	return counts[0]
}

func unpinned(id string) pay.PayRequest {
	return pay.PayRequest{RequestID: id, BizType: "B", MerchantID: "M", Amount: 1, Currency: "CNY"}
}

// TestRoutedPaymentGoesToFirstAdmittingCandidate: the first candidate
// whose health and limiter admit the payment is used, the order records
// the ones skipped with their reasons, and the candidates that refused
// hold nothing.
func TestRoutedPaymentGoesToFirstAdmittingCandidate(t *testing.T) {
	tests := []struct {
		name     string
		limits   string
		fill     map[string]int // admissions made first, pinned
		want     string
		wantFrom []pay.RouteSkip
	}{
		{"first admits", "A: 5\n  B:B: 5\n  B:C: 5", nil, "A", []pay.RouteSkip{}},
		{"first full", "A: 1\n  B:B: 5\n  B:C: 5", map[string]int{"A": 1}, "B",
			[]pay.RouteSkip{{Channel: "A", Reason: pay.ReasonLimited}}},
		{"first closed, second full", "A: 0\n  B:B: 1\n  B:C: 5", map[string]int{"B": 1}, "C",
			[]pay.RouteSkip{{Channel: "A", Reason: pay.ReasonClosed}, {Channel: "B", Reason: pay.ReasonLimited}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "window: 1m\nroutes:\n  B: [A, B, C]\nlimits:\n  B:" + tt.limits + "\n"
			f := newRouteFlow(t, paytest.NewMemStore(), doc, nil, channel.HealthOptions{})
			before := map[string]int64{}
			for ch, n := range tt.fill {
				for i := range n {
					r := unpinned("fill-" + ch + string(rune('0'+i)))
					r.Channel = ch
					if _, err := f.svc.Pay(context.Background(), r); err != nil {
						t.Fatalf("fill %s: %v", ch, err)
					}
				}
			}
			for _, ch := range []string{"A", "B", "C"} {
				before[ch] = f.held(t, ch)
			}
			o, err := f.svc.Pay(context.Background(), unpinned("r1"))
			if err != nil {
				t.Fatal(err)
			}
			if o.Channel != tt.want || !reflect.DeepEqual(o.RoutedFrom, tt.wantFrom) {
				t.Fatalf("got channel %s routedFrom %+v; want %s %+v", o.Channel, o.RoutedFrom, tt.want, tt.wantFrom)
			}
			for _, ch := range []string{"A", "B", "C"} {
				want := before[ch]
				if ch == tt.want {
					want++
				}
				if got := f.held(t, ch); got != want {
					t.Errorf("%s holds %d admissions, want %d", ch, got, want)
				}
			}
			stored, err := f.store.Get(context.Background(), "r1")
			if err != nil || stored.Channel != tt.want || !reflect.DeepEqual(stored.RoutedFrom, tt.wantFrom) {
				t.Fatalf("stored %+v, %v", stored, err)
			}
		})
	}
}

// TestEveryCandidateRefuses: 429 REQUEST_LIMITED listing each candidate
// with its reason, rule and wait; Retry-After is the smallest wait; a
// closed candidate has no wait.
func TestEveryCandidateRefuses(t *testing.T) {
	doc := "routes:\n  B: [A, B, C]\nlimits:\n  B:A: 0\n  B:B: {limit: 1, window: 1m}\n  B:C: {limit: 1, window: 10s}\n"
	f := newRouteFlow(t, paytest.NewMemStore(), doc, nil, channel.HealthOptions{})
	for _, ch := range []string{"B", "C"} {
		r := unpinned("fill-" + ch)
		r.Channel = ch
		if _, err := f.svc.Pay(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.svc.Pay(context.Background(), unpinned("r1"))
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.RequestLimited {
		t.Fatalf("err = %v, want REQUEST_LIMITED", err)
	}
	cands, _ := e.Details["candidates"].([]map[string]any)
	if len(cands) != 3 {
		t.Fatalf("candidates = %+v, want 3", e.Details["candidates"])
	}
	for i, want := range []struct{ ch, reason string }{{"A", "closed"}, {"B", "limited"}, {"C", "limited"}} {
		if cands[i]["channel"] != want.ch || cands[i]["reason"] != want.reason {
			t.Errorf("candidate %d = %+v, want %s %s", i, cands[i], want.ch, want.reason)
		}
	}
	if _, ok := cands[0]["retryAfterMs"]; ok {
		t.Errorf("closed candidate has retryAfterMs: %+v", cands[0])
	}
	if e.RetryAfter <= 0 || e.RetryAfter > 10*time.Second {
		t.Errorf("RetryAfter = %v, want C's wait (at most 10s), the smallest", e.RetryAfter)
	}
	if rule, _ := cands[2]["rule"].(map[string]any); rule["name"] != "count/10s" || rule["limit"] != int64(1) || rule["used"] != int64(1) || rule["windowMs"] != int64(10_000) {
		t.Errorf("C's rule = %+v, want count/10s, limit 1, used 1, windowMs 10000", cands[2]["rule"])
	}
	if got := f.held(t, "B") + f.held(t, "C"); got != 2 {
		t.Errorf("refused candidates hold %d admissions, want the 2 fills only", got)
	}
}

// TestUnroutedBizTypeWithoutChannel: no route and no channel is a 400
// naming the field channel.
func TestUnroutedBizTypeWithoutChannel(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "routes:\n  OTHER: [A]\nlimits:\n  B:A: 5\n", nil, channel.HealthOptions{})
	_, err := f.svc.Pay(context.Background(), unpinned("r1"))
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.InvalidRequest {
		t.Fatalf("err = %+v, want INVALID_REQUEST", err)
	}
	if fields, _ := e.Details["fields"].([]apperr.FieldError); len(fields) != 1 || fields[0].Field != "channel" {
		t.Fatalf("fields = %+v, want channel", e.Details["fields"])
	}
}

// TestRoutedRetryNeverRoutesAgain: a retry of a routed requestId answers
// its stored order on the same channel, even once that channel would
// refuse or its route is gone, without a second call; a retry pinned to a
// channel is another payload.
func TestRoutedRetryNeverRoutesAgain(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "routes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n", nil, channel.HealthOptions{})
	first, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil || first.Channel != "A" {
		t.Fatalf("first = %+v, %v", first, err)
	}
	setDoc(t, f.lim, "routes:\n  B: [A, B]\nlimits:\n  B:A: 0\n  B:B: 5\n")
	again, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil || again.Channel != "A" || again.OrderNo != first.OrderNo {
		t.Fatalf("retry = %+v, %v; want the stored order on A", again, err)
	}
	// With the route removed, the retry still answers its stored order.
	setDoc(t, f.lim, "limits:\n  B:A: 5\n  B:B: 5\n")
	again, err = f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil || again.OrderNo != first.OrderNo {
		t.Fatalf("retry after the route was removed = %+v, %v; want the stored order", again, err)
	}
	if a, b := f.sims["A"].Calls(), f.sims["B"].Calls(); a != 1 || b != 0 {
		t.Errorf("calls A=%d B=%d, want 1 and 0", a, b)
	}
	pinned := unpinned("r1")
	pinned.Channel = "A"
	if _, err := f.svc.Pay(context.Background(), pinned); apperr.CodeOf(err) != apperr.IdempotencyConflict {
		t.Errorf("pinned retry = %v, want IDEMPOTENCY_CONFLICT", err)
	}
}

// TestNotSentMovesToNextCandidate: a call refused before sending moves the
// claim to the next candidate before calling it; the first channel's slot
// is released, so the payment holds one slot, on the channel called.
func TestNotSentMovesToNextCandidate(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n",
		map[string]channel.SimulatorConfig{"A": {RefuseRate: 1}}, channel.HealthOptions{})
	o, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil {
		t.Fatal(err)
	}
	want := []pay.RouteSkip{{Channel: "A", Reason: pay.ReasonUnhealthy}}
	if o.Channel != "B" || o.Status != pay.StatusSucceeded || !reflect.DeepEqual(o.RoutedFrom, want) {
		t.Fatalf("order %+v; want SUCCEEDED on B from A unhealthy", o)
	}
	if a, b := f.held(t, "A"), f.held(t, "B"); a != 0 || b != 1 {
		t.Errorf("A holds %d, B holds %d; want 0 and 1", a, b)
	}
	if f.sims["A"].Calls() != 0 || f.sims["B"].Calls() != 1 {
		t.Errorf("calls A=%d B=%d, want 0 and 1", f.sims["A"].Calls(), f.sims["B"].Calls())
	}
	stored, _ := f.store.Get(context.Background(), "r1")
	if stored.Channel != "B" || !reflect.DeepEqual(stored.RoutedFrom, want) {
		t.Errorf("stored %+v", stored)
	}
}

// TestNotSentWithNowhereToGo: when no later candidate admits it, a
// payment that reached no channel ends FAILED NOT_SENT and holds nothing.
func TestNotSentWithNowhereToGo(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 0\n",
		map[string]channel.SimulatorConfig{"A": {RefuseRate: 1}}, channel.HealthOptions{})
	o, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil || o.Status != pay.StatusFailed || o.FailureCode != pay.FailureNotSent || o.Channel != "A" {
		t.Fatalf("order %+v, %v; want FAILED NOT_SENT on A", o, err)
	}
	if a := f.held(t, "A"); a != 0 {
		t.Errorf("A holds %d, want 0: nothing was sent", a)
	}
}

// TestTimeoutIsNeverResent: a call whose outcome is unknown stays UNKNOWN
// on its channel; the next candidate is never called.
func TestTimeoutIsNeverResent(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "routes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n",
		map[string]channel.SimulatorConfig{"A": {TimeoutRate: 1}}, channel.HealthOptions{})
	o, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil || o.Status != pay.StatusUnknown || o.Channel != "A" {
		t.Fatalf("order %+v, %v; want UNKNOWN on A", o, err)
	}
	if f.sims["B"].Calls() != 0 {
		t.Errorf("B was called %d times after A timed out", f.sims["B"].Calls())
	}
}

// TestUnhealthyChannelIsSkipped: after Failures failed calls in a row the
// channel is skipped as unhealthy until its cool-down passes, then probed.
func TestUnhealthyChannelIsSkipped(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "routes:\n  B: [A, B]\nlimits:\n  B:A: 100\n  B:B: 100\n",
		map[string]channel.SimulatorConfig{"A": {ErrorRate: 1}}, channel.HealthOptions{Failures: 2, Cooldown: 300 * time.Millisecond})
	for i := range 2 {
		_, err := f.svc.Pay(context.Background(), unpinned("fail-"+string(rune('0'+i))))
		if apperr.CodeOf(err) != apperr.ChannelError {
			t.Fatalf("call %d: %v, want CHANNEL_ERROR from A (reached, not rerouted)", i, err)
		}
	}
	o, err := f.svc.Pay(context.Background(), unpinned("r1"))
	want := []pay.RouteSkip{{Channel: "A", Reason: pay.ReasonUnhealthy}}
	if err != nil || o.Channel != "B" || !reflect.DeepEqual(o.RoutedFrom, want) {
		t.Fatalf("order %+v, %v; want B, from A unhealthy", o, err)
	}
	if got := f.sims["A"].Calls(); got != 2 {
		t.Errorf("A called %d times, want 2: skipped while open", got)
	}
	time.Sleep(350 * time.Millisecond)
	if _, err := f.svc.Pay(context.Background(), unpinned("probe")); apperr.CodeOf(err) != apperr.ChannelError {
		t.Fatalf("probe = %v, want CHANNEL_ERROR from A after the cool-down", err)
	}
}

// gatedStore blocks the first Create until release is closed.
type gatedStore struct {
	pay.OrderStore
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (s *gatedStore) gates() (reached, release chan struct{}) { return s.reached, s.release }

func (s *gatedStore) Create(ctx context.Context, o *pay.Order) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.reached)
		<-s.release
	}
	return s.OrderStore.Create(ctx, o)
}

// TestLostClaimReleasesItsSlotElsewhere: a duplicate of an unpinned
// requestId that took a slot on B, and lost the claim to an order on A,
// releases B once that order is final: the payment holds a slot in A's
// windows only.
func TestLostClaimReleasesItsSlotElsewhere(t *testing.T) {
	store := &gatedStore{OrderStore: paytest.NewMemStore(), reached: make(chan struct{}), release: make(chan struct{})}
	f := newRouteFlow(t, store, "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 0\n  B:B: 5\n", nil, channel.HealthOptions{})
	type answer struct {
		o   *pay.Order
		err error
	}
	loser := make(chan answer, 1)
	go func() {
		o, err := f.svc.Pay(context.Background(), unpinned("dup"))
		loser <- answer{o, err}
	}()
	<-store.reached // the loser holds B's slot, its claim not yet written
	setDoc(t, f.lim, "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n")
	won, err := f.svc.Pay(context.Background(), unpinned("dup"))
	if err != nil || won.Channel != "A" {
		t.Fatalf("winner = %+v, %v; want A", won, err)
	}
	close(store.release)
	got := <-loser
	if got.err != nil || got.o.OrderNo != won.OrderNo || got.o.Channel != "A" {
		t.Fatalf("loser = %+v, %v; want the winner's order", got.o, got.err)
	}
	if a, b := f.held(t, "A"), f.held(t, "B"); a != 1 || b != 0 {
		t.Errorf("A holds %d, B holds %d; want 1 and 0: one payment, one slot", a, b)
	}
	if calls := f.sims["A"].Calls() + f.sims["B"].Calls(); calls != 1 {
		t.Errorf("%d channel calls, want 1", calls)
	}
}

// TestLostClaimReleasesItsSlotOnceTheWinnerEnds: a duplicate that lost the
// claim while the winner's call was still in flight (here it is another
// payload, answered 409 at once) keeps its slot on B only until that order
// is final on A, then releases it: it does not hold B's window (a whole
// day for a calendar window) for nothing.
func TestLostClaimReleasesItsSlotOnceTheWinnerEnds(t *testing.T) {
	store := &gatedStore{OrderStore: paytest.NewMemStore(), reached: make(chan struct{}), release: make(chan struct{})}
	f := newRouteFlow(t, store, "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 0\n  B:B: 5\n",
		map[string]channel.SimulatorConfig{"A": {Latency: 60 * time.Millisecond}}, channel.HealthOptions{})
	loser := make(chan error, 1)
	go func() {
		other := unpinned("dup")
		other.Amount = 2 // another payload
		_, err := f.svc.Pay(context.Background(), other)
		loser <- err
	}()
	<-store.reached // the loser holds B's slot, its claim not yet written
	setDoc(t, f.lim, "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n")
	winner := make(chan *pay.Order, 1)
	go func() {
		o, _ := f.svc.Pay(context.Background(), unpinned("dup"))
		winner <- o
	}()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := store.Get(context.Background(), "dup"); err == nil {
			break // the winner's claim on A is written; its call is in flight
		}
		if time.Now().After(deadline) {
			t.Fatal("the winner's claim was not written")
		}
	}
	close(store.release)
	if err := <-loser; apperr.CodeOf(err) != apperr.IdempotencyConflict {
		t.Fatalf("loser = %v, want IDEMPOTENCY_CONFLICT (another payload)", err)
	}
	if b := f.held(t, "B"); b != 1 {
		t.Fatalf("B holds %d while the winner is in flight, want 1 (it may yet move there)", b)
	}
	if o := <-winner; o == nil || o.Channel != "A" || o.Status != pay.StatusSucceeded {
		t.Fatalf("winner = %+v, want SUCCEEDED on A", o)
	}
	for deadline := time.Now().Add(3 * time.Second); f.held(t, "B") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B still holds %d 3s after the winner ended on A; want 0", f.held(t, "B"))
		}
	}
	if a := f.held(t, "A"); a != 1 {
		t.Errorf("A holds %d, want 1", a)
	}
}

// TestRoutedWaitGoesToTheShortestWait: with maxWaitMs, a routed payment
// that every candidate refused waits for the limited candidate with the
// shortest wait, not for the first.
func TestRoutedWaitGoesToTheShortestWait(t *testing.T) {
	lim := localLimiter(t, "routes:\n  B: [A, C]\nlimits:\n  B:A: {limit: 1, window: 1m}\n  B:C: {limit: 1, window: 300ms}\n")
	a, _ := channel.NewSimulator("A", channel.SimulatorConfig{})
	c, _ := channel.NewSimulator("C", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(a, c)
	svc, err := pay.NewService(paytest.NewMemStore(), lim, reg, pay.Options{Routes: staticRoutes{lim}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"A", "C"} {
		r := unpinned("fill-" + ch)
		r.Channel = ch
		if _, err := svc.Pay(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	r := unpinned("r1")
	r.MaxWait = 2 * time.Second
	start := time.Now()
	o, err := svc.Pay(context.Background(), r)
	want := []pay.RouteSkip{{Channel: "A", Reason: pay.ReasonLimited}}
	if err != nil || o.Channel != "C" || !reflect.DeepEqual(o.RoutedFrom, want) {
		t.Fatalf("order %+v, %v; want C after waiting, from A limited", o, err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("waited %v; C had room after 300ms", waited)
	}
}

// noRerouteStore refuses every Reroute, as when the sweeper took the claim.
type noRerouteStore struct{ pay.OrderStore }

func (noRerouteStore) Reroute(context.Context, *pay.Order, string) error { return pay.ErrOrderNotFound }

// TestNotSentClaimThatCannotMove: when the claim cannot be moved to the
// next candidate, nothing more is sent: the payment ends NOT_SENT and both
// slots are released.
func TestNotSentClaimThatCannotMove(t *testing.T) {
	f := newRouteFlow(t, noRerouteStore{paytest.NewMemStore()}, "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n",
		map[string]channel.SimulatorConfig{"A": {RefuseRate: 1}}, channel.HealthOptions{})
	o, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if err != nil || o.Status != pay.StatusFailed || o.FailureCode != pay.FailureNotSent {
		t.Fatalf("order %+v, %v; want FAILED NOT_SENT", o, err)
	}
	if a, b := f.held(t, "A"), f.held(t, "B"); a != 0 || b != 0 {
		t.Errorf("A holds %d, B holds %d; want 0 and 0", a, b)
	}
	if calls := f.sims["A"].Calls() + f.sims["B"].Calls(); calls != 0 {
		t.Errorf("%d channel calls, want 0", calls)
	}
}

// lostAnswerStore records checks of channel A's windows and then loses the
// answer (a timeout after Redis ran the script): the outcome is unknown.
type lostAnswerStore struct{ *ratelimit.LocalStore }

func (s lostAnswerStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	res, err := s.LocalStore.Check(ctx, ws, m, amount)
	if err == nil && ws[0].Key.Channel == "A" {
		return ratelimit.StoreResult{}, context.DeadlineExceeded
	}
	return res, err
}

// TestRoutingStopsOnAnUnknownLimiterOutcome: a candidate whose limiter
// answer was lost may hold the payment's slot after all; moving on would
// hold slots on two channels. Routing stops with 503, nothing is sent, the
// next candidate holds nothing, and a retry is exact.
func TestRoutingStopsOnAnUnknownLimiterOutcome(t *testing.T) {
	lim, err := ratelimit.New(lostAnswerStore{ratelimit.NewLocalStore(nil)}, ratelimit.Options{DisableNearCache: true, BreakerThreshold: 100})
	if err != nil {
		t.Fatal(err)
	}
	setDoc(t, lim, "routes:\n  B: [A, B]\nlimits:\n  B:A: {limit: 5, window: 1m}\n  B:B: {limit: 5, window: 1m}\n")
	var chs []channel.Channel
	for _, code := range []string{"A", "B"} {
		sim, err := channel.NewSimulator(code, channel.SimulatorConfig{})
		if err != nil {
			t.Fatal(err)
		}
		chs = append(chs, sim)
	}
	reg, _ := channel.NewRegistry(chs...)
	svc, err := pay.NewService(paytest.NewMemStore(), lim, reg, pay.Options{
		Routes: staticRoutes{lim}, Health: channel.NewHealth([]string{"A", "B"}, channel.HealthOptions{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Pay(context.Background(), unpinned("u1"))
	if apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("err = %v, want DEPENDENCY_UNAVAILABLE", err)
	}
	_, counts, _ := lim.Usage(context.Background(), ratelimit.Key{BizType: "B", Channel: "B"})
	if len(counts) > 0 && counts[0] != 0 {
		t.Fatalf("B holds %d admissions after A's lost answer, want 0: a routed payment holds one channel's slot", counts[0])
	}
}

// TestPinnedLostClaimReleasesItsSlotElsewhere: a payment pinned to B that
// loses its claim to a duplicate whose order went to A gives back its B
// slot once that order is final (it answers 409: another payload), so one
// requestId holds one channel's slot.
func TestPinnedLostClaimReleasesItsSlotElsewhere(t *testing.T) {
	pinnedLoserReleases(t, &gatedStore{OrderStore: paytest.NewMemStore(), reached: make(chan struct{}), release: make(chan struct{})})
}

// pinnedLoserReleases runs a payment pinned to B whose claim the store
// holds (store.reached, store.release) while a duplicate of it is routed to
// A and wins, and checks that B's slot is given back.
func pinnedLoserReleases(t *testing.T, store interface {
	pay.OrderStore
	gates() (reached, release chan struct{})
}) {
	t.Helper()
	reached, release := store.gates()
	f := newRouteFlow(t, store, "window: 1m\nroutes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: 5\n", nil, channel.HealthOptions{})
	loser := make(chan error, 1)
	go func() {
		r := unpinned("dup")
		r.Channel = "B"
		_, err := f.svc.Pay(context.Background(), r)
		loser <- err
	}()
	<-reached // the loser holds B's slot, its claim not yet answered
	won, err := f.svc.Pay(context.Background(), unpinned("dup"))
	if err != nil || won.Channel != "A" {
		t.Fatalf("winner = %+v, %v; want A", won, err)
	}
	close(release)
	if err := <-loser; apperr.CodeOf(err) != apperr.IdempotencyConflict {
		t.Fatalf("loser: %v, want IDEMPOTENCY_CONFLICT (another payload)", err)
	}
	if a, b := f.held(t, "A"), f.held(t, "B"); a != 1 || b != 0 {
		t.Errorf("A holds %d, B holds %d; want 1 and 0: one payment, one slot", a, b)
	}
}

// TestPinnedFailuresCountForRouting: failures of payments pinned to a
// channel count into its health, so routed payments skip it; pinned
// payments themselves are still sent while it is unhealthy.
func TestPinnedFailuresCountForRouting(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(), "routes:\n  B: [A, B]\nlimits:\n  B:A: 100\n  B:B: 100\n",
		map[string]channel.SimulatorConfig{"A": {ErrorRate: 1}}, channel.HealthOptions{Failures: 2, Cooldown: time.Minute})
	pinnedA := func(id string) error {
		r := unpinned(id)
		r.Channel = "A"
		_, err := f.svc.Pay(context.Background(), r)
		return err
	}
	for i := range 2 {
		if err := pinnedA("pinned-" + string(rune('0'+i))); apperr.CodeOf(err) != apperr.ChannelError {
			t.Fatalf("pinned call %d: %v, want CHANNEL_ERROR from A", i, err)
		}
	}
	o, err := f.svc.Pay(context.Background(), unpinned("routed"))
	if err != nil || o.Channel != "B" || !reflect.DeepEqual(o.RoutedFrom, []pay.RouteSkip{{Channel: "A", Reason: pay.ReasonUnhealthy}}) {
		t.Fatalf("routed order %+v, %v; want B, A skipped as unhealthy after two pinned failures", o, err)
	}
	if err := pinnedA("pinned-2"); apperr.CodeOf(err) != apperr.ChannelError || f.sims["A"].Calls() != 3 {
		t.Fatalf("pinned call while A is unhealthy: %v, %d calls; want it sent (CHANNEL_ERROR, 3 calls)", err, f.sims["A"].Calls())
	}
}

// erroringStore holds the first Create until release, then answers it with
// an error without writing it (a lost connection), so the claim is read
// back.
type erroringStore struct{ gatedStore }

func (s *erroringStore) Create(ctx context.Context, o *pay.Order) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.reached)
		<-s.release
		return errors.New("connection lost")
	}
	return s.OrderStore.Create(ctx, o)
}

// TestPinnedAmbiguousClaimReleasesItsSlotElsewhere: a pinned payment whose
// claim INSERT errors, and whose read-back finds a duplicate's order final
// on another channel, gives back its slot as a lost claim does, not only
// when its window passes (a day, for a calendar window).
func TestPinnedAmbiguousClaimReleasesItsSlotElsewhere(t *testing.T) {
	pinnedLoserReleases(t, &erroringStore{gatedStore{OrderStore: paytest.NewMemStore(), reached: make(chan struct{}), release: make(chan struct{})}})
}

// lateWinnerStore lets another request's order win the claim just before
// ours: the winner's row is written first by the same Create call.
type lateWinnerStore struct {
	*paytest.MemStore
	winner *pay.Order
}

func (s *lateWinnerStore) Create(ctx context.Context, o *pay.Order) error {
	if w := s.winner; w != nil {
		s.winner = nil
		if err := s.MemStore.Create(ctx, w); err != nil {
			return err
		}
	}
	return s.MemStore.Create(ctx, o)
}

// TestLostClaimToAnotherAmountReleasesItsSlot: a duplicate of the
// requestId for another amount won the claim on the same channel, its own
// slot decided in process (a Redis outage) so that the shared window holds
// only ours. Ours is no slot of the winner's: it is released at once.
// Kept, the money window would count our 4607 for the winner's 4604
// payment.
func TestLostClaimToAnotherAmountReleasesItsSlot(t *testing.T) {
	lim := localLimiter(t, "limits:\n  B:ALIPAY: [{limit: 10, window: 1h}, {amount: 100000, window: 1h}]\n")
	now := time.Now().UTC()
	store := &lateWinnerStore{MemStore: paytest.NewMemStore(), winner: &pay.Order{
		OrderNo: "PSWINNER", RequestID: "dup", RequestHash: "another payload", BizType: "B", Channel: "ALIPAY",
		MerchantID: "M", Amount: 4604, Currency: "CNY", Status: pay.StatusSucceeded, CreatedAt: now, UpdatedAt: now}}
	sim, _ := channel.NewSimulator("ALIPAY", channel.SimulatorConfig{})
	reg, _ := channel.NewRegistry(sim)
	svc, err := pay.NewService(store, lim, reg, pay.Options{InFlightWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := req("dup")
	r.Amount = 4607
	if _, err := svc.Pay(context.Background(), r); apperr.CodeOf(err) != apperr.IdempotencyConflict {
		t.Fatalf("lost to another amount: %v, want IDEMPOTENCY_CONFLICT", err)
	}
	if _, used, _ := lim.Usage(context.Background(), ratelimit.Key{BizType: "B", Channel: "ALIPAY"}); used[0] != 0 || used[1] != 0 {
		t.Fatalf("windows hold %v, want [0 0]: our slot was the winner's in name only", used)
	}
	if sim.Calls() != 0 {
		t.Errorf("%d channel calls, want none", sim.Calls())
	}
}

// TestMovingOnKeepsTheMerchant: a routed payment of merchant M that moves
// on from A (which refuses every call) is checked on B as M's: M's limit
// on B is 0, so B refuses it and it ends NOT_SENT, unpaid, as it would
// pinned to B.
func TestMovingOnKeepsTheMerchant(t *testing.T) {
	f := newRouteFlow(t, paytest.NewMemStore(),
		"routes:\n  B: [A, B]\nlimits:\n  B:A: 5\n  B:B: [{limit: 5, window: 1m, merchants: {M: 0}}]\n",
		map[string]channel.SimulatorConfig{"A": {RefuseRate: 1}}, channel.HealthOptions{})
	o, err := f.svc.Pay(context.Background(), unpinned("r1"))
	if o != nil && o.Status == pay.StatusSucceeded {
		t.Fatalf("merchant M, refused on B by its limit 0, was paid on %s after moving on from A (err %v)", o.Channel, err)
	}
	if n := f.sims["B"].Calls(); n != 0 {
		t.Fatalf("B was called %d times for a merchant it refuses", n)
	}
}
