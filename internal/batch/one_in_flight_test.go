package batch

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// probe serves calls of a Batcher[int, int] (each result is twice its
// argument) and measures how many One and Many calls are in flight at once
// and how often each argument was served.
type probe struct {
	cur, peak atomic.Int64
	// gate, when set, holds every One and Many until it is closed.
	gate  chan struct{}
	pause func() // runs inside each call, after gate (nil: none)

	mu     sync.Mutex
	served map[int]int
}

func newProbe() *probe { return &probe{served: map[int]int{}} }

func (p *probe) enter(args ...int) {
	n := p.cur.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	p.mu.Lock()
	for _, a := range args {
		p.served[a]++
	}
	p.mu.Unlock()
	if p.gate != nil {
		<-p.gate
	}
	if p.pause != nil {
		p.pause()
	}
}

func (p *probe) leave() { p.cur.Add(-1) }

func (p *probe) batcher() *Batcher[int, int] {
	return &Batcher[int, int]{Max: 8,
		One: func(_ context.Context, a int) (int, error) {
			p.enter(a)
			defer p.leave()
			return 2 * a, nil
		},
		Many: func(_ context.Context, calls []*Call[int, int]) {
			args := make([]int, len(calls))
			for i, c := range calls {
				args[i] = c.Arg
			}
			p.enter(args...)
			defer p.leave()
			for _, c := range calls {
				c.Res = 2 * c.Arg
			}
		},
	}
}

// runCallers runs callers goroutines, each calling call with its own
// perCaller arguments in turn (0 to callers*perCaller-1 in all), and waits
// for them.
func runCallers(callers, perCaller int, call func(a int)) {
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				call(c*perCaller + i)
			}
		}()
	}
	wg.Wait()
}

// waitIdle waits until b has nothing in flight or queued: a caller can
// return before the goroutine that served its batch frees its place.
func waitIdle[A, R any](t *testing.T, b *Batcher[A, R]) {
	t.Helper()
	waitFor(t, "the batcher to be idle", func() bool { return !b.isBusy() && b.Queued() == 0 })
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestOneInFlight: the first call is served at once, alone; the calls that
// arrive while it is in flight queue, and when it returns they go as one
// batch in its place. No second call or batch starts meanwhile.
func TestOneInFlight(t *testing.T) {
	p := newProbe()
	p.gate = make(chan struct{})
	b := p.batcher()
	var wg sync.WaitGroup
	got := make([]int, 4)
	do := func(i int) {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = b.Do(context.Background(), i) }()
	}
	do(0)
	waitFor(t, "the first call in flight", func() bool { return p.cur.Load() == 1 })
	if q := b.Queued(); q != 0 {
		t.Fatalf("%d queued with one call in flight, want 0", q)
	}
	for i := 1; i < len(got); i++ {
		do(i)
		waitFor(t, "a queued call", func() bool { return b.Queued() == i })
	}
	time.Sleep(10 * time.Millisecond) // a wrong batcher would start another call now
	if n := p.cur.Load(); n != 1 {
		t.Fatalf("%d calls in flight, want 1", n)
	}
	close(p.gate)
	wg.Wait()
	for i, r := range got {
		if r != 2*i {
			t.Errorf("call %d: got %d, want %d", i, r, 2*i)
		}
	}
	if n := p.peak.Load(); n != 1 {
		t.Errorf("peak in flight %d, want 1", n)
	}
	if st := b.Stats(); st.Calls != int64(len(got)) || st.Batches != 1 || st.Batched != 3 {
		t.Errorf("stats %+v, want %d calls, the 3 queued in one batch", st, len(got))
	}
}

