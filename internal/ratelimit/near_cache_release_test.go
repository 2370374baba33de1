package ratelimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// heldStore decides every check on a shared store at once, but holds the
// answer for member held until release is closed: a refusal on its way back
// while other calls go on, as with several coalesced calls of a key in
// flight, or one in flight and a release beside it.
type heldStore struct {
	ratelimit.Store
	held    string
	decided chan struct{} // closed once held's check is decided
	release chan struct{}
	// releasing, when set, holds every Release until it is closed, before
	// the shared store releases; entered is closed when the first arrives.
	releasing chan struct{}
	entered   chan struct{}
	enterOnce sync.Once
}

func (s *heldStore) Release(ctx context.Context, ws []ratelimit.KeyWindow, m string) (bool, error) {
	if s.releasing != nil {
		s.enterOnce.Do(func() { close(s.entered) })
		<-s.releasing
	}
	return s.Store.Release(ctx, ws, m)
}

func (s *heldStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, amount int64) (ratelimit.StoreResult, error) {
	res, err := s.Store.Check(ctx, ws, m, amount)
	if m == s.held {
		close(s.decided)
		<-s.release
	}
	return res, err
}

// allowLater asks l for member of key in the background; the decision
// arrives on the channel returned.
func allowLater(t *testing.T, l *ratelimit.Limiter, key ratelimit.Key, member string) <-chan ratelimit.Decision {
	out := make(chan ratelimit.Decision, 1)
	go func() {
		d, err := l.Allow(context.Background(), key, member)
		if err != nil {
			t.Error(err)
		}
		out <- d
	}()
	return out
}

// fullAB returns a limiter on store with A:B at 2 a minute, both taken (by
// a and b).
func fullAB(t *testing.T, store ratelimit.Store) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(store, ratelimit.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, lateDoc))
	for _, m := range []string{"a", "b"} {
		if d := mustAllow(t, l, keyAB, m); !d.Allowed {
			t.Fatalf("%s: got %+v, want admitted", m, d)
		}
	}
	return l
}

// TestNearCacheForgetsRefusalDecidedAcrossARelease: a refusal that Redis
// decided before a release, but that comes back after it, must not be
// remembered: the release made room, and the next request of the key must
// be asked of the store and admitted, not refused from the near-cache for up
// to a second.
func TestNearCacheForgetsRefusalDecidedAcrossARelease(t *testing.T) {
	store := &heldStore{Store: ratelimit.NewLocalStore(nil), held: "late",
		decided: make(chan struct{}), release: make(chan struct{})}
	l := fullAB(t, store)
	late := allowLater(t, l, keyAB, "late")
	<-store.decided // refused by the store: the window is full
	if err := l.Release(context.Background(), ratelimit.HoldOf(keyAB, "a")); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if d := <-late; d.Allowed {
		t.Fatalf("late: got %+v, want refused (decided before the release)", d)
	}
	d := mustAllow(t, l, keyAB, "next")
	if !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("next after the release: got allowed %v from %v, want admitted by the store", d.Allowed, d.Source)
	}
}

// TestNearCacheForgetsRefusalDecidedBeforeTheStoreReleased: a refusal
// decided while a release is on its way to the store (the room not yet
// made) must not outlive the release: the next request after it must be
// asked of the store and admitted.
func TestNearCacheForgetsRefusalDecidedBeforeTheStoreReleased(t *testing.T) {
	store := &heldStore{Store: ratelimit.NewLocalStore(nil), releasing: make(chan struct{}), entered: make(chan struct{})}
	l := fullAB(t, store)
	released := make(chan error, 1)
	go func() { released <- l.Release(context.Background(), ratelimit.HoldOf(keyAB, "a")) }()
	<-store.entered // the release waits at the store
	if d := mustAllow(t, l, keyAB, "early"); d.Allowed {
		t.Fatalf("early: got %+v, want refused (the store has not released yet)", d)
	}
	close(store.releasing)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	d := mustAllow(t, l, keyAB, "next")
	if !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("next after the release: got allowed %v from %v, want admitted by the store", d.Allowed, d.Source)
	}
}

