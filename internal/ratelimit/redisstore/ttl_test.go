package redisstore

import (
	"context"
	"testing"
	"time"

	"payserver/internal/ratelimit"

	"payserver/internal/testutil"
)

// TestEmbeddedKeyOutlivesItsWindow: the embedded server counts TTLs down
// in one-second ticks; a key must still be there while its newest member
// is in the window, or the window would admit a whole limit again.
func TestEmbeddedKeyOutlivesItsWindow(t *testing.T) {
	mini, c := testutil.MustMiniredis(t)
	s, _ := New(c, Options{})
	t0 := time.Unix(1_800_000_000, 0)
	mini.SetTime(t0)
	k := ratelimit.Key{BizType: "TTL", Channel: "X"}
	ws := []ratelimit.Window{{Limit: 1, Size: 2 * time.Second}}
	ctx := context.Background()
	if res, err := s.Check(ctx, ratelimit.KeyWindows(k, ws), "a", 0); err != nil || !res.Allowed {
		t.Fatalf("a: %+v, %v", res, err)
	}
	// Two ticks of the embedded server's TTL clock land within the window
	// (payserver ticks once a second; the first can come right after the
	// admission).
	mini.FastForward(time.Second)
	mini.FastForward(time.Second)
	mini.SetTime(t0.Add(1999 * time.Millisecond))
	if res, err := s.Check(ctx, ratelimit.KeyWindows(k, ws), "b", 0); err != nil || res.Allowed {
		t.Fatalf("b 1.999 s after a, window 2 s of 1: %+v, %v; want refused", res, err)
	}
}
