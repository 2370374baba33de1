package limitwait_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/limitwait"
	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// newLimiter returns a limiter on the real Redis enforcing limit per window
// on a fresh key, and that key.
func newLimiter(t *testing.T, limit int, window time.Duration) (*ratelimit.Limiter, ratelimit.Key) {
	t.Helper()
	return newLimiterRule(t, fmt.Sprintf("{limit: %d, window: %s}", limit, window))
}

// newLimiterRule returns a limiter on the real Redis enforcing rule (a
// limits document's rule, e.g. "{amount: 1000, window: 2s}") on a fresh
// key, and that key.
func newLimiterRule(t *testing.T, rule string) (*ratelimit.Limiter, ratelimit.Key) {
	t.Helper()
	store, err := ratelimit.NewRedisStore(testutil.MustRedis(t), "ps-test-wait:")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(store, ratelimit.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: testutil.UniqueName("WAIT"), Channel: "ALIPAY"}
	parsed, err := limits.Parse([]byte(fmt.Sprintf("limits:\n  %s: %s\n", key, rule)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	l.SetConfig(cfg)
	return l, key
}

type outcomes struct {
	mu  sync.Mutex
	got []limitwait.Outcome
}

func (o *outcomes) Waited(_ ratelimit.Key, out limitwait.Outcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, out)
}

func (o *outcomes) list() []limitwait.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]limitwait.Outcome(nil), o.got...)
}

func newWaiter(t *testing.T, l limitwait.Limiter, opts limitwait.Options) *limitwait.Waiter {
	t.Helper()
	w, err := limitwait.New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func fill(t *testing.T, l *ratelimit.Limiter, key ratelimit.Key, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		d, err := l.Allow(context.Background(), key, fmt.Sprintf("fill-%d", i))
		if err != nil || !d.Allowed {
			t.Fatalf("fill %d: allowed %v, err %v", i, d.Allowed, err)
		}
	}
}

// TestWaitAdmittedWhenWindowFrees: a refused request with a maximum wait is
// admitted once the window slides past the admissions that filled it, not
// before, and the window never holds more than its limit.
func TestWaitAdmittedWhenWindowFrees(t *testing.T) {
	l, key := newLimiter(t, 2, 600*time.Millisecond)
	obs := &outcomes{}
	w := newWaiter(t, l, limitwait.Options{Observer: obs})
	start := time.Now()
	fill(t, l, key, 2)
	d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: "waiter", MaxWait: 3 * time.Second})
	elapsed := time.Since(start)
	if err != nil || !d.Allowed {
		t.Fatalf("got allowed %v err %v, want admitted after waiting", d.Allowed, err)
	}
	if elapsed < 550*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("admitted after %v, want about the window (600ms)", elapsed)
	}
	_, counts, err := l.Usage(context.Background(), key)
	if err != nil || counts[0] > 2 {
		t.Errorf("window holds %v (err %v), want at most the limit 2", counts, err)
	}
	if got := obs.list(); len(got) != 1 || got[0] != limitwait.Admitted {
		t.Errorf("outcomes %v, want [admitted]", got)
	}
}

// TestWaitNeverPastMaxWait: when the window frees only after the maximum
// wait, the answer is a refusal at once, with the time until room.
func TestWaitNeverPastMaxWait(t *testing.T) {
	l, key := newLimiter(t, 1, 3*time.Second)
	w := newWaiter(t, l, limitwait.Options{})
	fill(t, l, key, 1)
	start := time.Now()
	d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: "late", MaxWait: 400 * time.Millisecond})
	elapsed := time.Since(start)
	if err != nil || d.Allowed {
		t.Fatalf("got allowed %v err %v, want a refusal", d.Allowed, err)
	}
	if elapsed > 400*time.Millisecond {
		t.Errorf("answered after %v, past the maximum wait 400ms", elapsed)
	}
	if d.RetryAfter < 2*time.Second || d.Limit != 1 {
		t.Errorf("refusal retryAfter %v limit %d, want about 3s and 1", d.RetryAfter, d.Limit)
	}
}

