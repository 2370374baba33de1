package batch

import (
	"context"
	"errors"
	"fmt"
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

func (p *probe) batcher(inFlight int) *Batcher[int, int] {
	return &Batcher[int, int]{Max: 8, InFlight: inFlight,
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
	waitFor(t, "the batcher to be idle", func() bool { return b.inFlight0() == 0 && b.Queued() == 0 })
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

// TestInFlightServesAloneUpToTheBound: with InFlight n, the first n calls
// that find the others busy are each served at once, alone and side by
// side; the next one queues; when one in flight returns, the queue goes as
// one batch in its place. Zero and one both mean one.
func TestInFlightServesAloneUpToTheBound(t *testing.T) {
	for _, tc := range []struct{ inFlight, want int }{{0, 1}, {1, 1}, {2, 2}, {4, 4}} {
		t.Run(fmt.Sprintf("InFlight=%d", tc.inFlight), func(t *testing.T) {
			p := newProbe()
			p.gate = make(chan struct{})
			b := p.batcher(tc.inFlight)
			var wg sync.WaitGroup
			got := make([]int, tc.want+3)
			do := func(i int) {
				wg.Add(1)
				go func() { defer wg.Done(); got[i], _ = b.Do(context.Background(), i) }()
			}
			for i := range tc.want {
				do(i)
			}
			waitFor(t, "calls in flight", func() bool { return p.cur.Load() == int64(tc.want) })
			if q := b.Queued(); q != 0 {
				t.Fatalf("InFlight %d: %d queued with %d in flight, want 0", tc.inFlight, q, tc.want)
			}
			for i := tc.want; i < len(got); i++ {
				do(i)
				waitFor(t, "a queued call", func() bool { return b.Queued() == i-tc.want+1 })
			}
			time.Sleep(10 * time.Millisecond) // a wrong batcher would start another call now
			if got, want := p.cur.Load(), int64(tc.want); got != want {
				t.Fatalf("InFlight %d: %d calls in flight, want %d", tc.inFlight, got, want)
			}
			close(p.gate)
			wg.Wait()
			for i, r := range got {
				if r != 2*i {
					t.Errorf("call %d: got %d, want %d", i, r, 2*i)
				}
			}
			if got, want := p.peak.Load(), int64(tc.want); got != want {
				t.Errorf("InFlight %d: peak in flight %d, want %d", tc.inFlight, got, want)
			}
			if st := b.Stats(); st.Calls != int64(len(got)) || st.Batches != 1 || st.Batched != 3 {
				t.Errorf("InFlight %d: stats %+v, want %d calls, the 3 queued in one batch", tc.inFlight, st, len(got))
			}
		})
	}
}

// TestInFlightBoundUnderLoad: many callers, calls of random length; never
// more than InFlight calls or batches in flight, the bound reached, every
// call served exactly once with its own result, and the batcher idle
// afterwards.
func TestInFlightBoundUnderLoad(t *testing.T) {
	const callers, perCaller = 32, 200
	for _, inFlight := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("InFlight=%d", inFlight), func(t *testing.T) {
			p := newProbe()
			p.pause = func() {
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				}
			}
			b := p.batcher(inFlight)
			var wrong atomic.Int64
			runCallers(callers, perCaller, func(a int) {
				if r, err := b.Do(context.Background(), a); err != nil || r != 2*a {
					wrong.Add(1)
				}
			})
			if n := wrong.Load(); n != 0 {
				t.Fatalf("InFlight %d: %d calls got a wrong result or an error", inFlight, n)
			}
			if got, want := p.peak.Load(), int64(inFlight); got != want {
				t.Errorf("InFlight %d: peak in flight %d, want %d", inFlight, got, want)
			}
			waitIdle(t, b) // before reading p.served: a batch may still be returning
			if len(p.served) != callers*perCaller {
				t.Errorf("InFlight %d: %d arguments served, want %d", inFlight, len(p.served), callers*perCaller)
			}
			for a, n := range p.served {
				if n != 1 {
					t.Errorf("InFlight %d: argument %d served %d times, want once", inFlight, a, n)
				}
			}
			if st := b.Stats(); st.Calls != callers*perCaller {
				t.Errorf("InFlight %d: stats count %d calls, want %d", inFlight, st.Calls, callers*perCaller)
			}
		})
	}
}

// TestInFlightQueuedCallerLeaves: with InFlight 2 and both places taken, a
// queued caller whose context ends leaves at once and is never served; the
// other queued calls are served when a place frees, and the batcher is idle
// afterwards.
func TestInFlightQueuedCallerLeaves(t *testing.T) {
	p := newProbe()
	p.gate = make(chan struct{})
	b := p.batcher(2)
	var wg sync.WaitGroup
	results := make([]int, 5)
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], _ = b.Do(context.Background(), i) }()
	}
	waitFor(t, "two calls in flight", func() bool { return p.cur.Load() == 2 })
	for i := 2; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], _ = b.Do(context.Background(), i) }()
		waitFor(t, "a queued call", func() bool { return b.Queued() == i-1 })
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { _, err := b.Do(ctx, 4); left <- err }()
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
	for i, r := range results[:4] {
		if r != 2*i {
			t.Errorf("call %d: got %d, want %d", i, r, 2*i)
		}
	}
	waitIdle(t, b)
	if n := p.served[4]; n != 0 {
		t.Errorf("the call that left was served %d times, want never", n)
	}
	if st := b.Stats(); st.Canceled != 1 || st.Calls != 4 {
		t.Errorf("stats %+v, want 4 calls served and 1 canceled", st)
	}
}

// TestInFlightCallersLeavingUnderLoad: callers with short deadlines leave
// while queued or while their batch is in flight; no call is served twice,
// every caller that got a result got its own, the bound holds, and the
// batcher ends idle.
func TestInFlightCallersLeavingUnderLoad(t *testing.T) {
	const callers, perCaller = 32, 100
	for _, inFlight := range []int{1, 2} {
		t.Run(fmt.Sprintf("InFlight=%d", inFlight), func(t *testing.T) {
			p := newProbe()
			p.pause = func() { time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) }
			b := p.batcher(inFlight)
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
				t.Fatalf("InFlight %d: %d calls got a wrong result or a wrong error", inFlight, n)
			}
			if got := p.peak.Load(); got > int64(inFlight) {
				t.Errorf("InFlight %d: peak in flight %d, want at most %d", inFlight, got, inFlight)
			}
			waitIdle(t, b) // before reading p.served: callers that left return before their batch
			for a, n := range p.served {
				if n != 1 {
					t.Errorf("InFlight %d: argument %d served %d times, want once", inFlight, a, n)
				}
			}
			if int64(len(p.served)) < ok.Load() {
				t.Errorf("InFlight %d: %d served, fewer than the %d results", inFlight, len(p.served), ok.Load())
			}
			t.Logf("InFlight %d: %d of %d calls answered, %d served, stats %+v", inFlight, ok.Load(), callers*perCaller, len(p.served), b.Stats())
		})
	}
}

func (b *Batcher[A, R]) inFlight0() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}
