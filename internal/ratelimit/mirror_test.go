package ratelimit_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// admitStore admits every check without allocating: the Limiter's own cost
// on the admitted path, without Redis.
type admitStore struct{ *ratelimit.LocalStore }

func (admitStore) Check(context.Context, []ratelimit.KeyWindow, string, int64) (ratelimit.StoreResult, error) {
	return ratelimit.StoreResult{Allowed: true, Count: 1, Window: 0}, nil
}

func benchLimiter(b *testing.B, p ratelimit.Policy) (*ratelimit.Limiter, []string) {
	b.Helper()
	l, err := ratelimit.New(admitStore{ratelimit.NewLocalStore(nil)}, ratelimit.Options{LocalShare: 1.0 / 3, Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	parsed, err := limits.Parse([]byte("limits:\n  A:B: [{limit: 100, window: 1s}, {limit: 4500, window: 1m}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := parsed.Config
	l.SetConfig(cfg)
	members := make([]string, 1<<14)
	for i := range members {
		members[i] = "req-" + strconv.Itoa(i)
	}
	return l, members
}

// BenchmarkLimiterAllowAdmitted measures Limiter.Allow on a key with two
// windows whose store admits everything: the path every admitted payment
// takes, minus the Redis round trip.
func BenchmarkLimiterAllowAdmitted(b *testing.B) { benchAllowAdmitted(b, ratelimit.PolicyLocal) }

// BenchmarkLimiterAllowAdmittedPolicyAllow is the same under policy allow,
// which keeps no in-process windows: the difference is what policy local
// costs an admission while Redis answers.
func BenchmarkLimiterAllowAdmittedPolicyAllow(b *testing.B) {
	benchAllowAdmitted(b, ratelimit.PolicyAllow)
}

func benchAllowAdmitted(b *testing.B, p ratelimit.Policy) {
	l, members := benchLimiter(b, p)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, _ := l.Allow(ctx, keyAB, members[i&(len(members)-1)]); !d.Allowed {
			b.Fatal("refused")
		}
	}
}

// BenchmarkLimiterAllowAdmittedParallel is the same from GOMAXPROCS
// goroutines at once.
func BenchmarkLimiterAllowAdmittedParallel(b *testing.B) {
	l, members := benchLimiter(b, ratelimit.PolicyLocal)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.Allow(ctx, keyAB, members[i&(len(members)-1)])
			i++
		}
	})
}

// budgetStore stands in for Redis: a LocalStore (exact windows, on the
// test clock) that answers the next `left` checks and then fails until
// given more.
type budgetStore struct {
	*ratelimit.LocalStore
	left  atomic.Int64
	calls atomic.Int64
}

func (s *budgetStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	s.calls.Add(1)
	if s.left.Add(-1) < 0 {
		return ratelimit.StoreResult{}, errDown
	}
	return s.LocalStore.Check(ctx, ws, m, amount)
}

// newFailoverLimiter is an instance with a local share of 1/3 whose store
// answers `answers` checks, then fails.
func newFailoverLimiter(t *testing.T, doc string, answers int64) (*ratelimit.Limiter, *budgetStore, *testutil.Clock) {
	t.Helper()
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	store := &budgetStore{LocalStore: ratelimit.NewLocalStore(clock.Now)}
	store.left.Store(answers)
	l, err := ratelimit.New(store, ratelimit.Options{LocalShare: 1.0 / 3, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, doc))
	return l, store, clock
}

var nextMember atomic.Int64

// admit sends n checks of new members, step apart on the clock, and returns
// how many were admitted from each source.
func admit(t *testing.T, l *ratelimit.Limiter, clock *testutil.Clock, n int, step time.Duration) map[ratelimit.Source]int {
	t.Helper()
	got := map[ratelimit.Source]int{}
	for i := 0; i < n; i++ {
		d := mustAllow(t, l, keyAB, "m"+strconv.FormatInt(nextMember.Add(1), 10))
		if d.Allowed {
			got[d.Source]++
		}
		clock.Advance(step)
	}
	return got
}

// failover: limit 30 a minute, share 1/3, so 10 a minute per instance while
// Redis fails.
const perMinute30 = "limits:\n  A:B: {limit: 30, window: 1m}\n"

