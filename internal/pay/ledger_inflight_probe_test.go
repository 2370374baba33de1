package pay_test

import (
	"bytes"
	"context"
	"errors"
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
)

// liveLines returns the bodies of the "+" lines of dir's inflight.log not
// ended by a "-" line.
func liveLines(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "inflight.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Error(err)
	}
	live := map[string][]byte{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		switch {
		case len(line) > 1 && line[0] == '+':
			id, body, _ := bytes.Cut(line[1:], []byte(" "))
			live[string(id)] = body
		case len(line) > 1 && line[0] == '-':
			delete(live, string(line[1:]))
		}
	}
	return live
}

func liveFor(t *testing.T, dir, requestID string) bool {
	for _, body := range liveLines(t, dir) {
		if bytes.Contains(body, []byte(`"`+requestID+`"`)) {
			return true
		}
	}
	return false
}

// probeStore asserts, on every Check, that the member is in the log.
type probeStore struct {
	ratelimit.Store
	dir    string
	t      *testing.T
	mu     sync.Mutex
	missed []string
	fail   bool
}

func (s *probeStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, member string, amount int64) (ratelimit.StoreResult, error) {
	if !liveFor(s.t, s.dir, member) {
		s.mu.Lock()
		s.missed = append(s.missed, "store check of "+member)
		s.mu.Unlock()
	}
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return ratelimit.StoreResult{}, ratelimit.ErrNotSent
	}
	if member == "lost" {
		_, _ = s.Store.Check(ctx, ws, member, amount) // admitted, answer lost
		return ratelimit.StoreResult{}, context.DeadlineExceeded
	}
	return s.Store.Check(ctx, ws, member, amount)
}

// probeOrders asserts at Create and Reroute that the payment is in the log.
type probeOrders struct {
	*paytest.MemStore
	dir    string
	t      *testing.T
	mu     sync.Mutex
	missed []string
}

func (s *probeOrders) Create(ctx context.Context, o *pay.Order) error {
	if !liveFor(s.t, s.dir, o.RequestID) {
		s.mu.Lock()
		s.missed = append(s.missed, "claim of "+o.RequestID)
		s.mu.Unlock()
	}
	return s.MemStore.Create(ctx, o)
}

func (s *probeOrders) Reroute(ctx context.Context, o *pay.Order, from string) error {
	if !liveFor(s.t, s.dir, o.RequestID) {
		s.mu.Lock()
		s.missed = append(s.missed, "reroute of "+o.RequestID+" to "+o.Channel)
		s.mu.Unlock()
	}
	return s.MemStore.Reroute(ctx, o, from)
}

type probeFlow struct {
	svc    *pay.Service
	lim    *ratelimit.Limiter
	store  *probeStore
	orders *probeOrders
	dir    string
	sims   map[string]*channel.Simulator
}

