package decisionlog

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"payserver/internal/metrics"
	"payserver/internal/ratelimit"
	clock "payserver/internal/testutil"
)

// memStore is a Store in memory that records each Prune's limit.
type memStore struct {
	mu      sync.Mutex
	entries []Entry
	docs    map[string][]byte
	prunes  []int // the limit of each Prune call
	written chan struct{}
}

func newMemStore() *memStore {
	return &memStore{docs: map[string][]byte{}, written: make(chan struct{}, 64)}
}

func (s *memStore) Insert(_ context.Context, entries []Entry) error {
	s.mu.Lock()
	s.entries = append(s.entries, entries...)
	s.mu.Unlock()
	s.written <- struct{}{}
	return nil
}

func (s *memStore) Prune(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prunes = append(s.prunes, limit)
	sort.SliceStable(s.entries, func(i, j int) bool { return s.entries[i].At.Before(s.entries[j].At) })
	n := 0
	for n < len(s.entries) && n < limit && s.entries[n].At.Before(before) {
		n++
	}
	s.entries = s.entries[n:]
	return n, nil
}

func (s *memStore) SaveDocument(_ context.Context, version string, content []byte, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.docs[version]; !ok {
		s.docs[version] = content
	}
	return nil
}

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// fakeTimer is Options.After under the test's control: Run's wait is
// recorded on asked, and ends when the test sends on fire.
type fakeTimer struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newFakeTimer() *fakeTimer {
	return &fakeTimer{asked: make(chan time.Duration, 1), fire: make(chan time.Time)}
}

func (f *fakeTimer) After(d time.Duration) <-chan time.Time {
	f.asked <- d
	return f.fire
}

func decision(key ratelimit.Key, member string, at time.Time) ratelimit.Decision {
	return ratelimit.Decision{Key: key, Allowed: true, DecidedAt: at, Hold: ratelimit.Hold{Key: key, Member: member}}
}

var testKey = ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}

// TestFullBufferDropsAndCounts fills the buffer past its bound: the entries
// over it are dropped, each counted once in
// payserver_decision_log_dropped_total, and the request path never waits
// (there is no worker at all here).
func TestFullBufferDropsAndCounts(t *testing.T) {
	m := metrics.New()
	store := newMemStore()
	l, err := New(store, Options{Buffer: 3, Dropped: m.NewDecisionLogDropped()})
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMicro(1_700_000_000_000_000)
	for i := range 5 {
		l.Decided(decision(testKey, string(rune('a'+i)), at), 0)
	}
	l.ReleasedHold(ratelimit.Hold{Key: testKey, Member: "a"}, false, at)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var dropped float64 = -1
	for _, mf := range mfs {
		if mf.GetName() == "payserver_decision_log_dropped_total" {
			dropped = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if dropped != 3 {
		t.Errorf("payserver_decision_log_dropped_total = %v, want 3 (2 decisions and 1 release over a buffer of 3)", dropped)
	}
	l.Flush(context.Background())
	if got := store.len(); got != 3 {
		t.Errorf("%d entries written, want the 3 the buffer held", got)
	}
	// Once flushed, the buffer takes entries again.
	l.Decided(decision(testKey, "f", at), 0)
	l.Flush(context.Background())
	if got := store.len(); got != 4 {
		t.Errorf("%d entries written after the buffer emptied, want 4", got)
	}
}

// TestRunFlushesEverySecond drives Run on a fake timer: it waits at most a
// second, writes nothing before the wait ends, and everything buffered
// when it does, with the documents applied.
func TestRunFlushesEverySecond(t *testing.T) {
	store := newMemStore()
	timer := newFakeTimer()
	now := clock.NewClock(time.UnixMicro(1_700_000_000_000_000))
	l, err := New(store, Options{Now: now.Now, After: timer.After, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	if d := <-timer.asked; d > time.Second {
		t.Fatalf("Run waits %v between flushes, want at most 1s", d)
	}
	for i := range 10 {
		l.Decided(decision(testKey, string(rune('a'+i)), now.Now()), 0)
	}
	l.DocumentApplied("v1", []byte("limits: {}\n"))
	// The document kicks the worker: it writes the document and the
	// entries without waiting for the timer.
	select {
	case <-store.written:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing written after a document was applied")
	}
	if d := <-timer.asked; d > time.Second {
		t.Fatalf("Run waits %v between flushes, want at most 1s", d)
	}
	if got := store.len(); got != 10 {
		t.Fatalf("%d entries written, want 10", got)
	}

	// Entries alone wait for the timer: none is written before it fires.
	l.Decided(decision(testKey, "k", now.Now()), 0)
	select {
	case <-store.written:
		t.Fatal("an entry was written before the flush timer fired")
	case <-time.After(50 * time.Millisecond):
	}
	now.Advance(time.Second)
	timer.fire <- now.Now()
	select {
	case <-store.written:
	case <-time.After(5 * time.Second):
		t.Fatal("the buffered entry was not written when the second was up")
	}
	if got := store.len(); got != 11 {
		t.Errorf("%d entries written, want 11", got)
	}
	store.mu.Lock()
	_, kept := store.docs["v1"]
	store.mu.Unlock()
	if !kept {
		t.Error("the applied document was not saved")
	}
}

// TestRunPrunesInSmallBatches keeps entries past the retention and
// within it: Run deletes the old ones in statements of at most PruneBatch
// rows, until one deletes fewer, and keeps the rest.
func TestRunPrunesInSmallBatches(t *testing.T) {
	store := newMemStore()
	now := clock.NewClock(time.UnixMicro(1_700_000_000_000_000))
	for i := range 7 {
		store.entries = append(store.entries, Entry{At: now.Now().Add(-2*time.Hour + time.Duration(i)*time.Second), Kind: KindDecision, Key: testKey})
	}
	for i := range 2 {
		store.entries = append(store.entries, Entry{At: now.Now().Add(-time.Duration(i) * time.Minute), Kind: KindDecision, Key: testKey})
	}
	timer := newFakeTimer()
	l, err := New(store, Options{Now: now.Now, After: timer.After, Retention: time.Hour, PruneBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	<-timer.asked
	timer.fire <- now.Now()
	<-timer.asked // the first round, with its pruning, is over
	cancel()
	<-done

	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.entries) != 2 {
		t.Errorf("%d entries left, want the 2 within the retention", len(store.entries))
	}
	want := []int{3, 3, 3} // 3 + 3 + 1: the third deletes fewer, and pruning stops
	if len(store.prunes) != len(want) {
		t.Fatalf("Prune limits %v, want %v", store.prunes, want)
	}
	for i, n := range store.prunes {
		if n != want[i] {
			t.Errorf("Prune call %d deleted at most %d rows, want %d", i, n, want[i])
		}
	}
}
