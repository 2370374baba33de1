package batch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestPanicLeavesBatcherUsable: a call served alone that panics (recovered
// by the caller, as the HTTP server's recovery does) must not leave the
// batcher busy, or every later call would queue forever.
func TestPanicLeavesBatcherUsable(t *testing.T) {
	b := &Batcher[int, int]{Max: 8,
		One: func(_ context.Context, a int) (int, error) {
			if a < 0 {
				panic("boom")
			}
			return a, nil
		},
		Many: func(_ context.Context, calls []*Call[int, int]) {
			for _, c := range calls {
				c.Res = c.Arg
			}
		},
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = b.Do(context.Background(), -1)
	}()
	if b.isBusy() {
		t.Fatal("after a panic: the batcher is busy, want idle")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got, err := b.Do(ctx, 7); err != nil || got != 7 {
		t.Fatalf("after a panic: %v, %v; want 7", got, err)
	}
}

// TestBatchesFormAndFitSplits: calls queued behind one in flight are served
// together, in order, split where Fit says; every caller gets its own
// result.
func TestBatchesFormAndFitSplits(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := &Batcher[int, string]{Max: 8,
		Fit: func(calls []*Call[int, string]) int { // one parity per batch
			for i, c := range calls {
				if c.Arg%2 != calls[0].Arg%2 {
					return i
				}
			}
			return len(calls)
		},
		One: func(_ context.Context, a int) (string, error) {
			if a == 0 {
				<-release
			}
			return fmt.Sprint(a), nil
		},
		Many: func(_ context.Context, calls []*Call[int, string]) {
			mu.Lock()
			sizes = append(sizes, len(calls))
			mu.Unlock()
			for _, c := range calls {
				c.Res = fmt.Sprint(c.Arg)
			}
		},
	}
	go func() { _, _ = b.Do(context.Background(), 0) }()
	for b.Queued() == 0 && !b.isBusy() {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	got := make([]string, 6)
	for i := 1; i <= 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = b.Do(context.Background(), []int{0, 2, 4, 1, 3, 6}[i]) }()
		for b.Queued() < i {
			time.Sleep(time.Millisecond)
		}
	}
	close(release)
	wg.Wait()
	if fmt.Sprint(got[1:]) != "[2 4 1 3 6]" {
		t.Fatalf("results %v", got[1:])
	}
	if fmt.Sprint(sizes) != "[2 2]" || b.Stats().Calls != 6 {
		t.Fatalf("batches %v (want [2 2] and one alone), stats %+v", sizes, b.Stats())
	}
}