func newProbeFlow(t *testing.T, doc string, lopts ratelimit.Options, sims map[string]channel.SimulatorConfig) *probeFlow {
	dir := t.TempDir()
	ps := &probeStore{Store: ratelimit.NewLocalStore(nil), dir: dir, t: t}
	lim, err := ratelimit.New(ps, lopts)
	if err != nil {
		t.Fatal(err)
	}
	setDoc(t, lim, doc)
	mem := paytest.NewMemStore()
	po := &probeOrders{MemStore: mem, dir: dir, t: t}
	codes := []string{"ALIPAY", "WECHAT"}
	f := &probeFlow{lim: lim, store: ps, orders: po, dir: dir}
	var reg *channel.Registry
	f.sims, reg = simulators(t, sims, codes...)
	led := runLedger(t, po, lim, pay.LedgerOptions{Dir: dir})
	svc, err := pay.NewService(po, lim, reg, pay.Options{Ledger: led, Routes: staticRoutes{lim},
		Health: channel.NewHealth(codes, channel.HealthOptions{}), ChannelTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	return f
}

func (f *probeFlow) check(t *testing.T) {
	t.Helper()
	for _, m := range append(append([]string{}, f.store.missed...), f.orders.missed...) {
		t.Errorf("not in the log of admissions in flight at the %s", m)
	}
	if n := len(liveLines(t, f.dir)); n != 0 {
		t.Errorf("%d lines left in flight after every payment answered", n)
	}
}

// fillAndPrime takes the one slot of B:ALIPAY and has the store refuse
// the next payment, so that the near-cache remembers the key as full.
func (f *probeFlow) fillAndPrime(t *testing.T) {
	t.Helper()
	if _, err := f.svc.Pay(context.Background(), req("fill")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Pay(context.Background(), req("prime")); apperr.CodeOf(err) != apperr.RequestLimited {
		t.Fatalf("prime: %v, want %s", err, apperr.RequestLimited)
	}
}

const probeDoc = "routes:\n  B: [ALIPAY, WECHAT]\nlimits:\n  B:ALIPAY: [{limit: 1, window: 1h}]\n  B:WECHAT: [{limit: 5, window: 1h}]\n"

// The TestKeptInFlightBeforeTheStore tests hold the pay flow to the
// ledger's rule on every path that can reach the limiter's store: the
// store finds the payment's line in the log of admissions in flight when
// it is asked (probeStore), so does the order store at its claim and its
// reroute (probeOrders), and no line is left once every payment answered.
func TestKeptInFlightBeforeTheStorePinned(t *testing.T) {
	f := newProbeFlow(t, probeDoc, ratelimit.Options{}, nil)
	if _, err := f.svc.Pay(context.Background(), req("p1")); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestKeptInFlightBeforeTheStoreRoutedPastANearCacheRefusal(t *testing.T) {
	f := newProbeFlow(t, probeDoc, ratelimit.Options{}, nil)
	f.fillAndPrime(t)
	r := req("routed")
	r.Channel = ""
	o, err := f.svc.Pay(context.Background(), r)
	if err != nil || o.Channel != "WECHAT" {
		t.Fatalf("%+v %v", o, err)
	}
	f.check(t)
}

func TestKeptInFlightBeforeTheStoreWaiterAfterNearCache(t *testing.T) {
	f := newProbeFlow(t, "limits:\n  B:ALIPAY: [{limit: 1, window: 500ms}]\n", ratelimit.Options{}, nil)
	f.fillAndPrime(t)
	r := req("waiter")
	r.MaxWait = 3 * time.Second
	if _, err := f.svc.Pay(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestKeptInFlightBeforeTheStoreInProcessFallback(t *testing.T) {
	f := newProbeFlow(t, probeDoc, ratelimit.Options{BreakerThreshold: 1, BreakerCooldown: time.Hour}, nil)
	f.store.fail = true
	// The in-process windows take the first (B:ALIPAY's limit of 1) and
	// refuse the second.
	if _, err := f.svc.Pay(context.Background(), req("d1")); err != nil {
		t.Fatalf("d1: %v, want paid in process", err)
	}
	if _, err := f.svc.Pay(context.Background(), req("d2")); apperr.CodeOf(err) != apperr.RequestLimited {
		t.Fatalf("d2: %v, want %s in process", err, apperr.RequestLimited)
	}
	f.check(t)
}

func TestKeptInFlightBeforeTheStoreMoveOn(t *testing.T) {
	f := newProbeFlow(t, probeDoc, ratelimit.Options{}, map[string]channel.SimulatorConfig{"ALIPAY": {RefuseRate: 1}})
	r := req("moved")
	r.Channel = ""
	o, err := f.svc.Pay(context.Background(), r)
	if err != nil || o.Channel != "WECHAT" {
		t.Fatalf("%+v %v", o, err)
	}
	f.check(t)
}

func TestKeptInFlightBeforeTheStoreLostAnswer(t *testing.T) {
	f := newProbeFlow(t, probeDoc, ratelimit.Options{}, nil)
	_, err := f.svc.Pay(context.Background(), req("lost"))
	if apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatal(err)
	}
	f.check(t)
}