func TestLocalFallbackStartsFromOwnRedisAdmissions(t *testing.T) {
	l, store, clock := newFailoverLimiter(t, perMinute30, 6)
	if got := admit(t, l, clock, 6, time.Second); got[ratelimit.SourceRedis] != 6 {
		t.Fatalf("before the failure: %v, want 6 admitted by Redis", got)
	}
	// Redis fails 6 s into the minute: this instance already used 6 of its
	// 10, so it admits 4 in process, not 10.
	if got := admit(t, l, clock, 20, 100*time.Millisecond); got[ratelimit.SourceLocal] != 4 || len(got) != 1 {
		t.Fatalf("degraded after 6 Redis admissions: %v, want 4 admitted locally (share 10 - own 6)", got)
	}
	d := mustAllow(t, l, keyAB, "refused")
	if d.Allowed || d.Source != ratelimit.SourceLocal || d.Limit != 10 || d.Count != 10 {
		t.Fatalf("full local window: %+v, want refused by the local window of 10, holding 10", d)
	}
	// The first Redis admission (at 0 s) leaves the window at 60 s.
	if want := 60*time.Second - 8*time.Second; d.RetryAfter != want {
		t.Fatalf("retry after %v, want %v (until the first Redis admission leaves)", d.RetryAfter, want)
	}
	clock.Advance(d.RetryAfter)
	if got := admit(t, l, clock, 1, 0); got[ratelimit.SourceLocal] != 1 {
		t.Fatalf("when the first Redis admission left: %v, want 1 local admission", got)
	}
	// A window later everything has left: the full share again.
	clock.Advance(time.Minute)
	if got := admit(t, l, clock, 20, 0); got[ratelimit.SourceLocal] != 10 {
		t.Fatalf("a window later: %v, want 10 local admissions", got)
	}
	if store.left.Load() >= 0 {
		t.Fatal("the store never failed")
	}
}

func TestLocalFallbackMirrorKeepsTheNewestShare(t *testing.T) {
	// Redis admits 20 of this instance's requests a second apart: twice its
	// share. Only the newest 10 are kept, and they keep the local window
	// full exactly as long as 20 would: until the 11th leaves.
	l, _, clock := newFailoverLimiter(t, perMinute30, 20)
	if got := admit(t, l, clock, 20, time.Second); got[ratelimit.SourceRedis] != 20 {
		t.Fatalf("before the failure: %v, want 20 admitted by Redis", got)
	}
	d := mustAllow(t, l, keyAB, "refused")
	if d.Allowed || d.Source != ratelimit.SourceLocal {
		t.Fatalf("degraded after 20 Redis admissions: %+v, want refused locally", d)
	}
	// Admissions at 0..19 s, now 20 s: the one at 10 s leaves at 70 s.
	if want := 50 * time.Second; d.RetryAfter != want {
		t.Fatalf("retry after %v, want %v", d.RetryAfter, want)
	}
	clock.Advance(d.RetryAfter - time.Millisecond)
	if got := admit(t, l, clock, 1, time.Millisecond); len(got) != 0 {
		t.Fatalf("just before: %v, want nothing admitted", got)
	}
	if got := admit(t, l, clock, 3, 0); got[ratelimit.SourceLocal] != 1 {
		t.Fatalf("at 70 s: %v, want 1 local admission", got)
	}
}

func TestLocalFallbackReleaseRemovesMirroredMember(t *testing.T) {
	l, _, clock := newFailoverLimiter(t, perMinute30, 10)
	for i := 0; i < 10; i++ {
		if d := mustAllow(t, l, keyAB, "r"+strconv.Itoa(i)); !d.Allowed || d.Source != ratelimit.SourceRedis {
			t.Fatalf("r%d: %+v, want admitted by Redis", i, d)
		}
		clock.Advance(time.Second)
	}
	if err := l.Release(context.Background(), ratelimit.HoldOf(keyAB, "r3")); err != nil {
		t.Fatal(err)
	}
	if got := admit(t, l, clock, 5, time.Second); got[ratelimit.SourceLocal] != 1 || len(got) != 1 {
		t.Fatalf("degraded after 10 Redis admissions and 1 release: %v, want 1 local admission", got)
	}
	// A retry of a mirrored member is a duplicate, not a new admission.
	if d := mustAllow(t, l, keyAB, "r5"); !d.Allowed || !d.Duplicate {
		t.Fatalf("retry of r5 while degraded: %+v, want an admitted duplicate", d)
	}
}