// TestWaitFIFO: waiters of one key are admitted in arrival order. (Each
// waiter sleeping on its own RetryAfter and retrying would admit them in
// whatever order their retries reach Redis.)
func TestWaitFIFO(t *testing.T) {
	l, key := newLimiter(t, 1, 250*time.Millisecond)
	w := newWaiter(t, l, limitwait.Options{})
	fill(t, l, key, 1)
	const n = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: fmt.Sprintf("w-%d", i), MaxWait: 5 * time.Second})
			if err != nil || !d.Allowed {
				t.Errorf("waiter %d: allowed %v err %v", i, d.Allowed, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
		// Let waiter i join before i+1 arrives.
		waitUntil(t, func() bool { return w.Waiting(key) == i+1 })
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("admission order %v, want arrival order 0..%d", order, n-1)
		}
	}
}

// TestWaitBoundedWaiters: past MaxWaiters waiters on a key, a request is
// refused at once.
func TestWaitBoundedWaiters(t *testing.T) {
	l, key := newLimiter(t, 1, 2*time.Second)
	obs := &outcomes{}
	w := newWaiter(t, l, limitwait.Options{MaxWaiters: 2, Observer: obs})
	fill(t, l, key, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = w.Check(ctx, ratelimit.Request{Key: key, Member: fmt.Sprintf("q-%d", i), MaxWait: 5 * time.Second})
		}()
	}
	waitUntil(t, func() bool { return w.Waiting(key) == 2 })
	start := time.Now()
	d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: "third", MaxWait: 5 * time.Second})
	if err != nil || d.Allowed || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("third waiter: allowed %v err %v after %v, want an immediate refusal", d.Allowed, err, time.Since(start))
	}
	if d.RetryAfter <= 0 || d.Limit != 1 {
		t.Errorf("refusal retryAfter %v limit %d, want > 0 and 1", d.RetryAfter, d.Limit)
	}
	cancel()
	wg.Wait()
	got := obs.list()
	if len(got) != 3 || got[0] != limitwait.QueueFull {
		t.Errorf("outcomes %v, want queue_full then two cancelled", got)
	}
}

// TestWaitCancelled: a waiter whose context ends stops at once and leaves
// the queue.
func TestWaitCancelled(t *testing.T) {
	l, key := newLimiter(t, 1, 5*time.Second)
	w := newWaiter(t, l, limitwait.Options{})
	fill(t, l, key, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := w.Check(ctx, ratelimit.Request{Key: key, Member: "leaver", MaxWait: 10 * time.Second})
		done <- err
	}()
	waitUntil(t, func() bool { return w.Waiting(key) == 1 })
	// The window frees only after 5s, past no deadline (10s), so it waits.
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a cancelled waiter still waits after 1s")
	}
	if n := w.Waiting(key); n != 0 {
		t.Errorf("%d waiters left, want 0", n)
	}
}

// TestWaitNeverBeyondLimit: many concurrent waiters are admitted no faster
// than the window allows.
func TestWaitNeverBeyondLimit(t *testing.T) {
	const limit, window = 3, 400 * time.Millisecond
	l, key := newLimiter(t, limit, window)
	w := newWaiter(t, l, limitwait.Options{})
	var mu sync.Mutex
	var admitted []time.Time
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: fmt.Sprintf("m-%d", i), MaxWait: 1500 * time.Millisecond})
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				mu.Lock()
				admitted = append(admitted, time.Now())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Within 1.5s a 400ms window admits at most 3 per window start: 0,
	// 400, 800, 1200ms -> 12; fewer is fine, more is over-admission.
	if n := len(admitted); n > 4*limit || n < limit {
		t.Errorf("admitted %d of 20 within %v, want %d..%d", n, time.Since(start), limit, 4*limit)
	}
	_, counts, err := l.Usage(context.Background(), key)
	if err != nil || counts[0] > limit {
		t.Errorf("window holds %v (err %v), want at most %d", counts, err, limit)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 3s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWaitClosedKey: a closed key (limit 0) has no reopening time, so a
// request with a maximum wait is refused at once instead of re-checking
// until its deadline.
func TestWaitClosedKey(t *testing.T) {
	l, key := newLimiter(t, 0, time.Second)
	obs := &outcomes{}
	w := newWaiter(t, l, limitwait.Options{Observer: obs})
	start := time.Now()
	d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: "closed", MaxWait: 2 * time.Second})
	if err != nil || d.Allowed || !d.Closed() || time.Since(start) > 200*time.Millisecond {
		t.Fatalf("got allowed %v closed %v err %v after %v, want an immediate closed refusal", d.Allowed, d.Closed(), err, time.Since(start))
	}
	if got := obs.list(); len(got) != 0 {
		t.Errorf("outcomes %v, want none (no wait)", got)
	}
}