// TestNearCacheKeepsCountRefusalsAcrossAnAmountGiveBack: giving back a
// declined payment's amount makes no room in count windows, so the
// near-cache keeps refusing a full count window from memory.
func TestNearCacheKeepsCountRefusalsAcrossAnAmountGiveBack(t *testing.T) {
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "AL"}
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{k: {Windows: []ratelimit.Window{
		{Limit: 1, Size: time.Minute},
		{Limit: 1000, Size: time.Minute, Amount: true, Currency: "CNY"},
	}}}}
	// One instant throughout, so the near-cache's one-second bound cannot
	// run out between the refusal and the give-back on a slow machine.
	now := time.Now()
	l, err := ratelimit.New(ratelimit.NewLocalStore(func() time.Time { return now }),
		ratelimit.Options{Timeout: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	pay := func(m string) ratelimit.Decision {
		return mustDecide(t, l, ratelimit.Request{Key: k, Member: m, Amount: 100, Currency: "CNY"})
	}
	if d := pay("a"); !d.Allowed {
		t.Fatalf("a: %+v, want admitted", d)
	}
	if d := pay("b"); d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("b: allowed %v from %v, want refused by the store", d.Allowed, d.Source)
	}
	if err := l.ReleaseAmount(context.Background(), ratelimit.HoldOf(k, "a")); err != nil {
		t.Fatal(err)
	}
	if d := pay("c"); d.Allowed || d.Source != ratelimit.SourceNearCache {
		t.Fatalf("c after a's amount came back: allowed %v from %v, want refused from the near-cache", d.Allowed, d.Source)
	}
}

// TestNearCacheKeepsRefusalsAcrossAnotherChannelsRelease: a release makes
// room on its own channel only, so a refusal of another channel decided
// across it is still remembered (a failover releasing slots on one channel
// must not send another channel's 429s back to Redis).
func TestNearCacheKeepsRefusalsAcrossAnotherChannelsRelease(t *testing.T) {
	store := &heldStore{Store: ratelimit.NewLocalStore(nil), held: "late",
		decided: make(chan struct{}), release: make(chan struct{})}
	l := fullAB(t, store)
	l.SetConfig(mustConfig(t, lateDoc+"  A:X: [{limit: 2, window: 1m}]\n"))
	other := ratelimit.Key{BizType: "A", Channel: "X"}
	if d := mustAllow(t, l, other, "x1"); !d.Allowed {
		t.Fatalf("x1 on A:X: %+v, want admitted", d)
	}
	late := allowLater(t, l, keyAB, "late")
	<-store.decided // refused by the store: A:B is full
	if err := l.Release(context.Background(), ratelimit.HoldOf(other, "x1")); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if d := <-late; d.Allowed {
		t.Fatalf("late: got %+v, want refused", d)
	}
	if d := mustAllow(t, l, keyAB, "next"); d.Allowed || d.Source != ratelimit.SourceNearCache {
		t.Fatalf("next on A:B after a release on A:X: allowed %v from %v, want refused from the near-cache", d.Allowed, d.Source)
	}
}

// A merchant's refusal that the store decided before a release of that
// merchant's slot, but that comes back after it, is not remembered either:
// the merchant's next request is asked of the store and admitted.
func TestNearCacheForgetsAMerchantsRefusalDecidedAcrossARelease(t *testing.T) {
	store := &heldStore{Store: ratelimit.NewLocalStore(nil), held: "late",
		decided: make(chan struct{}), release: make(chan struct{})}
	l, err := ratelimit.New(store, ratelimit.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, "limits:\n  A:B: [{limit: 100, window: 1m, perMerchant: 1}]\n"))
	check := func(member string) ratelimit.Decision {
		return mustDecide(t, l, ratelimit.Request{Key: keyAB, Member: member, Merchant: "M1"})
	}
	if d := check("a"); !d.Allowed {
		t.Fatalf("a: %+v, want admitted", d)
	}
	late := make(chan ratelimit.Decision, 1)
	go func() {
		d, err := l.Check(context.Background(), ratelimit.Request{Key: keyAB, Member: "late", Merchant: "M1"})
		if err != nil {
			t.Error(err)
		}
		late <- d
	}()
	<-store.decided // refused by the store: M1's use is full
	if err := l.Release(context.Background(), ratelimit.HoldOf(keyAB, "a").OfMerchant("M1")); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	if d := <-late; d.Allowed || d.Merchant != "M1" {
		t.Fatalf("late: %+v, want refused by M1's limit", d)
	}
	if d := check("next"); !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("next of M1 after a's release: allowed %v from %v, want admitted by the store", d.Allowed, d.Source)
	}
}
