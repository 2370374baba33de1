package limitapi

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// TestReleaseOfASlotNotHeldIsNotFound: a release finds the client's own
// slot and frees it; another client's release of that requestId, and a
// second release of it, find no slot: SLOT_NOT_FOUND, nothing changed. On
// every store payserver runs on, and in every kind of window (sliding
// count, sliding amount, calendar).
func TestReleaseOfASlotNotHeldIsNotFound(t *testing.T) {
	const notHeld = apperr.SlotNotFound
	for _, sc := range []struct {
		name  string
		store func(t *testing.T) ratelimit.Store
	}{
		{"redis", func(t *testing.T) ratelimit.Store {
			s, err := redisstore.New(testutil.MustRedis(t), redisstore.Options{Prefix: "test:limitapi:"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"embedded", func(t *testing.T) ratelimit.Store {
			s, err := ratelimit.OpenDurableStore(filepath.Join(t.TempDir(), "limiter.journal"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"in-process", func(t *testing.T) ratelimit.Store { return ratelimit.NewLocalStore(nil) }},
	} {
		t.Run(sc.name, func(t *testing.T) {
			l, err := ratelimit.New(sc.store(t), ratelimit.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			key := ratelimit.Key{BizType: "REFUND", Channel: testutil.UniqueName("NH")}
			l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{key: {Windows: []ratelimit.Window{
				{Limit: 5, Size: time.Minute},
				{Limit: 10_000, Size: time.Minute, Amount: true, Currency: "CNY"},
				{Limit: 50, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}},
			}}}})
			svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "R1", Amount: 700, Currency: "CNY"}); err != nil {
				t.Fatal(err)
			}
			err = svc.Release(ctx, "payouts", ReleaseRequest{Key: key, RequestID: "R1"})
			if got := apperr.CodeOf(err); got != notHeld {
				t.Fatalf("payouts releasing refunds' R1: %v (code %q); want code %s", err, got, notHeld)
			}
			if _, counts, err := l.Usage(ctx, key); err != nil || counts[0] != 1 || counts[1] != 700 || counts[2] != 1 {
				t.Fatalf("after payouts' release the windows hold %v (%v), want [1 700 1]: refunds' slot kept", counts, err)
			}
			if err := svc.Release(ctx, "refunds", ReleaseRequest{Key: key, RequestID: "R1"}); err != nil {
				t.Fatalf("refunds releasing its R1: %v", err)
			}
			err = svc.Release(ctx, "refunds", ReleaseRequest{Key: key, RequestID: "R1"})
			if got := apperr.CodeOf(err); got != notHeld {
				t.Fatalf("refunds releasing R1 again: %v (code %q); want code %s", err, got, notHeld)
			}
		})
	}
}

// downStore is a shared store that no longer answers releases.
type downStore struct{ ratelimit.Store }

func (downStore) Release(context.Context, []ratelimit.KeyWindow, string) (bool, error) {
	return false, errors.New("dial tcp: connection refused")
}

// TestReleaseWhileTheStoreIsDownIsNever404: when the shared store does not
// answer, what it held is unknown: the release is DEPENDENCY_UNAVAILABLE,
// never SLOT_NOT_FOUND.
func TestReleaseWhileTheStoreIsDownIsNever404(t *testing.T) {
	l, err := ratelimit.New(downStore{ratelimit.NewLocalStore(nil)}, ratelimit.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{key: {Windows: []ratelimit.Window{{Limit: 5, Size: time.Minute}}}}})
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Release(context.Background(), "refunds", ReleaseRequest{Key: key, RequestID: "R1"})
	if got := apperr.CodeOf(err); got != apperr.DependencyUnavailable {
		t.Fatalf("release with the store down: %v (code %q); want DEPENDENCY_UNAVAILABLE", err, got)
	}
}
