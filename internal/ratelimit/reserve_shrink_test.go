package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// reservedLimiter is a Limiter on store whose fresh channel's "*" key
// allows 100 per minute, keeping 40 for R and 40 for P, and the keys of
// that channel by bizType.
func reservedLimiter(t *testing.T, store ratelimit.Store) (*ratelimit.Limiter, func(bizType string) ratelimit.Key) {
	t.Helper()
	l := storeLimiter(t, store)
	channel := testutil.UniqueName("C")
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		ratelimit.ChannelWide(channel): {
			Windows: []ratelimit.Window{{Limit: 100, Size: time.Minute}},
			Reserve: []map[string]int64{{"R": 40, "P": 40}},
		},
	}})
	return l, func(biz string) ratelimit.Key { return ratelimit.Key{BizType: biz, Channel: channel} }
}

// TestReservationsShrinkWithTheLearnedLimit: "*:B" keeps 40 of 100 per
// minute for R and 40 for P. One throttle after 50 admissions brings the
// learned limit to 35, below the 80 reserved: each reservation becomes
// ⌊40 × 35 / 80⌋ = 17. On the emptied window R is admitted 35 − 17 = 18
// times (P's 17 stay kept), then P 17 more (R's reservation is met), and
// any other name nothing: the window is full at 35.
func TestReservationsShrinkWithTheLearnedLimit(t *testing.T) {
	for name, mk := range learnerStores() {
		t.Run(name, func(t *testing.T) {
			l, key := reservedLimiter(t, mk(t))
			channel := key("").Channel
			holds := admitN(t, l, key("X"), 20)
			holds = append(holds, admitN(t, l, key("R"), 30)...)
			if err := l.Throttled(context.Background(), holds[0], 0); err != nil {
				t.Fatal(err)
			}
			if got := mustLearned(t, l, ratelimit.ChannelWide(channel)); len(got) != 1 || got[0].Limit != 35 {
				t.Fatalf("learned %+v, want 35 (0.7 × 50)", got)
			}
			releaseAll(t, l, holds)
			admitted := func(biz string) int {
				n := 0
				for i := 0; i < 40; i++ {
					d := mustAllow(t, l, key(biz), fmt.Sprintf("%s-%d", biz, i))
					if d.Allowed {
						n++
					} else if d.RetryAfter <= 0 {
						t.Fatalf("%s refused with no retry-after: %+v", biz, d)
					}
				}
				return n
			}
			if n := admitted("R"); n != 18 {
				t.Fatalf("R admitted %d on the empty window, want 18 (35 less P's reservation shrunk to 17)", n)
			}
			if n := admitted("P"); n != 17 {
				t.Fatalf("P admitted %d, want 17 (35 less R's 18)", n)
			}
			if n := admitted("X"); n != 0 {
				t.Fatalf("X admitted %d, want 0 (the window is full at the learned 35)", n)
			}
		})
	}
}

// TestLearnedFloorKeepsACallPerReservation: a throttle on an empty "*:B"
// of 100 per minute, reserved 40 for R and 40 for P, learns the default
// floor, which is at least the two names reserved for: 2. Each
// reservation shrinks to ⌊40 × 2 / 80⌋ = 1, so R and P are admitted once
// each and any other name not at all.
func TestLearnedFloorKeepsACallPerReservation(t *testing.T) {
	for name, mk := range learnerStores() {
		t.Run(name, func(t *testing.T) {
			l, key := reservedLimiter(t, mk(t))
			channel := key("").Channel
			if err := l.Throttled(context.Background(), ratelimit.HoldOf(key("X"), "x"), 0); err != nil {
				t.Fatal(err)
			}
			if got := mustLearned(t, l, ratelimit.ChannelWide(channel)); len(got) != 1 || got[0].Limit != 2 {
				t.Fatalf("learned %+v, want the floor 2", got)
			}
			for _, c := range []struct {
				biz  string
				want int
			}{{"X", 0}, {"R", 1}, {"P", 1}, {"X", 0}} {
				n := 0
				for i := 0; i < 3; i++ {
					if mustAllow(t, l, key(c.biz), fmt.Sprintf("%s-%d", c.biz, i)).Allowed {
						n++
					}
				}
				if n != c.want {
					t.Fatalf("%s admitted %d, want %d", c.biz, n, c.want)
				}
			}
		})
	}
}
