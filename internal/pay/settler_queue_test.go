package pay

import (
	"context"
	"sync"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// gatedOrders answers Get from rows, each Get waiting for gate while it is
// not nil; the rest of OrderStore is not used by the settler's watching.
type gatedOrders struct {
	OrderStore
	mu   sync.Mutex
	rows map[string]Order
	gate chan struct{}
	in   chan struct{}
}

func (s *gatedOrders) Get(_ context.Context, id string) (*Order, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		s.in <- struct{}{}
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.rows[id]
	if !ok {
		return nil, ErrOrderNotFound
	}
	return &o, nil
}

// releaseCounter counts releases by member.
type releaseCounter struct {
	Limiter
	mu       sync.Mutex
	released map[string]int
}

func (l *releaseCounter) Release(_ context.Context, h ratelimit.Hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released[h.Member]++
	return nil
}

// TestSettlerKeepsItsOwnRetriesWhenFull: a slot the settler is watching
// (its order still in flight) goes back to the queue for its next look even
// when new slots have filled the queue meanwhile: the bound refuses new
// slots, never one already taken. Put back through the full queue, the
// watched slot was dropped and stayed held by nobody.
func TestSettlerKeepsItsOwnRetriesWhenFull(t *testing.T) {
	store := &gatedOrders{rows: map[string]Order{}, gate: make(chan struct{}), in: make(chan struct{}, 8)}
	now := time.Now()
	store.rows["a"] = Order{RequestID: "a", OrderNo: "WA", BizType: "B", Channel: "CB", Status: StatusProcessing}
	store.rows["b"] = Order{RequestID: "b", OrderNo: "WB", BizType: "B", Channel: "CB", Status: StatusProcessing}
	lim := &releaseCounter{released: map[string]int{}}
	s := NewSettler(store, lim, SettlerOptions{Workers: 1, Queue: 1, Patience: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	ca := ratelimit.Key{BizType: "B", Channel: "CA"}
	s.releaseWhenFinal(&Order{RequestID: "a", OrderNo: "LA", BizType: "B", Channel: "CA"}, ratelimit.HoldOf(ca, "a"))
	<-store.in // the worker looks at a's order
	s.releaseWhenFinal(&Order{RequestID: "b", OrderNo: "LB", BizType: "B", Channel: "CA"}, ratelimit.HoldOf(ca, "b"))
	store.mu.Lock()
	close(store.gate) // a's first look: still in flight
	store.gate = nil
	store.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	store.mu.Lock()
	a := store.rows["a"]
	a.Status = StatusSucceeded // a ends on CB: its slot on CA goes
	store.rows["a"] = a
	store.mu.Unlock()
	deadline := now.Add(5 * time.Second)
	for {
		lim.mu.Lock()
		n := lim.released["a"]
		lim.mu.Unlock()
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's slot released %d times, want 1 (%d jobs dropped): the watched slot was lost", n, s.Dropped())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
