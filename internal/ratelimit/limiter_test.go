package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// switchStore is a LocalStore that can be made to fail, counting calls.
type switchStore struct {
	*ratelimit.LocalStore
	failing atomic.Bool
	calls   atomic.Int64
}

// errDown is what a client gets from a Redis that is down: the connection
// is refused, so the script provably never ran.
var errDown = fmt.Errorf("%w: %w", ratelimit.ErrNotSent, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})

func (s *switchStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	s.calls.Add(1)
	if s.failing.Load() {
		return ratelimit.StoreResult{}, errDown
	}
	return s.LocalStore.Check(ctx, ws, m, amount)
}

func mustConfig(t *testing.T, doc string) *ratelimit.Config {
	t.Helper()
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	return cfg
}

func newTestLimiter(t *testing.T, doc string, opts ratelimit.Options) (*ratelimit.Limiter, *switchStore, *testutil.Clock) {
	t.Helper()
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	store := &switchStore{LocalStore: ratelimit.NewLocalStore(clock.Now)}
	opts.Now = clock.Now
	l, err := ratelimit.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, doc))
	return l, store, clock
}

var keyAB = ratelimit.Key{BizType: "A", Channel: "B"}

func mustAllow(t *testing.T, l *ratelimit.Limiter, k ratelimit.Key, member string) ratelimit.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), k, member)
	if err != nil {
		t.Fatalf("Allow(%s, %s): %v", k, member, err)
	}
	return d
}

func TestLimiterUnlimitedAndClosedNeverAskTheStore(t *testing.T) {
	l, store, _ := newTestLimiter(t, "limits:\n  A:B: -1\n  A:C: 0\n", ratelimit.Options{})
	for i := 0; i < 3; i++ {
		if d := mustAllow(t, l, keyAB, "x"); !d.Allowed || d.Source != ratelimit.SourceUnlimited {
			t.Fatalf("-1 key: %+v, want allowed unlimited", d)
		}
		if d := mustAllow(t, l, ratelimit.Key{BizType: "Z", Channel: "Z"}, "x"); !d.Allowed || d.Source != ratelimit.SourceUnlimited {
			t.Fatalf("missing key: %+v, want allowed unlimited", d)
		}
		if d := mustAllow(t, l, ratelimit.Key{BizType: "A", Channel: "C"}, "x"); d.Allowed || d.Source != ratelimit.SourceClosed || d.Limit != 0 {
			t.Fatalf("0 key: %+v, want refused closed", d)
		}
	}
	if n := store.calls.Load(); n != 0 {
		t.Fatalf("store called %d times for unlimited and closed keys, want 0", n)
	}
}

func TestLimiterNearCacheRefusesWithoutStore(t *testing.T) {
	l, store, clock := newTestLimiter(t, "limits:\n  A:B: 1\n", ratelimit.Options{})
	mustAllow(t, l, keyAB, "a")
	d := mustAllow(t, l, keyAB, "b")
	if d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("b: %+v, want refused by the store", d)
	}
	before := store.calls.Load()
	d = mustAllow(t, l, keyAB, "c")
	if d.Allowed || d.Source != ratelimit.SourceNearCache || d.RetryAfter <= 0 {
		t.Fatalf("c: %+v, want refused by the near-cache with a retry-after", d)
	}
	if store.calls.Load() != before {
		t.Fatal("near-cache refusal called the store")
	}
	clock.Advance(time.Second)
	if d := mustAllow(t, l, keyAB, "e"); !d.Allowed {
		t.Fatalf("e after the window passed: %+v, want allowed", d)
	}
}

// A merchant whose own use of a window is full is refused from the
// near-cache until its retry-after, with no store call, and only that
// merchant: the others, and requests naming no merchant, still ask the
// store; a release on the channel ends the refusal.
func TestLimiterNearCacheRefusesAFullMerchantOnly(t *testing.T) {
	l, store, clock := newTestLimiter(t, "limits:\n  A:B: [{limit: 100, window: 1m, perMerchant: 1}]\n", ratelimit.Options{})
	check := func(member, merchant string) ratelimit.Decision {
		t.Helper()
		return mustDecide(t, l, ratelimit.Request{Key: keyAB, Member: member, Merchant: merchant})
	}
	if d := check("a", "M1"); !d.Allowed {
		t.Fatalf("a of M1: %+v, want admitted", d)
	}
	if d := check("b", "M1"); d.Allowed || d.Source != ratelimit.SourceRedis || d.Merchant != "M1" {
		t.Fatalf("b of M1: allowed %v from %v by merchant %q, want refused by the store, by M1's limit", d.Allowed, d.Source, d.Merchant)
	}
	before := store.calls.Load()
	clock.Advance(100 * time.Millisecond)
	d := check("c", "M1")
	if d.Allowed || d.Source != ratelimit.SourceNearCache || d.Merchant != "M1" || d.RetryAfter <= 0 {
		t.Fatalf("c of M1: %+v, want refused from the near-cache by M1's limit, with a retry-after", d)
	}
	// A refusal from the near-cache is decided when it is asked (the
	// decision log orders decisions by it), not when the one it repeats was.
	if !d.DecidedAt.Equal(clock.Now()) {
		t.Fatalf("c of M1 decided at %s, want the check's time %s", d.DecidedAt, clock.Now())
	}
	if n := store.calls.Load(); n != before {
		t.Fatalf("c of M1 called the store %d times, want none", n-before)
	}
	for _, m := range []string{"M2", ""} {
		before := store.calls.Load()
		if d := check("d"+m, m); !d.Allowed || d.Source != ratelimit.SourceRedis || store.calls.Load() == before {
			t.Fatalf("a request of merchant %q beside M1's refusal: %+v, want admitted by the store", m, d)
		}
	}
	if err := l.Release(context.Background(), ratelimit.HoldOf(keyAB, "a").OfMerchant("M1")); err != nil {
		t.Fatal(err)
	}
	if d := check("e", "M1"); !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("e of M1 after a's release: allowed %v from %v, want admitted by the store", d.Allowed, d.Source)
	}
}