func TestLocalFallbackAfterLimitChanges(t *testing.T) {
	t.Run("raised", func(t *testing.T) {
		l, _, clock := newFailoverLimiter(t, perMinute30, 6)
		admit(t, l, clock, 6, time.Second)
		l.SetConfig(mustConfig(t, "limits:\n  A:B: {limit: 60, window: 1m}\n"))
		// Share 20 under the new limit, 6 already used.
		if got := admit(t, l, clock, 30, 0); got[ratelimit.SourceLocal] != 14 {
			t.Fatalf("degraded after raising the limit: %v, want 14 local admissions", got)
		}
	})
	t.Run("lowered", func(t *testing.T) {
		l, _, clock := newFailoverLimiter(t, perMinute30, 9)
		admit(t, l, clock, 9, time.Second) // at 0..8 s
		l.SetConfig(mustConfig(t, "limits:\n  A:B: {limit: 15, window: 1m}\n"))
		// Share 5, 9 already used: nothing until 5 of them have left, the
		// 5th (at 4 s) at 64 s.
		d := mustAllow(t, l, keyAB, "refused")
		if d.Allowed || d.Limit != 5 || d.RetryAfter != 64*time.Second-9*time.Second {
			t.Fatalf("degraded after lowering the limit: %+v, want refused by the window of 5 for 55 s", d)
		}
		clock.Advance(d.RetryAfter)
		if got := admit(t, l, clock, 5, 0); got[ratelimit.SourceLocal] != 1 {
			t.Fatalf("at 64 s: %v, want 1 local admission", got)
		}
	})
	t.Run("window resized", func(t *testing.T) {
		l, _, clock := newFailoverLimiter(t, perMinute30, 9)
		admit(t, l, clock, 9, time.Second)
		// A new window size is a new window, in Redis too: it starts empty.
		l.SetConfig(mustConfig(t, "limits:\n  A:B: {limit: 30, window: 2m}\n"))
		if got := admit(t, l, clock, 20, 0); got[ratelimit.SourceLocal] != 10 {
			t.Fatalf("degraded after resizing the window: %v, want 10 local admissions", got)
		}
	})
}

func TestLocalFallbackSkipsShadowRules(t *testing.T) {
	// A shadow rule admits everything: nothing is mirrored for it, so its
	// local window starts empty and reports refusals after a full share.
	l, _, clock := newFailoverLimiter(t, "limits:\n  A:B: {limit: 30, window: 1m, shadow: true}\n", 6)
	admit(t, l, clock, 6, time.Second)
	for i := 0; i < 11; i++ {
		d := mustAllow(t, l, keyAB, "s"+strconv.Itoa(i))
		if !d.Allowed || d.Source != ratelimit.SourceLocal || d.Shadow != (i == 10) {
			t.Fatalf("shadow check %d while degraded: %+v, want admitted locally, shadow-limited only after 10", i, d)
		}
	}
}

func TestReturnToRedisCountsLocalAdmissions(t *testing.T) {
	// This instance admits 6 on Redis, then 4 in process while Redis fails.
	// The other two instances are assumed to have done the same (share
	// 1/3): 12 admissions Redis does not hold. Back on Redis, which holds
	// 6, it admits 12 more (30 - 12 - 6), not 24.
	l, store, clock := newFailoverLimiter(t, perMinute30, 6)
	admit(t, l, clock, 6, time.Second) // Redis, at 0..5 s
	if got := admit(t, l, clock, 4, time.Second); got[ratelimit.SourceLocal] != 4 {
		t.Fatalf("degraded: %v, want 4 local admissions", got) // at 6..9 s
	}
	store.left.Store(1 << 30)
	clock.Advance(time.Second) // past the breaker's cooldown: 11 s
	got := admit(t, l, clock, 30, 0)
	if got[ratelimit.SourceRedis] != 12 || len(got) != 1 {
		t.Fatalf("back on Redis: %v, want 12 admitted by Redis (30 - 6 in Redis - 3 x 4 in process)", got)
	}
	d := mustAllow(t, l, keyAB, "refused")
	if d.Allowed || d.Limit != 30 || d.Count != 30 || d.Remaining != 0 {
		t.Fatalf("full: %+v, want refused with 18 in Redis + 12 in process = 30 of 30", d)
	}
	// At 70.5 s the admissions of 0..9 s, on Redis and in process, have
	// left: only the 12 admitted at 11 s count.
	clock.Advance(59500 * time.Millisecond)
	if got := admit(t, l, clock, 30, 0); got[ratelimit.SourceRedis] != 18 {
		t.Fatalf("when everything before the return has left: %v, want 18 admitted by Redis", got)
	}
}

