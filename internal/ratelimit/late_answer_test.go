package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// lateStore decides every check on a shared store (standing in for Redis,
// which other instances also use) and then, for the calls that fail() picks,
// loses the answer: the caller sees a timeout although the store decided.
type lateStore struct {
	shared ratelimit.Store
	calls  atomic.Int64
	fail   func(call int64) bool
}

func (s *lateStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	n := s.calls.Add(1)
	res, err := s.shared.Check(ctx, ws, m, amount)
	if err == nil && s.fail(n) {
		return ratelimit.StoreResult{}, context.DeadlineExceeded
	}
	return res, err
}

func (s *lateStore) Release(ctx context.Context, ws []ratelimit.KeyWindow, m string) (bool, error) {
	return s.shared.Release(ctx, ws, m)
}

func (s *lateStore) ReleaseIfAmount(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (bool, error) {
	return s.shared.ReleaseIfAmount(ctx, ws, m, amount)
}

func (s *lateStore) Usage(ctx context.Context, ws []ratelimit.KeyWindow) ([]int64, error) {
	return s.shared.Usage(ctx, ws)
}

func (s *lateStore) Ping(context.Context) error { return nil }

const lateDoc = "limits:\n  A:B: [{limit: 2, window: 1m}]\n"

// TestLateRedisAnswerIsRetriedNotDecidedLocally: a check whose answer was
// lost after Redis admitted it is asked again with the same member, and the
// retry finds it admitted (a duplicate, counted once).
func TestLateRedisAnswerIsRetriedNotDecidedLocally(t *testing.T) {
	shared := ratelimit.NewLocalStore(nil)
	store := &lateStore{shared: shared, fail: func(n int64) bool { return n == 1 }}
	l, err := ratelimit.New(store, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, lateDoc))
	d := mustAllow(t, l, keyAB, "a")
	if !d.Allowed || d.Source != ratelimit.SourceRedis || !d.Duplicate || d.Count != 1 {
		t.Fatalf("got %+v, want admitted by Redis on the retry, as a duplicate, count 1", d)
	}
	if got := store.calls.Load(); got != 2 {
		t.Fatalf("store calls = %d, want 2 (the lost answer and the retry)", got)
	}
}

// TestLateRedisRefusalNeverBecomesALocalAdmission: other instances filled
// the key on Redis; this instance's check is refused by Redis but both
// answers are lost. Deciding it in process would admit it (this instance's
// own windows are empty): one over the limit. It must be refused with an
// unknown outcome under policy local and under deny: an ErrUnavailable
// carries no slot, and a caller told so keeps none of what the lost call
// may have taken.
func TestLateRedisRefusalNeverBecomesALocalAdmission(t *testing.T) {
	for _, p := range []ratelimit.Policy{ratelimit.PolicyLocal, ratelimit.PolicyDeny} {
		t.Run(string(p), func(t *testing.T) {
			shared := ratelimit.NewLocalStore(nil)
			other, _ := ratelimit.New(shared, ratelimit.Options{})
			other.SetConfig(mustConfig(t, lateDoc))
			mustAllow(t, other, keyAB, "x")
			mustAllow(t, other, keyAB, "y")

			store := &lateStore{shared: shared, fail: func(int64) bool { return true }}
			l, _ := ratelimit.New(store, ratelimit.Options{Policy: p})
			l.SetConfig(mustConfig(t, lateDoc))
			d, err := l.Allow(context.Background(), keyAB, "z")
			if err != nil || d.Allowed || !d.Unknown || d.Hold.Member != "z" {
				t.Fatalf("got %+v, %v; want refused with an unknown outcome holding z (the key is full on Redis)", d, err)
			}
			if u, _ := shared.Usage(context.Background(), ratelimit.KeyWindows(keyAB, mustConfig(t, lateDoc).RuleAt(keyAB, time.Now()).Windows)); u[0] != 2 {
				t.Fatalf("Redis holds %v, want 2", u)
			}
		})
	}
}

// gateStore holds one Check between the store's decision and its answer
// until released, so that a limits change can land in between.
type gateStore struct {
	ratelimit.Store
	hold    atomic.Bool
	decided chan struct{}
	release chan struct{}
}

func (s *gateStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	res, err := s.Store.Check(ctx, ws, m, amount)
	if s.hold.CompareAndSwap(true, false) {
		s.decided <- struct{}{}
		<-s.release
	}
	return res, err
}

