package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// refusing refuses every check with a retry-after of wait, counting them.
type refusing struct {
	mu     sync.Mutex
	checks int
	wait   time.Duration
}

func (r *refusing) Check(_ context.Context, req Request) (Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks++
	return Decision{Key: req.Key, Source: SourceRedis, Limit: 1, Window: time.Second, RetryAfter: r.wait}, nil
}

// TestWaitNeverChecksAtItsDeadline: a window that has room exactly when the
// maximum wait ends is no reason to check again: that check would start at
// or past the deadline. (The clock stands still, so the turn and the
// deadline coincide.)
func TestWaitNeverChecksAtItsDeadline(t *testing.T) {
	inner := &refusing{wait: 100 * time.Millisecond}
	t0 := time.Now()
	w := newWaiter(inner.Check, waitOptions{maxWaiters: DefaultMaxWaiters, now: func() time.Time { return t0 }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := w.run(ctx, Request{Key: Key{BizType: "B", Channel: "C"}, Member: "m", MaxWait: 100 * time.Millisecond})
	if err != nil || d.Allowed {
		t.Fatalf("got allowed %v, %v; want a refusal", d.Allowed, err)
	}
	if inner.checks != 1 {
		t.Errorf("%d checks, want 1: none at the deadline", inner.checks)
	}
}

// unknownOnce answers its first check with a refusal whose outcome is
// unknown (its call was lost), holding that request's slot, and refuses
// every later one.
type unknownOnce struct {
	refusing
	calls int
}

func (u *unknownOnce) Check(_ context.Context, r Request) (Decision, error) {
	u.calls++
	d := Decision{Key: r.Key, RetryAfter: time.Second, Limit: 1, Count: 1}
	if u.calls == 1 {
		d.Unknown, d.Hold = true, HoldOf(r.Key, r.Member)
	}
	return d, nil
}

// A lost answer is its own request's: it goes back to that request at once
// and is never the refusal handed to the next one, which would settle (and
// release) a slot it does not hold.
func TestUnknownOutcomeIsNeverShared(t *testing.T) {
	inner := &unknownOnce{}
	w := newWaiter(inner.Check, waitOptions{maxWaiters: DefaultMaxWaiters, now: time.Now})
	key := Key{BizType: "B", Channel: "C"}
	a, err := w.run(context.Background(), Request{Key: key, Member: "a", MaxWait: 2 * time.Second})
	if err != nil || !a.Unknown || a.Hold.Member != "a" {
		t.Fatalf("a: %+v %v, want its own unknown outcome", a, err)
	}
	b, err := w.run(context.Background(), Request{Key: key, Member: "b", MaxWait: 10 * time.Millisecond})
	if err != nil || b.Unknown || b.Hold.Member == "a" {
		t.Fatalf("b: %+v %v, want a refusal of its own, not a's unknown outcome", b, err)
	}
}