// TestAmountRefusalsNeverQueue: an amount refusal is the request's own: it
// is answered at once, never queued, and never handed to another request:
// a smaller payment that fits is admitted while a larger one could wait.
func TestAmountRefusalsNeverQueue(t *testing.T) {
	l, key := newLimiterRule(t, "{amount: 1000, window: 2s}")
	w := newWaiter(t, l, limitwait.Options{})
	pay := func(member string, amount int64, maxWait time.Duration) ratelimit.Decision {
		d, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: member, Amount: amount, Currency: "CNY", MaxWait: maxWait})
		if err != nil {
			t.Error(err)
		}
		return d
	}
	if d := pay("p0", 900, time.Second); !d.Allowed {
		t.Fatalf("p0: %+v", d)
	}
	// p1 (500 on 100 left) could wait for p0 to leave, within 3 s.
	done := make(chan ratelimit.Decision, 1)
	go func() { done <- pay("p1", 500, 3*time.Second) }()
	time.Sleep(200 * time.Millisecond)
	if d := pay("p2", 100, 50*time.Millisecond); !d.Allowed {
		t.Fatalf("p2 (100 on 100 left) while p1 (500) is refused: %+v, want admitted, not p1's refusal", d)
	}
	<-done
}

// refusing refuses every check with a retry-after of wait, counting them.
type refusing struct {
	mu     sync.Mutex
	checks int
	wait   time.Duration
}

func (r *refusing) Check(_ context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks++
	return ratelimit.Decision{Key: req.Key, Source: ratelimit.SourceRedis, Limit: 1, Window: time.Second, RetryAfter: r.wait}, nil
}
func (r *refusing) Release(context.Context, ratelimit.Hold) error                { return nil }
func (r *refusing) ReleaseAmount(context.Context, ratelimit.Hold) error          { return nil }
func (*refusing) Throttled(context.Context, ratelimit.Hold, time.Duration) error { return nil }

// TestWaitNeverChecksAtItsDeadline: a window that has room exactly when the
// maximum wait ends is no reason to check again: that check would start at
// or past the deadline. (The clock stands still, so the turn and the
// deadline coincide.)
func TestWaitNeverChecksAtItsDeadline(t *testing.T) {
	inner := &refusing{wait: 100 * time.Millisecond}
	t0 := time.Now()
	w := newWaiter(t, inner, limitwait.Options{Now: func() time.Time { return t0 }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := w.Check(ctx, ratelimit.Request{Key: ratelimit.Key{BizType: "B", Channel: "C"}, Member: "m", MaxWait: 100 * time.Millisecond})
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

func (u *unknownOnce) Check(_ context.Context, r ratelimit.Request) (ratelimit.Decision, error) {
	u.calls++
	d := ratelimit.Decision{Key: r.Key, RetryAfter: time.Second, Limit: 1, Count: 1}
	if u.calls == 1 {
		d.Unknown, d.Hold = true, ratelimit.HoldOf(r.Key, r.Member)
	}
	return d, nil
}

// A lost answer is its own request's: it goes back to that request at once
// and is never the refusal handed to the next one, which would settle (and
// release) a slot it does not hold.
func TestUnknownOutcomeIsNeverShared(t *testing.T) {
	inner := &unknownOnce{}
	w := newWaiter(t, inner, limitwait.Options{})
	key := ratelimit.Key{BizType: "B", Channel: "C"}
	a, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: "a", MaxWait: 2 * time.Second})
	if err != nil || !a.Unknown || a.Hold.Member != "a" {
		t.Fatalf("a: %+v %v, want its own unknown outcome", a, err)
	}
	b, err := w.Check(context.Background(), ratelimit.Request{Key: key, Member: "b", MaxWait: 10 * time.Millisecond})
	if err != nil || b.Unknown || b.Hold.Member == "a" {
		t.Fatalf("b: %+v %v, want a refusal of its own, not a's unknown outcome", b, err)
	}
}