// TestRefusalInFlightAcrossLimitsChange: a refusal decided under the old
// limits that lands after a raised limit was applied must neither refuse
// that request nor, through the near-cache, the ones after it.
func TestRefusalInFlightAcrossLimitsChange(t *testing.T) {
	store := &gateStore{Store: ratelimit.NewLocalStore(nil), decided: make(chan struct{}), release: make(chan struct{})}
	l, _ := ratelimit.New(store, ratelimit.Options{Timeout: time.Minute})
	l.SetConfig(mustConfig(t, "limits:\n  A:B: [{limit: 1, window: 1h}]\n"))
	mustAllow(t, l, keyAB, "first")

	store.hold.Store(true)
	var wg sync.WaitGroup
	var inFlight ratelimit.Decision
	wg.Add(1)
	go func() {
		defer wg.Done()
		inFlight = mustAllow(t, l, keyAB, "in-flight")
	}()
	<-store.decided // refused under limit 1, answer not yet back
	l.SetConfig(mustConfig(t, "limits:\n  A:B: [{limit: 100, window: 1h}]\n"))
	close(store.release)
	wg.Wait()
	if !inFlight.Allowed {
		t.Fatalf("in-flight check: %+v, want admitted under the raised limit", inFlight)
	}
	if d := mustAllow(t, l, keyAB, "after"); !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("check after the raise: %+v, want admitted by the store", d)
	}
}

// TestRefusalsRaceRaisedLimit: callers hammer a full key (filling the
// near-cache) while the limit is raised; every check that starts after
// SetConfig returned is decided under the raised limit: the first 99 new
// members are admitted.
func TestRefusalsRaceRaisedLimit(t *testing.T) {
	for round := 0; round < 20; round++ {
		l, _ := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
		l.SetConfig(mustConfig(t, "limits:\n  A:B: [{limit: 1, window: 1h}]\n"))
		mustAllow(t, l, keyAB, "first")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = l.Allow(context.Background(), keyAB, testutil.UniqueName("R"))
				}
			}()
		}
		time.Sleep(time.Millisecond)
		l.SetConfig(mustConfig(t, "limits:\n  A:B: [{limit: 1000000, window: 1h}]\n"))
		if d := mustAllow(t, l, keyAB, "after-raise"); !d.Allowed {
			close(stop)
			wg.Wait()
			t.Fatalf("round %d: check after the raise: %+v, want admitted", round, d)
		}
		close(stop)
		wg.Wait()
	}
}

// reorderingStore loses its first call's answer before that call reaches
// the shared store, and runs it only when the test says so: a call on a slow
// connection that Redis executes after the retry sent on another one.
type reorderingStore struct {
	lateStore
	mu      sync.Mutex
	pending func()
}

func (s *reorderingStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	if s.calls.Add(1) == 1 {
		s.mu.Lock()
		s.pending = func() { _, _ = s.shared.Check(context.Background(), ws, m, amount) }
		s.mu.Unlock()
		return ratelimit.StoreResult{}, context.DeadlineExceeded
	}
	return s.shared.Check(ctx, ws, m, amount)
}

