package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// An acquisition of the limits API is released by requestId, its windows
// unknown. Acquired under one document and
// released two documents later (or on an instance restarted since, which
// knows only the document in force), it would stay in the first
// document's calendar windows while the release answered that it was
// freed, and a later document with the same amount/day window would count
// the released amount to the end of the day. The windows every document gave a key are kept in Redis beside the
// windows, so any instance releases from all of them.
func TestReleaseByRequestIDAfterTwoLimitsChangesLeavesNoMember(t *testing.T) {
	docs := []string{
		"zone: Asia/Shanghai\nlimits:\n  A:B: [{limit: 53, calendar: day, cutoff: \"06:00\"}, {amount: 113107, calendar: day, currency: CNY}]\n",
		"zone: America/Santiago\nlimits:\n  A:B: [{limit: 46, calendar: day, cutoff: \"05:00\"}, {amount: 88531, calendar: day, currency: CNY}]\n",
		"zone: America/New_York\nlimits:\n  A:B: [{limit: 77, calendar: day, cutoff: \"05:00\"}, {amount: 90656, calendar: day, currency: CNY}]\n",
	}
	for _, restarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("restarted=%v", restarted), func(t *testing.T) {
			c := testutil.MustRedis(t)
			prefix := fmt.Sprintf("test:reg:%d:", time.Now().UnixNano())
			store, err := redisstore.New(c, redisstore.Options{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			acquirer, err := ratelimit.New(store, ratelimit.Options{DisableNearCache: true})
			if err != nil {
				t.Fatal(err)
			}
			go acquirer.RunWindowRegistry(ctx)
			first := mustConfig(t, docs[0])
			acquirer.SetConfig(first)
			const member = "#api:c:q2-1342-2"
			if d, err := acquirer.Check(ctx, ratelimit.Request{Key: keyAB, Member: member, Amount: 2869, Currency: "CNY"}); err != nil || !d.Allowed {
				t.Fatalf("acquire: %+v, %v", d, err)
			}
			for _, doc := range docs[1:] {
				acquirer.SetConfig(mustConfig(t, doc))
			}
			releaser := acquirer
			if restarted {
				// Another instance, or this one restarted: it has loaded
				// only the document in force.
				releaser, err = ratelimit.New(store, ratelimit.Options{DisableNearCache: true})
				if err != nil {
					t.Fatal(err)
				}
				go releaser.RunWindowRegistry(ctx)
				releaser.SetConfig(mustConfig(t, docs[2]))
			}
			var use []int64
			var held bool
			// The windows are registered in the background: a release made
			// before that holds them is made again, as a client would.
			for deadline := time.Now().Add(3 * time.Second); ; {
				h, err := releaser.ReleaseHeld(ctx, ratelimit.HoldOf(keyAB, member))
				if err != nil {
					t.Fatal(err)
				}
				held = held || h
				use, err = store.Usage(ctx, ratelimit.KeyWindows(keyAB, first.Rules[keyAB].Windows))
				if err != nil {
					t.Fatal(err)
				}
				if (use[0] == 0 && use[1] == 0) || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if use[0] != 0 || use[1] != 0 {
				t.Fatalf("the first document's count/day and amount/day windows hold %v after the release, want [0 0]: the released member stayed in them", use)
			}
			if !held {
				t.Fatal("the release found no slot (404 SLOT_NOT_FOUND through the limits API), yet it held one")
			}
		})
	}
}

// unreadableRegistry is a shared store whose registry of windows
// (RegisterWindows, RegisteredWindows) cannot be read: the windows of a
// key's earlier documents are unknown to a release by requestId.
type unreadableRegistry struct{ *ratelimit.LocalStore }

func (unreadableRegistry) RegisterWindows(context.Context, map[ratelimit.Key][]ratelimit.KeyWindow, time.Time) error {
	return nil
}

func (unreadableRegistry) RegisteredWindows(context.Context, []ratelimit.Key, time.Time) ([]ratelimit.KeyWindow, error) {
	return nil, fmt.Errorf("registry: connection reset")
}

// A release by requestId whose registry read fails cannot know the
// windows earlier documents gave the key: it must not answer that it
// released (200) while the member may stay in one of them; it fails, so
// the client retries (503).
func TestReleaseByRequestIDFailsWhenTheRegistryIsUnreadable(t *testing.T) {
	l, err := ratelimit.New(unreadableRegistry{ratelimit.NewLocalStore(nil)}, ratelimit.Options{DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, "zone: Asia/Shanghai\nlimits:\n  A:B: [{limit: 78, calendar: day, cutoff: \"10:00\"}, {amount: 118008, calendar: day, currency: CNY}]\n"))
	ctx := context.Background()
	const member = "#api:c:q0-83-2"
	if d, err := l.Check(ctx, ratelimit.Request{Key: keyAB, Member: member, Amount: 583, Currency: "CNY"}); err != nil || !d.Allowed {
		t.Fatalf("acquire: %+v, %v", d, err)
	}
	held, err := l.ReleaseHeld(ctx, ratelimit.HoldOf(keyAB, member))
	if err == nil {
		t.Fatalf("release with the registry unreadable: held=%v, nil error; want an error (503), not an answer that it released", held)
	}
}