func TestReturnToRedisRefusesLocallyWhileLocalAdmissionsFillTheWindow(t *testing.T) {
	// Limit 3 a second, share 1: the instance admitted 3 in process, which
	// alone fill the window, so it refuses without asking Redis until they
	// leave.
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	store := &budgetStore{LocalStore: ratelimit.NewLocalStore(clock.Now)}
	l, err := ratelimit.New(store, ratelimit.Options{Now: clock.Now, BreakerCooldown: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, "limits:\n  A:B: {limit: 3, window: 1s}\n"))
	if got := admit(t, l, clock, 5, 20*time.Millisecond); got[ratelimit.SourceLocal] != 3 {
		t.Fatalf("degraded: %v, want 3 local admissions", got) // at 0, 20, 40 ms
	}
	store.left.Store(1 << 30)
	calls := store.calls.Load()
	d := mustAllow(t, l, keyAB, "x")
	if d.Allowed || d.Source != ratelimit.SourceNearCache || d.Count != 3 || d.RetryAfter != 900*time.Millisecond {
		t.Fatalf("back, window full of local admissions: %+v, want refused without Redis for 900 ms", d)
	}
	if store.calls.Load() != calls {
		t.Fatal("the refusal asked the store")
	}
	clock.Advance(d.RetryAfter)
	if got := admit(t, l, clock, 1, 0); got[ratelimit.SourceRedis] != 1 {
		t.Fatalf("when the first local admission left: %v, want 1 admitted by Redis", got)
	}
}

func TestMirrorAllocatesNothing(t *testing.T) {
	// The mirror runs on every admission under policy local; policy allow
	// mirrors nothing. Both must allocate the same.
	allocs := func(p ratelimit.Policy) float64 {
		l, err := ratelimit.New(admitStore{ratelimit.NewLocalStore(nil)}, ratelimit.Options{LocalShare: 1.0 / 3, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		l.SetConfig(mustConfig(t, "limits:\n  A:B: [{limit: 100, window: 1s}, {limit: 4500, window: 1m}]\n"))
		members := make([]string, 4096)
		for i := range members {
			members[i] = "req-" + strconv.Itoa(i)
		}
		i := 0
		for ; i < 3000; i++ { // past the first growth of the windows
			mustAllow(t, l, keyAB, members[i%len(members)])
		}
		return testing.AllocsPerRun(2000, func() {
			l.Allow(context.Background(), keyAB, members[i%len(members)])
			i++
		})
	}
	if local, allow := allocs(ratelimit.PolicyLocal), allocs(ratelimit.PolicyAllow); local > allow {
		t.Fatalf("Allow allocates %v per admission under policy local, %v under allow: the mirror allocates", local, allow)
	}
}

// TestLocalWindowsLarge: a mirrored window holds up to limit × share entries
// even while Redis is healthy; duplicates and Release stay exact on a
// 200,000-entry window. (Membership is indexed: with the former walk of the
// queue under the store's one lock, this test took 63 s instead of 1 s.)
func TestLocalWindowsLarge(t *testing.T) {
	s := ratelimit.NewLocalStore(nil)
	k := ratelimit.Key{BizType: "BIG", Channel: "ALIPAY"}
	ws := []ratelimit.Window{{Limit: 200_000, Size: time.Hour}}
	for i := range 200_000 {
		s.Check(context.Background(), ratelimit.KeyWindows(k, ws), fmt.Sprint("m", i), 0)
	}
	for i := range 2_000 {
		if found, err := s.Release(context.Background(), ratelimit.KeyWindows(k, ws), fmt.Sprint("absent", i)); err != nil || found {
			t.Fatalf("release absent%d: found %v, %v; want not found", i, found, err)
		}
		if r, _ := s.Check(context.Background(), ratelimit.KeyWindows(k, ws), fmt.Sprint("m", i), 0); !r.Allowed || !r.Duplicate {
			t.Fatalf("m%d: %+v, want an admitted duplicate", i, r)
		}
	}
	if found, err := s.Release(context.Background(), ratelimit.KeyWindows(k, ws), "m7"); err != nil || !found {
		t.Fatalf("release m7: found %v, %v; want found", found, err)
	}
	// Released, m7 is new again, and its slot is free again.
	if r, _ := s.Check(context.Background(), ratelimit.KeyWindows(k, ws), "m7", 0); r.Duplicate || !r.Allowed || r.Count != 200_000 {
		t.Fatalf("m7 after its release: %+v, want admitted anew into the freed slot", r)
	}
}
