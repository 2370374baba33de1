package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// newWaitLimiter returns a limiter with opts on the real Redis enforcing
// limit per window on a fresh key, and that key.
func newWaitLimiter(t *testing.T, limit int, window time.Duration, opts ratelimit.Options) (*ratelimit.Limiter, ratelimit.Key) {
	t.Helper()
	return newWaitLimiterRule(t, fmt.Sprintf("{limit: %d, window: %s}", limit, window), opts)
}

// newWaitLimiterRule returns a limiter with opts on the real Redis
// enforcing rule (a limits document's rule, e.g. "{amount: 1000, window:
// 2s}") on a fresh key, and that key.
func newWaitLimiterRule(t *testing.T, rule string, opts ratelimit.Options) (*ratelimit.Limiter, ratelimit.Key) {
	t.Helper()
	store, err := redisstore.New(testutil.MustRedis(t), redisstore.Options{Prefix: "ps-test-wait:"})
	if err != nil {
		t.Fatal(err)
	}
	opts.Timeout = time.Second
	l, err := ratelimit.New(store, opts)
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

type waitOutcomes struct {
	mu  sync.Mutex
	got []ratelimit.WaitOutcome
}

func (o *waitOutcomes) Waited(_ ratelimit.Key, out ratelimit.WaitOutcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, out)
}

func (o *waitOutcomes) list() []ratelimit.WaitOutcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]ratelimit.WaitOutcome(nil), o.got...)
}

func fillWait(t *testing.T, l *ratelimit.Limiter, key ratelimit.Key, n int) {
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
	obs := &waitOutcomes{}
	l, key := newWaitLimiter(t, 2, 600*time.Millisecond, ratelimit.Options{WaitObserver: obs})
	start := time.Now()
	fillWait(t, l, key, 2)
	d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "waiter", MaxWait: 3 * time.Second})
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
	if got := obs.list(); len(got) != 1 || got[0] != ratelimit.WaitAdmitted {
		t.Errorf("outcomes %v, want [admitted]", got)
	}
}

// TestWaitNeverPastMaxWait: when the window frees only after the maximum
// wait, the answer is a refusal at once, with the time until room.
func TestWaitNeverPastMaxWait(t *testing.T) {
	l, key := newWaitLimiter(t, 1, 3*time.Second, ratelimit.Options{})
	fillWait(t, l, key, 1)
	start := time.Now()
	d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "late", MaxWait: 400 * time.Millisecond})
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
	l, key := newWaitLimiter(t, 1, 250*time.Millisecond, ratelimit.Options{})
	fillWait(t, l, key, 1)
	const n = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: fmt.Sprintf("w-%d", i), MaxWait: 5 * time.Second})
			if err != nil || !d.Allowed {
				t.Errorf("waiter %d: allowed %v err %v", i, d.Allowed, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
		// Let waiter i join before i+1 arrives.
		waitUntilTrue(t, func() bool { return l.Waiting(key) == i+1 })
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
	obs := &waitOutcomes{}
	l, key := newWaitLimiter(t, 1, 2*time.Second, ratelimit.Options{MaxWaiters: 2, WaitObserver: obs})
	fillWait(t, l, key, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = l.Check(ctx, ratelimit.Request{Key: key, Member: fmt.Sprintf("q-%d", i), MaxWait: 5 * time.Second})
		}()
	}
	waitUntilTrue(t, func() bool { return l.Waiting(key) == 2 })
	start := time.Now()
	d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "third", MaxWait: 5 * time.Second})
	if err != nil || d.Allowed || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("third waiter: allowed %v err %v after %v, want an immediate refusal", d.Allowed, err, time.Since(start))
	}
	if d.RetryAfter <= 0 || d.Limit != 1 {
		t.Errorf("refusal retryAfter %v limit %d, want > 0 and 1", d.RetryAfter, d.Limit)
	}
	cancel()
	wg.Wait()
	got := obs.list()
	if len(got) != 3 || got[0] != ratelimit.WaitQueueFull {
		t.Errorf("outcomes %v, want queue_full then two cancelled", got)
	}
}

// TestWaitCancelled: a waiter whose context ends stops at once and leaves
// the queue.
func TestWaitCancelled(t *testing.T) {
	l, key := newWaitLimiter(t, 1, 5*time.Second, ratelimit.Options{})
	fillWait(t, l, key, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "leaver", MaxWait: 10 * time.Second})
		done <- err
	}()
	waitUntilTrue(t, func() bool { return l.Waiting(key) == 1 })
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
	if n := l.Waiting(key); n != 0 {
		t.Errorf("%d waiters left, want 0", n)
	}
}