// TestRetryRefusedAfterALostCallIsUnknown: other instances filled the key;
// this check's first call is lost on its way and its retry is refused. The
// first call then reaches Redis after a slot frees and admits the member.
// Answering the check as a plain refusal (a 429) would leave that slot
// held by nobody; its outcome is unknown (the pay flow answers 503 and the
// ledger keeps its slot until the requestId's order decides it): a 429
// whose member Redis still held in its money and day windows.
func TestRetryRefusedAfterALostCallIsUnknown(t *testing.T) {
	shared := ratelimit.NewLocalStore(nil)
	other, _ := ratelimit.New(shared, ratelimit.Options{})
	other.SetConfig(mustConfig(t, lateDoc))
	mustAllow(t, other, keyAB, "x")
	mustAllow(t, other, keyAB, "y")

	store := &reorderingStore{lateStore: lateStore{shared: shared}}
	l, _ := ratelimit.New(store, ratelimit.Options{Policy: ratelimit.PolicyLocal})
	l.SetConfig(mustConfig(t, lateDoc))
	d, err := l.Check(context.Background(), ratelimit.Request{Key: keyAB, Member: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || !d.Unknown {
		t.Fatalf("first call lost, retry refused: got %+v, want a refusal with an unknown outcome", d)
	}
	// What the unknown outcome guards against: the lost call lands later.
	if err := other.Release(context.Background(), ratelimit.HoldOf(keyAB, "x")); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.pending()
	store.mu.Unlock()
	if d := mustAllow(t, other, keyAB, "a"); !d.Duplicate {
		t.Fatalf("the late call did not admit the member (%+v): the test lost its point", d)
	}
}

// TestRefusedRetryIsRedisAnswering: a lost first call and a refused retry,
// many times over, under every policy: Redis answered each time, so the
// breaker never opens and no check is decided in process or failed open;
// each stays a refusal with an unknown outcome. Counted as store failures,
// three of them opened the breaker and the next check was admitted in
// process (local) or failed open (allow) over a full key.
func TestRefusedRetryIsRedisAnswering(t *testing.T) {
	for _, p := range []ratelimit.Policy{ratelimit.PolicyLocal, ratelimit.PolicyAllow, ratelimit.PolicyDeny} {
		t.Run(string(p), func(t *testing.T) {
			shared := ratelimit.NewLocalStore(nil)
			other, _ := ratelimit.New(shared, ratelimit.Options{})
			other.SetConfig(mustConfig(t, lateDoc))
			mustAllow(t, other, keyAB, "x")
			mustAllow(t, other, keyAB, "y")
			l, _ := ratelimit.New(&oddCallsLost{lateStore: lateStore{shared: shared}}, ratelimit.Options{Policy: p})
			l.SetConfig(mustConfig(t, lateDoc))
			for i := range 6 {
				d, err := l.Check(context.Background(), ratelimit.Request{Key: keyAB, Member: fmt.Sprintf("m%d", i)})
				if err != nil || d.Allowed || !d.Unknown || d.Source != ratelimit.SourceRedis {
					t.Fatalf("check %d: %+v %v, want a refusal from Redis with an unknown outcome", i, d, err)
				}
			}
		})
	}
}

// oddCallsLost loses every odd call before it reaches the shared store,
// and runs every even one (the retry).
type oddCallsLost struct{ lateStore }

func (s *oddCallsLost) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	if s.calls.Add(1)%2 == 1 {
		return ratelimit.StoreResult{}, context.DeadlineExceeded
	}
	return s.shared.Check(ctx, ws, m, amount)
}

// slowAnswerStore decides every check on a shared store, then holds the
// answer until the caller's context ends: the call reached the store, the
// caller gave up before it heard.
type slowAnswerStore struct{ lateStore }

func (s *slowAnswerStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	s.calls.Add(1)
	if _, err := s.shared.Check(context.Background(), ws, m, amount); err != nil {
		return ratelimit.StoreResult{}, err
	}
	<-ctx.Done()
	return ratelimit.StoreResult{}, ctx.Err()
}

// TestCallerGivingUpLeavesAnUnknownOutcome: a caller that gives up (its
// client disconnected) while its check is out gets an unknown outcome with
// the slot the call took, under every policy that refuses, not its
// context's error: the call admitted the member, and only a Hold lets the
// caller's ledger give it back. A caller whose context ended before the
// call gets the error, and nothing was sent.
func TestCallerGivingUpLeavesAnUnknownOutcome(t *testing.T) {
	for _, p := range []ratelimit.Policy{ratelimit.PolicyLocal, ratelimit.PolicyDeny} {
		t.Run(string(p), func(t *testing.T) {
			shared := ratelimit.NewLocalStore(nil)
			store := &slowAnswerStore{lateStore{shared: shared}}
			l, _ := ratelimit.New(store, ratelimit.Options{Policy: p, Timeout: time.Minute})
			l.SetConfig(mustConfig(t, lateDoc))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			d, err := l.Check(ctx, ratelimit.Request{Key: keyAB, Member: "gone", Amount: 100})
			if err != nil || d.Allowed || !d.Unknown || d.Hold.Member != "gone" || !d.Hold.Known() {
				t.Fatalf("got %+v, %v; want an unknown outcome holding the member's windows", d, err)
			}
			if u, _ := shared.Usage(context.Background(), ratelimit.KeyWindows(keyAB, mustConfig(t, lateDoc).RuleAt(keyAB, time.Now()).Windows)); u[0] != 1 {
				t.Fatalf("the store holds %v, want the member the call admitted", u)
			}
			if err := l.Release(context.Background(), d.Hold); err != nil {
				t.Fatal(err)
			}
			if u, _ := shared.Usage(context.Background(), ratelimit.KeyWindows(keyAB, mustConfig(t, lateDoc).RuleAt(keyAB, time.Now()).Windows)); u[0] != 0 {
				t.Fatalf("the store holds %v after the Hold was released, want 0", u)
			}
			done, stop := context.WithCancel(context.Background())
			stop()
			calls := store.calls.Load()
			if _, err := l.Check(done, ratelimit.Request{Key: keyAB, Member: "never"}); !errors.Is(err, context.Canceled) || store.calls.Load() != calls {
				t.Fatalf("a check whose context had ended: %v after %d calls, want context.Canceled and no call", err, store.calls.Load()-calls)
			}
		})
	}
}
