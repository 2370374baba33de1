package pay_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/pay"
	"payserver/internal/pay/paytest"
	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// acquireGrace is the limits API's grace in these tests.
const acquireGrace = 60 * time.Second

// t0 is where the tests' clocks start.
var t0 = time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)

// acquireLedger is a ledger of lost acquires on lim in dir, on clock, its
// workers looking again every few milliseconds of real time.
func acquireLedger(t *testing.T, lim pay.Limiter, dir string, clock *testutil.Clock, max int) *pay.Ledger {
	t.Helper()
	l, err := pay.NewLedger(paytest.NewMemStore(), lim, pay.LedgerOptions{Dir: dir, Max: max, Now: clock.Now,
		After: func(time.Duration) <-chan time.Time { return time.After(2 * time.Millisecond) }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLostAcquireSurvivesARestart: the member of an acquire whose answer
// was lost is on disk once KeepLostAcquire returns (before the limits API
// answers 503); a process killed then leaves it to the next run on the
// same Dir, which releases it once the grace has passed, and not before.
// Kept in memory only, the member stayed held by nobody until its window
// passed (a day, for a day window).
func TestLostAcquireSurvivesARestart(t *testing.T) {
	lim := localLimiter(t, "limits:\n  REFUND:ALIPAY: [{limit: 5, calendar: day}]\n")
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	h := mustAdmit(t, lim, key, "refunds\x00R1")
	dir, clock := t.TempDir(), testutil.NewClock(t0)
	first := acquireLedger(t, lim, dir, clock, 0)
	first.KeepLostAcquire(h, acquireGrace)
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 1 {
		t.Fatalf("%d files once KeepLostAcquire returned, want 1", len(files))
	}
	// The first process dies before the grace passes; the next starts.
	clock.Advance(acquireGrace - time.Second)
	second := acquireLedger(t, lim, dir, clock, 0)
	if got := second.Sizes()["acquire"]; got != 1 {
		t.Fatalf("the next run keeps %d lost acquires, want 1", got)
	}
	runUntil(t, second, func() bool { return true })
	time.Sleep(50 * time.Millisecond)
	if got := dayCount(t, lim, key); got != 1 {
		t.Fatalf("day window %d before the grace passed, want 1 (the member kept for its retry)", got)
	}
	clock.Advance(time.Second)
	waitFor(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		return dayCount(t, lim, key) == 0 && len(files) == 0 && second.Size() == 0
	})
}

// TestLostAcquireAcquiredAgainIsNotReleased: a member acquired again before
// its grace passed belongs to the retry and is not released; one lost
// again starts its grace again; the others are released once.
func TestLostAcquireAcquiredAgainIsNotReleased(t *testing.T) {
	lim := localLimiter(t, "limits:\n  REFUND:ALIPAY: [{limit: 5, calendar: day}]\n")
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	clock := testutil.NewClock(t0)
	l := acquireLedger(t, lim, t.TempDir(), clock, 0)
	for _, m := range []string{"R1", "R2", "R3"} {
		l.KeepLostAcquire(mustAdmit(t, lim, key, m), acquireGrace)
	}
	l.AcquiredAgain(key, "R2")
	clock.Advance(acquireGrace / 2)
	l.KeepLostAcquire(mustAdmit(t, lim, key, "R3"), acquireGrace) // lost again
	clock.Advance(acquireGrace / 2)
	runUntil(t, l, func() bool { return l.Size() == 1 })
	if got := dayCount(t, lim, key); got != 2 {
		t.Fatalf("day window %d after R1's grace, want 2 (R2 acquired again, R3 lost again)", got)
	}
	clock.Advance(acquireGrace / 2)
	waitFor(t, func() bool { return l.Size() == 0 })
	if got := dayCount(t, lim, key); got != 1 {
		t.Fatalf("day window %d after R3's second grace, want 1 (R2's, the retry's)", got)
	}
}

// TestFullLedgerRefusesAcquires: a ledger that keeps Max entries refuses
// new slots (Admitting, dependency "ledger"), lost acquires included, and
// keeps every entry it was handed: none is dropped.
func TestFullLedgerRefusesAcquires(t *testing.T) {
	lim := localLimiter(t, "limits:\n  REFUND:ALIPAY: [{limit: 5, calendar: day}]\n")
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	l := acquireLedger(t, lim, t.TempDir(), testutil.NewClock(t0), 2)
	if err := l.Admitting(); err != nil {
		t.Fatalf("an empty ledger: %v, want it admitting", err)
	}
	for _, m := range []string{"R1", "R2", "R3"} {
		l.KeepLostAcquire(mustAdmit(t, lim, key, m), acquireGrace)
	}
	err := l.Admitting()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.DependencyUnavailable || e.Details["dependency"] != "ledger" {
		t.Fatalf("a full ledger: %v, want DEPENDENCY_UNAVAILABLE, dependency ledger", err)
	}
	if got := l.Sizes()["acquire"]; got != 3 {
		t.Fatalf("%d lost acquires kept, want 3 (an entry handed over is never dropped)", got)
	}
}

// TestLostAcquireForAnotherAmountLeavesTheHeldSlot: a client holds R1 for
// 200; its acquire of R1 for 100 is refused by the store (the member is
// held for another amount), and that answer is lost. Released after the
// grace, the lost acquire must take only records of R1 for 100, of which
// there are none: the slot held for 200 stays.
func TestLostAcquireForAnotherAmountLeavesTheHeldSlot(t *testing.T) {
	lim := localLimiter(t, "limits:\n  REFUND:ALIPAY: [{limit: 5, calendar: day}]\n")
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	ctx := context.Background()
	if d, err := lim.Check(ctx, ratelimit.Request{Key: key, Member: "R1", Amount: 200, Currency: "CNY"}); err != nil || !d.Allowed {
		t.Fatalf("R1 for 200: %+v %v, want admitted", d, err)
	}
	lost, err := lim.Check(ctx, ratelimit.Request{Key: key, Member: "R1", Amount: 100, Currency: "CNY"})
	if err != nil || lost.Allowed || !lost.Conflict {
		t.Fatalf("R1 for 100: %+v %v, want refused as held for another amount", lost, err)
	}
	clock := testutil.NewClock(t0)
	l := acquireLedger(t, lim, t.TempDir(), clock, 0)
	l.KeepLostAcquire(lost.Hold, acquireGrace)
	clock.Advance(acquireGrace)
	runUntil(t, l, func() bool { return l.Size() == 0 })
	if got := dayCount(t, lim, key); got != 1 {
		t.Fatalf("day window %d once the lost acquire for 100 was released, want 1 (R1 held for 200)", got)
	}
}
