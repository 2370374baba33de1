package limitapi

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// lostLimiter answers every check as a lost answer (Unknown) while lost is
// set, else admits; it counts the checks and records the releases asked of
// it.
type lostLimiter struct {
	mu       sync.Mutex
	lost     bool
	checks   int
	released []string
}

func (l *lostLimiter) Check(_ context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks++
	d := ratelimit.Decision{Key: r.Key, Limit: 5, Count: 1, Remaining: 4, Source: ratelimit.SourceRedis, Hold: ratelimit.HoldOf(r.Key, r.Member)}
	if l.lost {
		d.Unknown, d.RetryAfter = true, time.Second
		return d, nil
	}
	d.Allowed = true
	return d, nil
}

func (l *lostLimiter) Release(_ context.Context, h ratelimit.Hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, h.Member)
	return nil
}
func (l *lostLimiter) ReleaseHeld(ctx context.Context, h ratelimit.Hold) (bool, error) {
	return true, l.Release(ctx, h)
}
func (l *lostLimiter) ReleaseAmount(context.Context, ratelimit.Hold) error { return nil }
func (l *lostLimiter) Throttled(context.Context, ratelimit.Hold, time.Duration) error {
	return nil
}
func (l *lostLimiter) Peek(context.Context, ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, nil
}

func (l *lostLimiter) setLost(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = v
}

func (l *lostLimiter) releases() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.released...)
}

// memLedger is a ledger in memory releasing on lim, not run.
func memLedger(t *testing.T, lim pay.Limiter) *pay.Ledger {
	t.Helper()
	l, err := pay.NewLedger(nil, lim, pay.LedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// t0 is where the tests' clocks start.
var t0 = time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)

// runLedger is a ledger on lim in dir ("": memory only), on clock, at
// most max entries (0: the default), its workers running until the test
// ends and looking again every few milliseconds of real time.
func runLedger(t *testing.T, lim pay.Limiter, dir string, clock *testutil.Clock, max int) *pay.Ledger {
	t.Helper()
	l, err := pay.NewLedger(nil, lim, pay.LedgerOptions{Dir: dir, Max: max, Now: clock.Now,
		After: func(time.Duration) <-chan time.Time { return time.After(2 * time.Millisecond) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// settled waits until l keeps no entry, then lets its workers run a
// little more, so that a release they would wrongly make is seen.
func settled(t *testing.T, l *pay.Ledger) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); l.Size() > 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the ledger keeps %d entries after 5 s, want none", l.Size())
		}
	}
	time.Sleep(30 * time.Millisecond)
}

// TestLostAnswerIsNever429: an acquire whose limiter answer was lost is
// 503 DEPENDENCY_UNAVAILABLE with dependency "limiter" and outcome
// "unknown", never REQUEST_LIMITED: the slot may be held, and a caller
// releases nothing after a 429.
func TestLostAnswerIsNever429(t *testing.T) {
	l := &lostLimiter{lost: true}
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	_, err = svc.Acquire(context.Background(), "refunds", AcquireRequest{Key: key, RequestID: "R1"})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.DependencyUnavailable || e.Details["dependency"] != "limiter" || e.Details["outcome"] != "unknown" {
		t.Fatalf("got %v, want DEPENDENCY_UNAVAILABLE with dependency limiter, outcome unknown", err)
	}
}

// TestLostAnswerIsReleasedUnlessRetried: the member a lost acquire may have
// recorded is released once LostAnswerGrace has passed on the clock,
// unless the same requestId was acquired again meanwhile.
func TestLostAnswerIsReleasedUnlessRetried(t *testing.T) {
	clock := testutil.NewClock(t0)
	l := &lostLimiter{lost: true}
	ledger := runLedger(t, l, "", clock, 0)
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	for _, id := range []string{"R1", "R2"} {
		if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: id}); apperr.CodeOf(err) != apperr.DependencyUnavailable {
			t.Fatalf("%s: got %v, want DEPENDENCY_UNAVAILABLE", id, err)
		}
	}
	l.setLost(false)
	// R2 is retried: its slot is the retry's now.
	if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "R2"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(LostAnswerGrace - time.Second)
	time.Sleep(30 * time.Millisecond)
	if got := l.releases(); len(got) != 0 {
		t.Fatalf("released %v before the grace passed, want nothing", got)
	}
	clock.Advance(time.Second)
	settled(t, ledger)
	if got := l.releases(); len(got) != 1 || got[0] != member("refunds", "R1") {
		t.Fatalf("released %v after the grace, want only R1's member, once (R2 was acquired again)", got)
	}
}

// TestLostAcquireSurvivesARestart: the member of a lost acquire is on
// disk before the 503 is answered, so a process killed within the grace
// leaves it to the next run on the same ledger directory, which releases
// it once the grace has passed. Kept in memory only, it stayed held by
// nobody until its window passed (a day, for a day window).
func TestLostAcquireSurvivesARestart(t *testing.T) {
	clock, dir := testutil.NewClock(t0), t.TempDir()
	l := &lostLimiter{lost: true}
	first, err := pay.NewLedger(nil, l, pay.LedgerOptions{Dir: dir, Now: clock.Now}) // killed before it runs
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: first})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	if _, err := svc.Acquire(context.Background(), "refunds", AcquireRequest{Key: key, RequestID: "R1"}); apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("got %v, want DEPENDENCY_UNAVAILABLE", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 1 {
		t.Fatalf("%d ledger files once the 503 was answered, want 1", len(files))
	}
	clock.Advance(LostAnswerGrace / 2)
	second := runLedger(t, l, dir, clock, 0)
	time.Sleep(30 * time.Millisecond)
	if got := l.releases(); len(got) != 0 {
		t.Fatalf("the next run released %v within the grace, want nothing (its client may retry)", got)
	}
	clock.Advance(LostAnswerGrace / 2)
	settled(t, second)
	if got := l.releases(); len(got) != 1 || got[0] != member("refunds", "R1") {
		t.Fatalf("the next run released %v after the grace, want R1's member once", got)
	}
}

// TestFullLedgerRefusesAcquires: while the ledger is full an acquire is
// answered 503 with dependency "ledger" before any slot is taken (the
// limiter is not asked), so no lost answer arises that the ledger could
// not keep; the one it kept is still released.
func TestFullLedgerRefusesAcquires(t *testing.T) {
	clock := testutil.NewClock(t0)
	l := &lostLimiter{lost: true}
	ledger := runLedger(t, l, t.TempDir(), clock, 1)
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: ledger})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "R1"}); apperr.CodeOf(err) != apperr.DependencyUnavailable {
		t.Fatalf("R1: got %v, want DEPENDENCY_UNAVAILABLE", err)
	}
	_, err = svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "R2"})
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.DependencyUnavailable || e.Details["dependency"] != "ledger" {
		t.Fatalf("R2 with the ledger full: got %v, want DEPENDENCY_UNAVAILABLE with dependency ledger", err)
	}
	l.mu.Lock()
	checks := l.checks
	l.mu.Unlock()
	if checks != 1 {
		t.Fatalf("the limiter was asked %d times, want once (R2 refused before taking a slot)", checks)
	}
	clock.Advance(LostAnswerGrace)
	settled(t, ledger)
	if got := l.releases(); len(got) != 1 || got[0] != member("refunds", "R1") {
		t.Fatalf("released %v, want R1's member once", got)
	}
	if err := ledger.Admitting(); err != nil {
		t.Fatalf("the ledger, empty again: %v, want it admitting", err)
	}
}