func TestLimiterNearCacheOff(t *testing.T) {
	l, store, _ := newTestLimiter(t, "limits:\n  A:B: 1\n", ratelimit.Options{DisableNearCache: true})
	mustAllow(t, l, keyAB, "a")
	for i := 0; i < 3; i++ {
		if d := mustAllow(t, l, keyAB, "b"); d.Source != ratelimit.SourceRedis {
			t.Fatalf("source %s with the near-cache off", d.Source)
		}
	}
	if store.calls.Load() != 4 {
		t.Fatalf("store calls = %d, want 4", store.calls.Load())
	}
}

func TestLimiterSetConfigForgetsNearCache(t *testing.T) {
	l, _, _ := newTestLimiter(t, "limits:\n  A:B: 1\n", ratelimit.Options{})
	mustAllow(t, l, keyAB, "a")
	mustAllow(t, l, keyAB, "b") // fills the near-cache
	l.SetConfig(mustConfig(t, "limits:\n  A:B: 5\n"))
	if d := mustAllow(t, l, keyAB, "c"); !d.Allowed {
		t.Fatalf("after raising the limit: %+v, want allowed", d)
	}
}

func TestLimiterShadowAdmitsButReports(t *testing.T) {
	l, _, _ := newTestLimiter(t, "limits:\n  A:B: {limit: 1, window: 1s, shadow: true}\n", ratelimit.Options{})
	mustAllow(t, l, keyAB, "a")
	for i := 0; i < 3; i++ {
		d := mustAllow(t, l, keyAB, "b")
		if !d.Allowed || !d.Shadow {
			t.Fatalf("shadow key over limit: %+v, want allowed with Shadow", d)
		}
	}
	l.SetConfig(mustConfig(t, "shadow: true\nlimits:\n  A:B: 0\n"))
	if d := mustAllow(t, l, keyAB, "z"); !d.Allowed || !d.Shadow {
		t.Fatalf("global shadow on a closed key: %+v, want allowed with Shadow", d)
	}
}

func TestLimiterDegradedPolicies(t *testing.T) {
	doc := "limits:\n  A:B: 10\n"
	t.Run("local enforces this instance's share", func(t *testing.T) {
		l, store, _ := newTestLimiter(t, doc, ratelimit.Options{LocalShare: 1.0 / 3})
		store.failing.Store(true)
		admitted := 0
		for i := 0; i < 10; i++ {
			d := mustAllow(t, l, keyAB, string(rune('a'+i)))
			if d.Allowed {
				admitted++
				if d.Source != ratelimit.SourceLocal {
					t.Fatalf("degraded admission from %s, want local", d.Source)
				}
			}
		}
		if admitted != 3 {
			t.Fatalf("admitted %d under local policy with share 1/3 of 10, want 3", admitted)
		}
	})
	t.Run("allow admits everything", func(t *testing.T) {
		l, store, _ := newTestLimiter(t, doc, ratelimit.Options{Policy: ratelimit.PolicyAllow})
		store.failing.Store(true)
		for i := 0; i < 20; i++ {
			if d := mustAllow(t, l, keyAB, string(rune('a'+i))); !d.Allowed || d.Source != ratelimit.SourceFailOpen {
				t.Fatalf("%+v, want fail-open admission", d)
			}
		}
	})
	t.Run("deny answers ErrUnavailable", func(t *testing.T) {
		l, store, _ := newTestLimiter(t, doc, ratelimit.Options{Policy: ratelimit.PolicyDeny})
		store.failing.Store(true)
		if _, err := l.Allow(context.Background(), keyAB, "a"); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})
}

func TestLimiterBreakerSkipsDeadStoreAndRecovers(t *testing.T) {
	l, store, clock := newTestLimiter(t, "limits:\n  A:B: 1000\n", ratelimit.Options{BreakerThreshold: 3, BreakerCooldown: 500 * time.Millisecond})
	store.failing.Store(true)
	for i := 0; i < 3; i++ {
		mustAllow(t, l, keyAB, "f"+string(rune('a'+i)))
	}
	if !l.Degraded() {
		t.Fatal("breaker not open after 3 failures")
	}
	calls := store.calls.Load()
	for i := 0; i < 50; i++ {
		if d := mustAllow(t, l, keyAB, "o"+string(rune('a'+i))); d.Source != ratelimit.SourceLocal {
			t.Fatalf("open breaker: source %s, want local", d.Source)
		}
	}
	if store.calls.Load() != calls {
		t.Fatalf("open breaker still called the store %d times", store.calls.Load()-calls)
	}
	store.failing.Store(false)
	clock.Advance(600 * time.Millisecond)
	if d := mustAllow(t, l, keyAB, "probe"); d.Source != ratelimit.SourceRedis {
		t.Fatalf("after cooldown: source %s, want the store again", d.Source)
	}
	if l.Degraded() {
		t.Fatal("breaker still open after a good probe")
	}
}

func TestLimiterReleaseGivesBackTheSlot(t *testing.T) {
	l, _, _ := newTestLimiter(t, "limits:\n  A:B: 1\n", ratelimit.Options{})
	mustAllow(t, l, keyAB, "a")
	if err := l.Release(context.Background(), ratelimit.HoldOf(keyAB, "a")); err != nil {
		t.Fatal(err)
	}
	if d := mustAllow(t, l, keyAB, "b"); !d.Allowed {
		t.Fatalf("after release: %+v, want allowed", d)
	}
}
