package pay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// lostCommitStore is an order store whose claim commits and then loses its
// connection: the caller sees an error, and the store stays down until the
// test brings it back.
type lostCommitStore struct {
	mu   sync.Mutex
	rows map[string]pay.Order
	down atomic.Bool
}

func (s *lostCommitStore) Get(_ context.Context, id string) (*pay.Order, error) {
	if s.down.Load() {
		return nil, errors.New("connection refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.rows[id]
	if !ok {
		return nil, pay.ErrOrderNotFound
	}
	return &o, nil
}
func (s *lostCommitStore) Create(_ context.Context, o *pay.Order) error {
	s.mu.Lock()
	s.rows[o.RequestID] = *o
	s.mu.Unlock()
	s.down.Store(true) // committed, then the connection is lost
	return errors.New("invalid connection")
}
func (s *lostCommitStore) Finish(_ context.Context, o *pay.Order) error {
	if s.down.Load() {
		return errors.New("connection refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[o.RequestID]
	if !ok || r.OrderNo != o.OrderNo {
		return pay.ErrOrderNotFound
	}
	r.Status, r.FailureCode, r.UpdatedAt = o.Status, o.FailureCode, o.UpdatedAt
	s.rows[o.RequestID] = r
	return nil
}
func (s *lostCommitStore) MarkStaleUnknown(_ context.Context, cutoff time.Time) (int64, error) {
	if s.down.Load() {
		return 0, errors.New("connection refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, r := range s.rows {
		if r.Status == pay.StatusProcessing && r.UpdatedAt.Before(cutoff) {
			r.Status, r.FailureCode = pay.StatusUnknown, "STALE"
			s.rows[k] = r
			n++
		}
	}
	return n, nil
}
func (s *lostCommitStore) Ping(context.Context) error { return nil }

func (s *lostCommitStore) Reroute(context.Context, *pay.Order, string) error {
	return pay.ErrOrderNotFound
}

// allowAll admits everything and counts releases.
type allowAll struct{ released atomic.Int64 }

func (a *allowAll) Check(_ context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{Key: r.Key, Allowed: true, Limit: 10, Window: time.Minute}, nil
}

func (a *allowAll) ReleaseAmount(context.Context, ratelimit.Hold) error          { return nil }
func (*allowAll) Throttled(context.Context, ratelimit.Hold, time.Duration) error { return nil }
func (a *allowAll) Release(context.Context, ratelimit.Hold) error {
	a.released.Add(1)
	return nil
}

// oneCh is a channel that counts its calls.
type oneCh struct{ n atomic.Int64 }

func (c *oneCh) Code() string { return "ALIPAY" }
func (c *oneCh) Pay(context.Context, channel.Request) (channel.Result, error) {
	c.n.Add(1)
	return channel.Result{Status: channel.Succeeded}, nil
}

// reg finds oneCh for any code.
type reg struct{ c *oneCh }

func (r reg) Get(string) (channel.Channel, bool) { return r.c, true }

// fastClock is a settler's clock whose waits pass at once: each After(d)
// moves it d ahead and fires after a real millisecond.
type fastClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fastClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fastClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return time.After(time.Millisecond)
}

// TestNeverSentStaysNotSentAfterALongOutage: a claim commits but the
// client sees an error, and the database stays down for longer than
// StaleAfter. The payment was never sent: when the database returns (and
// the stale sweeper has run), the order must end NOT_SENT, not UNKNOWN,
// and its slot be released once. A settler that gave up at StaleAfter left
// the sweeper's UNKNOWN. The ledger runs on an injected clock, so the
// outage lasts minutes of its time and milliseconds of the test's.
func TestNeverSentStaysNotSentAfterALongOutage(t *testing.T) {
	st := &lostCommitStore{rows: map[string]pay.Order{}}
	ch := &oneCh{}
	lim := &allowAll{}
	clock := &fastClock{now: time.Unix(1_700_000_000, 0)}
	ledger := runLedger(t, st, lim, pay.LedgerOptions{Now: clock.Now, After: clock.After})
	s, err := pay.NewService(st, lim, reg{ch}, pay.Options{ClaimTimeout: 100 * time.Millisecond, StaleAfter: 300 * time.Millisecond, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	_, err = s.Pay(context.Background(), pay.PayRequest{RequestID: "never-sent-1", BizType: "B", Channel: "ALIPAY", MerchantID: "M", Amount: 1, Currency: "CNY"})
	t.Logf("pay answered: %v", err)
	waitFor(t, func() bool { return clock.Now().Sub(start) > time.Minute }) // down far longer than StaleAfter
	st.down.Store(false)
	n, _ := s.SweepStale(context.Background())
	waitFor(t, func() bool { return lim.released.Load() > 0 })
	o, _ := st.Get(context.Background(), "never-sent-1")
	t.Logf("swept %d; order status %s failureCode %s; channel calls %d; slot released %d", n, o.Status, o.FailureCode, ch.n.Load(), lim.released.Load())
	if ch.n.Load() != 0 || o.Status != pay.StatusFailed || o.FailureCode != pay.FailureNotSent || lim.released.Load() != 1 {
		t.Errorf("order %s %s, %d channel calls, %d releases; want FAILED NOT_SENT, 0 calls, the slot released once", o.Status, o.FailureCode, ch.n.Load(), lim.released.Load())
	}
}

// TestFullLedgerRefusesNewPaymentsAndDropsNothing: a ledger that keeps Max
// entries takes every entry of a payment already past its admission, and
// refuses new payments before they take a slot (503, dependency "ledger"),
// so that none of them can leave an entry it would have to drop. A full
// queue dropped such entries before, counted, and their slots stayed held
// until their windows passed.
func TestFullLedgerRefusesNewPaymentsAndDropsNothing(t *testing.T) {
	st := &lostCommitStore{rows: map[string]pay.Order{}}
	lim := &allowAll{}
	ledger, err := pay.NewLedger(st, lim, pay.LedgerOptions{Max: 1}) // never run: nothing leaves it
	if err != nil {
		t.Fatal(err)
	}
	s, err := pay.NewService(st, lim, reg{&oneCh{}}, pay.Options{ClaimTimeout: 50 * time.Millisecond, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"full-1", "full-2", "full-3"} {
		st.down.Store(false)
		_, err := s.Pay(context.Background(), pay.PayRequest{RequestID: id, BizType: "B", Channel: "ALIPAY", MerchantID: "M", Amount: 1, Currency: "CNY"})
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.DependencyUnavailable {
			t.Fatalf("%s: %v, want DEPENDENCY_UNAVAILABLE", id, err)
		}
		if dep := ae.Details["dependency"]; i > 0 && dep != "ledger" {
			t.Fatalf("%s with the ledger full: dependency %v, want ledger", id, dep)
		}
		if _, ok := st.rows[id]; i > 0 && ok {
			t.Fatalf("%s was claimed with the ledger full: it took a slot whose fate nobody would keep", id)
		}
	}
	if got := ledger.Size(); got != 1 {
		t.Fatalf("the ledger keeps %d entries, want 1 (the abandoned claim; the refused payments took nothing)", got)
	}
}

// waitFor polls cond for up to 5 s of real time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
	}
}
