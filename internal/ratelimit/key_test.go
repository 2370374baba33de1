package ratelimit

import (
	"strings"
	"testing"
	"time"
)

func TestKeysNeverCollide(t *testing.T) {
	// The seed design concatenated bizType and channel with no separator, so
	// "AB"+"C" and "A"+"BC" shared a counter.
	s := &RedisStore{prefix: defaultKeyPrefix}
	w := Window{Limit: 1, Size: time.Second}
	a := s.RedisKey(KeyWindow{Key: Key{"AB", "C"}, Window: w})
	b := s.RedisKey(KeyWindow{Key: Key{"A", "BC"}, Window: w})
	c := s.RedisKey(KeyWindow{Key: Key{"A", "B"}, Window: w})
	if a == b || b == c {
		t.Fatalf("keys collide: %s, %s, %s", a, b, c)
	}
	// Every key of a channel, its channel-wide key's included, shares the
	// channel's hash tag (one Cluster slot, one script call).
	if wide := s.RedisKey(KeyWindow{Key: ChannelWide("C"), Window: w}); !strings.Contains(a, "{C}") || !strings.Contains(wide, "{C}") {
		t.Fatalf("keys %s, %s lack the hash tag {C}", a, wide)
	}
}
