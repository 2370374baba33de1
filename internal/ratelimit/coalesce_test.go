package ratelimit

import (
	"testing"

	"payserver/internal/testutil"
)

// TestCoalescerInFlightReachesBatchers: RedisStoreOptions.InFlight is the
// bound of every key's batcher (0 stays 0, which the batcher reads as 1).
func TestCoalescerInFlightReachesBatchers(t *testing.T) {
	_, c := testutil.MustMiniredis(t)
	for _, inFlight := range []int{0, 1, 2, 4} {
		s, err := NewRedisStoreWithOptions(c, RedisStoreOptions{Coalesce: true, InFlight: inFlight})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.co.newBatcher().InFlight; got != inFlight {
			t.Errorf("InFlight %d: a key's batcher has %d", inFlight, got)
		}
	}
}