// TestWaitNeverBeyondLimit: many concurrent waiters are admitted no faster
// than the window allows.
func TestWaitNeverBeyondLimit(t *testing.T) {
	const limit, window = 3, 400 * time.Millisecond
	l, key := newWaitLimiter(t, limit, window, ratelimit.Options{})
	var mu sync.Mutex
	var admitted []time.Time
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: fmt.Sprintf("m-%d", i), MaxWait: 1500 * time.Millisecond})
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

func waitUntilTrue(t *testing.T, cond func() bool) {
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
	obs := &waitOutcomes{}
	l, key := newWaitLimiter(t, 0, time.Second, ratelimit.Options{WaitObserver: obs})
	start := time.Now()
	d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "closed", MaxWait: 2 * time.Second})
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
	l, key := newWaitLimiterRule(t, "{amount: 1000, window: 2s}", ratelimit.Options{})
	pay := func(member string, amount int64, maxWait time.Duration) ratelimit.Decision {
		d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: member, Amount: amount, Currency: "CNY", MaxWait: maxWait})
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

// TestWaitNeverHandsOnAMerchantRefusal: a refusal by a merchant's own
// limit is that merchant's. The request waits in its merchant's queue
// until its merchant's own use falls, and a request of another merchant,
// waiting or not, is decided on its own: admitted at once on a nearly
// empty key, never refused in the other merchant's name.
func TestWaitNeverHandsOnAMerchantRefusal(t *testing.T) {
	l, key := newWaitLimiterRule(t, "{limit: 100, window: 1s, perMerchant: 1}", ratelimit.Options{})
	ctx := context.Background()
	if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "m2-a", Merchant: "M2"}); err != nil || !d.Allowed {
		t.Fatalf("M2's first: %+v %v, want admitted", d, err)
	}
	var wg sync.WaitGroup
	var m2 ratelimit.Decision
	var m2Took time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		m2, _ = l.Check(ctx, ratelimit.Request{Key: key, Member: "m2-b", Merchant: "M2", MaxWait: 1500 * time.Millisecond})
		m2Took = time.Since(start)
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	m1, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "m1-a", Merchant: "M1", MaxWait: 200 * time.Millisecond})
	m1Took := time.Since(start)
	wg.Wait()
	if err != nil || !m1.Allowed || m1Took > 100*time.Millisecond {
		t.Errorf("M1 on a nearly empty key: allowed %v merchant %q request merchant %q after %v, err %v; want admitted at once", m1.Allowed, m1.Merchant, m1.RequestMerchant, m1Took, err)
	}
	if !m2.Allowed || m2Took < 800*time.Millisecond {
		t.Errorf("M2 over its own limit with 1.5 s to wait: allowed %v merchant %q after %v; want admitted once its own use fell, about 1 s", m2.Allowed, m2.Merchant, m2Took)
	}
}

// TestAKeyWaiterRefusedByItsMerchantWaitsOnInItsQueue: a request waiting in
// the key's queue (the key's 1 s window full) whose turn comes when the
// key has room but its merchant's own 3 s use has none moves to its
// merchant's queue, keeping its deadline, and is admitted once that use
// falls; the key's queue is not held up by it.
func TestAKeyWaiterRefusedByItsMerchantWaitsOnInItsQueue(t *testing.T) {
	l, key := newWaitLimiterRule(t, "[{limit: 2, window: 1s}, {limit: 100, window: 3s, perMerchant: 1}]", ratelimit.Options{})
	ctx := context.Background()
	for _, r := range []ratelimit.Request{{Key: key, Member: "a", Merchant: "M1"}, {Key: key, Member: "b", Merchant: "M2"}} {
		if d, err := l.Check(ctx, r); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v %v, want admitted", r.Member, d, err)
		}
	}
	// M3 waits in the key's queue first (the 1 s window is full), M1
	// behind it, entering without a check of its own.
	type answer struct {
		d    ratelimit.Decision
		took time.Duration
	}
	m3, m1 := make(chan answer, 1), make(chan answer, 1)
	wait := func(member, merchant string, out chan answer) {
		start := time.Now()
		d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: member, Merchant: merchant, MaxWait: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		out <- answer{d, time.Since(start)}
	}
	go wait("c", "M3", m3)
	time.Sleep(50 * time.Millisecond)
	if n := l.Waiting(key); n != 1 {
		t.Fatalf("%d waiting, want M3 in the key's queue", n)
	}
	go wait("d", "M1", m1)
	a3, a1 := <-m3, <-m1
	if !a3.d.Allowed || a3.took > 1500*time.Millisecond {
		t.Errorf("M3: allowed %v after %v, want admitted once the 1 s window slid", a3.d.Allowed, a3.took)
	}
	if !a1.d.Allowed || a1.took < 2500*time.Millisecond || a1.took > 4*time.Second {
		t.Errorf("M1: allowed %v after %v, want admitted once its own 3 s use fell (about 3 s)", a1.d.Allowed, a1.took)
	}
}
