package ratelimit_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// On the Redis store, as shipped (coalescing), a refusal by a merchant's
// own limit names that merchant, and the near-cache answers that
// merchant's next request without Redis, while another merchant's still
// goes to Redis and a release of the merchant's slot ends the refusal.
func TestTheNearCacheRemembersAMerchantsRefusalFromRedis(t *testing.T) {
	servers := map[string]func(t *testing.T) redis.UniversalClient{
		"redis":   func(t *testing.T) redis.UniversalClient { return testutil.MustRedis(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return testutil.MustCluster(t) },
		"embedded": func(t *testing.T) redis.UniversalClient {
			_, c := testutil.MustMiniredis(t)
			return c
		},
	}
	for name, client := range servers {
		t.Run(name, func(t *testing.T) {
			store, err := redisstore.New(client(t), redisstore.Options{Prefix: "test:nearm:", Coalesce: true})
			if err != nil {
				t.Fatal(err)
			}
			l, err := ratelimit.New(store, ratelimit.Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := ratelimit.Key{BizType: "A", Channel: testutil.UniqueName("C")}
			l.SetConfig(mustConfig(t, fmt.Sprintf("limits:\n  %s: [{limit: 100, window: 1m, perMerchant: 1}]\n", k)))
			check := func(member, merchant string) ratelimit.Decision {
				t.Helper()
				return mustDecide(t, l, ratelimit.Request{Key: k, Member: member, Merchant: merchant})
			}
			for _, c := range []struct {
				member, merchant string
				allowed          bool
				source           ratelimit.Source
			}{
				{"a", "M1", true, ratelimit.SourceRedis},
				{"b", "M1", false, ratelimit.SourceRedis},
				{"c", "M1", false, ratelimit.SourceNearCache},
				{"d", "M2", true, ratelimit.SourceRedis},
			} {
				d := check(c.member, c.merchant)
				if d.Allowed != c.allowed || d.Source != c.source || !d.Allowed && d.Merchant != c.merchant {
					t.Fatalf("%s of %s: allowed %v from %v by merchant %q; want allowed %v from %v", c.member, c.merchant, d.Allowed, d.Source, d.Merchant, c.allowed, c.source)
				}
			}
			if err := l.Release(t.Context(), ratelimit.HoldOf(k, "a").OfMerchant("M1")); err != nil {
				t.Fatal(err)
			}
			if d := check("e", "M1"); !d.Allowed || d.Source != ratelimit.SourceRedis {
				t.Fatalf("e of M1 after a's release: allowed %v from %v, want admitted by Redis", d.Allowed, d.Source)
			}
		})
	}
}
