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

// TestLedgerKeepsAWatchedSlotWhenFull: a slot the ledger is watching (its
// order still in flight) stays kept for its next look when new slots have
// filled the ledger meanwhile, and so do the new ones: a full ledger
// refuses new payments (Admitting), never an entry. Put back through a
// full queue, the watched slot was dropped and stayed held by nobody.
func TestLedgerKeepsAWatchedSlotWhenFull(t *testing.T) {
	store := &gatedOrders{rows: map[string]Order{}, gate: make(chan struct{}), in: make(chan struct{}, 8)}
	now := time.Now()
	store.rows["a"] = Order{RequestID: "a", OrderNo: "WA", BizType: "B", Channel: "CB", Status: StatusProcessing}
	store.rows["b"] = Order{RequestID: "b", OrderNo: "WB", BizType: "B", Channel: "CB", Status: StatusProcessing}
	lim := &releaseCounter{released: map[string]int{}}
	l, err := NewLedger(store, lim, LedgerOptions{Workers: 1, Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	ca := ratelimit.Key{BizType: "B", Channel: "CA"}
	rowA, rowB := store.rows["a"], store.rows["b"]
	if d := l.Settle(ctx, ratelimit.HoldOf(ca, "a"), &Order{RequestID: "a", OrderNo: "LA", BizType: "B", Channel: "CA"}, &rowA); d.Fate != FateWait {
		t.Fatalf("a's slot: %v, want wait", d.Fate)
	}
	<-store.in // the worker looks at a's order
	l.Settle(ctx, ratelimit.HoldOf(ca, "b"), &Order{RequestID: "b", OrderNo: "LB", BizType: "B", Channel: "CA"}, &rowB)
	if l.Size() != 2 || l.Admitting() == nil {
		t.Fatalf("%d entries, admitting %v: want both kept and new payments refused", l.Size(), l.Admitting())
	}
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
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's slot released %d times, want 1 (%d entries kept): the watched slot was lost", n, l.Size())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l.Size() != 1 || l.Admitting() != nil {
		t.Fatalf("%d entries, admitting %v: want b still watched and payments admitted again", l.Size(), l.Admitting())
	}
}
