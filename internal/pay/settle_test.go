package pay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

func (a *allowAll) ReleaseAmount(context.Context, ratelimit.Key, string) error { return nil }
func (a *allowAll) Release(context.Context, ratelimit.Key, string) error {
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

// TestNeverSentStaysNotSentAfterALongOutage: a claim commits but the
// client sees an error, and the database stays down for longer than
// StaleAfter. The payment was never sent: when the database returns (and
// the stale sweeper has run), the order must end NOT_SENT, not UNKNOWN.
// Before the fix the settler gave up at StaleAfter and the sweeper's
// UNKNOWN stayed.
func TestNeverSentStaysNotSentAfterALongOutage(t *testing.T) {
	st := &lostCommitStore{rows: map[string]pay.Order{}}
	ch := &oneCh{}
	lim := &allowAll{}
	s, err := pay.NewService(st, lim, reg{ch}, pay.Options{ClaimTimeout: 100 * time.Millisecond, StaleAfter: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pay(context.Background(), pay.PayRequest{RequestID: "never-sent-1", BizType: "B", Channel: "ALIPAY", MerchantID: "M", Amount: 1, Currency: "CNY"})
	t.Logf("pay answered: %v", err)
	time.Sleep(time.Second) // the database is down longer than StaleAfter
	st.down.Store(false)
	n, _ := s.SweepStale(context.Background())
	time.Sleep(3 * time.Second)
	o, _ := st.Get(context.Background(), "never-sent-1")
	t.Logf("swept %d; order status %s failureCode %s; channel calls %d; slot released %d", n, o.Status, o.FailureCode, ch.n.Load(), lim.released.Load())
	if ch.n.Load() != 0 || o.Status != pay.StatusFailed || o.FailureCode != pay.FailureNotSent || lim.released.Load() != 1 {
		t.Errorf("order %s %s, %d channel calls, %d releases; want FAILED NOT_SENT, 0 calls, the slot released once", o.Status, o.FailureCode, ch.n.Load(), lim.released.Load())
	}
}
