package redisstore

import (
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

func TestKeysNeverCollide(t *testing.T) {
	// The seed design concatenated bizType and channel with no separator, so
	// "AB"+"C" and "A"+"BC" shared a counter.
	s := &Store{prefix: defaultKeyPrefix}
	w := ratelimit.Window{Limit: 1, Size: time.Second}
	a := s.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: "AB", Channel: "C"}, Window: w})
	b := s.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: "A", Channel: "BC"}, Window: w})
	c := s.RedisKey(ratelimit.KeyWindow{Key: ratelimit.Key{BizType: "A", Channel: "B"}, Window: w})
	if a == b || b == c {
		t.Fatalf("keys collide: %s, %s, %s", a, b, c)
	}
	// Every key of a channel, its channel-wide key's included, shares the
	// channel's hash tag (one Cluster slot, one script call).
	if wide := s.RedisKey(ratelimit.KeyWindow{Key: ratelimit.ChannelWide("C"), Window: w}); !strings.Contains(a, "{C}") || !strings.Contains(wide, "{C}") {
		t.Fatalf("keys %s, %s lack the hash tag {C}", a, wide)
	}
}
