package limitapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// lostLimiter answers every check as a lost answer (Unknown) while lost is
// set, else admits; it records the releases asked of it.
type lostLimiter struct {
	mu       sync.Mutex
	lost     bool
	released []string
}

func (l *lostLimiter) Check(_ context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
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

func (l *lostLimiter) releases() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.released...)
}

// TestLostAnswerIsNever429: an acquire whose limiter answer was lost is
// 503 DEPENDENCY_UNAVAILABLE with dependency "limiter" and outcome
// "unknown", never REQUEST_LIMITED: the slot may be held, and a caller
// releases nothing after a 429.
func TestLostAnswerIsNever429(t *testing.T) {
	l := &lostLimiter{lost: true}
	svc, err := NewService(Options{Admit: l, Peek: l})
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
	now := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	l := &lostLimiter{lost: true}
	svc, err := NewService(Options{Admit: l, Peek: l, Now: func() time.Time { return now }})
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
	l.mu.Lock()
	l.lost = false
	l.mu.Unlock()
	// R2 is retried: its slot is the retry's now.
	if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "R2"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(LostAnswerGrace - time.Second)
	svc.SweepLostAnswers(ctx)
	if got := l.releases(); len(got) != 0 {
		t.Fatalf("released %v before the grace passed, want nothing", got)
	}
	now = now.Add(time.Second)
	svc.SweepLostAnswers(ctx)
	if got := l.releases(); len(got) != 1 || got[0] != member("refunds", "R1") {
		t.Fatalf("released %v after the grace, want only R1's member (R2 was acquired again)", got)
	}
	svc.SweepLostAnswers(ctx)
	if got := l.releases(); len(got) != 1 {
		t.Fatalf("released %v after a second sweep, want R1 once", got)
	}
}