// TestOneInFlightUnderLoad: many callers, calls of random length; never
// more than one call or batch in flight, every call served exactly once
// with its own result, and the batcher idle afterwards.
func TestOneInFlightUnderLoad(t *testing.T) {
	const callers, perCaller = 32, 200
	p := newProbe()
	p.pause = func() {
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		}
	}
	b := p.batcher()
	var wrong atomic.Int64
	runCallers(callers, perCaller, func(a int) {
		if r, err := b.Do(context.Background(), a); err != nil || r != 2*a {
			wrong.Add(1)
		}
	})
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d calls got a wrong result or an error", n)
	}
	if n := p.peak.Load(); n != 1 {
		t.Errorf("peak in flight %d, want 1", n)
	}
	waitIdle(t, b) // before reading p.served: a batch may still be returning
	if len(p.served) != callers*perCaller {
		t.Errorf("%d arguments served, want %d", len(p.served), callers*perCaller)
	}
	for a, n := range p.served {
		if n != 1 {
			t.Errorf("argument %d served %d times, want once", a, n)
		}
	}
	if st := b.Stats(); st.Calls != callers*perCaller {
		t.Errorf("stats count %d calls, want %d", st.Calls, callers*perCaller)
	}
}

// TestQueuedCallerLeaves: with a call in flight, a queued caller whose
// context ends leaves at once and is never served; the other queued calls
// are served when the call in flight returns, and the batcher is idle
// afterwards.
func TestQueuedCallerLeaves(t *testing.T) {
	p := newProbe()
	p.gate = make(chan struct{})
	b := p.batcher()
	var wg sync.WaitGroup
	results := make([]int, 4)
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], _ = b.Do(context.Background(), i) }()
		if i == 0 {
			waitFor(t, "a call in flight", func() bool { return p.cur.Load() == 1 })
		} else {
			waitFor(t, "a queued call", func() bool { return b.Queued() == i })
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := b.Do(ctx, 3); left <- err }()
	waitFor(t, "the leaving call queued", func() bool { return b.Queued() == 3 })
	cancel()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("leaving caller: got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a queued caller whose context ended did not leave")
	}
	if q := b.Queued(); q != 2 {
		t.Fatalf("after one left: %d queued, want 2", q)
	}
	close(p.gate)
	wg.Wait()
	for i, r := range results[:3] {
		if r != 2*i {
			t.Errorf("call %d: got %d, want %d", i, r, 2*i)
		}
	}
	waitIdle(t, b)
	if n := p.served[3]; n != 0 {
		t.Errorf("the call that left was served %d times, want never", n)
	}
	if st := b.Stats(); st.Canceled != 1 || st.Calls != 3 {
		t.Errorf("stats %+v, want 3 calls served and 1 canceled", st)
	}
}

// TestCallersLeavingUnderLoad: callers with short deadlines leave while
// queued or while their batch is in flight; no call is served twice, every
// caller that got a result got its own, one call or batch is in flight at
// most, and the batcher ends idle.
func TestCallersLeavingUnderLoad(t *testing.T) {
	const callers, perCaller = 32, 100
	p := newProbe()
	p.pause = func() { time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) }
	b := p.batcher()
	var wrong, ok atomic.Int64
	runCallers(callers, perCaller, func(a int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(400))*time.Microsecond)
		r, err := b.Do(ctx, a)
		cancel()
		switch {
		case err == nil && r == 2*a:
			ok.Add(1)
		case err == nil || !errors.Is(err, context.DeadlineExceeded):
			wrong.Add(1)
		}
	})
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d calls got a wrong result or a wrong error", n)
	}
	if n := p.peak.Load(); n > 1 {
		t.Errorf("peak in flight %d, want at most 1", n)
	}
	waitIdle(t, b) // before reading p.served: callers that left return before their batch
	for a, n := range p.served {
		if n != 1 {
			t.Errorf("argument %d served %d times, want once", a, n)
		}
	}
	if int64(len(p.served)) < ok.Load() {
		t.Errorf("%d served, fewer than the %d results", len(p.served), ok.Load())
	}
	t.Logf("%d of %d calls answered, %d served, stats %+v", ok.Load(), callers*perCaller, len(p.served), b.Stats())
}

func (b *Batcher[A, R]) isBusy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy
}
