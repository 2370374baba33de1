package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// merchantGate stands for a key whose merchants' own limits bind: with
// room it admits, without it refuses in the request's merchant's name,
// RetryAfter 300 ms.
type merchantGate struct {
	mu   sync.Mutex
	room int
}

func (g *merchantGate) Check(_ context.Context, r Request) (Decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.room > 0 {
		g.room--
		return Decision{Key: r.Key, Allowed: true}, nil
	}
	return Decision{Key: r.Key, Merchant: r.Merchant, Limit: 1, Count: 1, RetryAfter: 300 * time.Millisecond}, nil
}

// TestAMerchantsQueueIsServedInArrivalOrder: a request of merchant M
// that arrives while an older one waits in M's queue joins that queue,
// without a check of its own: M's use falling admits the older first.
func TestAMerchantsQueueIsServedInArrivalOrder(t *testing.T) {
	g := &merchantGate{}
	w := newWaiter(g.Check, waitOptions{maxWaiters: DefaultMaxWaiters, now: time.Now})
	key := Key{BizType: "B", Channel: "C"}
	type res struct {
		d  Decision
		at time.Duration
	}
	start := time.Now()
	aDone := make(chan res, 1)
	go func() {
		d, _ := w.run(context.Background(), Request{Key: key, Member: "a", Merchant: "M", MaxWait: 250 * time.Millisecond * 4})
		aDone <- res{d, time.Since(start)}
	}()
	time.Sleep(50 * time.Millisecond)
	if n := w.waiting(key); n != 1 {
		t.Fatalf("%d waiting, want a in M's queue", n)
	}
	g.mu.Lock()
	g.room = 1 // M's use falls (a slot released, or the window slid)
	g.mu.Unlock()
	b, _ := w.run(context.Background(), Request{Key: key, Member: "b", Merchant: "M", MaxWait: time.Second})
	bAt := time.Since(start)
	a := <-aDone
	if !a.d.Allowed || b.Allowed && bAt < a.at {
		t.Errorf("a (older): allowed %v after %v; b (newer): allowed %v after %v; want a admitted first", a.d.Allowed, a.at, b.Allowed, bAt)
	}
}

// TestMerchantQueuesDoNotOutliveTheirWaiters: a refusal whose next try is
// past the request's deadline leaves no queue behind, whatever merchant
// the client names.
func TestMerchantQueuesDoNotOutliveTheirWaiters(t *testing.T) {
	g := &merchantGate{}
	w := newWaiter(g.Check, waitOptions{maxWaiters: DefaultMaxWaiters, now: time.Now})
	key := Key{BizType: "B", Channel: "C"}
	for i := range 1000 {
		d, err := w.run(context.Background(), Request{Key: key, Member: fmt.Sprint(i), Merchant: fmt.Sprintf("M%d", i), MaxWait: 10 * time.Millisecond})
		if err != nil || d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	w.mu.Lock()
	n := len(w.queues)
	w.mu.Unlock()
	if n != 0 {
		t.Errorf("%d queues left in the map with nobody waiting, want 0", n)
	}
}

// panicOnce refuses (key-scoped) and panics on the second check.
type panicOnce struct {
	mu    sync.Mutex
	calls int
}

func (p *panicOnce) Check(_ context.Context, r Request) (Decision, error) {
	p.mu.Lock()
	p.calls++
	c := p.calls
	p.mu.Unlock()
	if c == 2 {
		panic("boom")
	}
	return Decision{Key: r.Key, Limit: 1, Count: 1, RetryAfter: 20 * time.Millisecond}, nil
}

// TestACheckThatPanicsHandsTheTurnOn: a check that panics while its
// request waits (net/http recovers a handler's panic) takes the request
// out of its queue: later waiters get their turn.
func TestACheckThatPanicsHandsTheTurnOn(t *testing.T) {
	p := &panicOnce{}
	w := newWaiter(p.Check, waitOptions{maxWaiters: DefaultMaxWaiters, now: time.Now})
	key := Key{BizType: "B", Channel: "C"}
	func() {
		defer func() { recover() }()
		w.run(context.Background(), Request{Key: key, Member: "a", MaxWait: time.Second})
	}()
	before := p.calls
	d, _ := w.run(context.Background(), Request{Key: key, Member: "b", MaxWait: 200 * time.Millisecond})
	if p.calls == before {
		t.Errorf("b never checked (allowed %v, waiting now %d): a's ticket is stuck at the head of the key's queue", d.Allowed, w.waiting(key))
	}
}
