package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// TestReleaseByRequestIDLeavesTheMerchantsUse: a hold whose windows are
// unknown (a release by requestId) leaves the merchant's own use of a
// window with limits per merchant too: M, limited to 1, is admitted again
// once its one slot is released.
func TestReleaseByRequestIDLeavesTheMerchantsUse(t *testing.T) {
	for name, mk := range learnerStores() {
		t.Run(name, func(t *testing.T) {
			l := storeLimiter(t, mk(t))
			k := newKey()
			l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{k: {
				Windows:   []ratelimit.Window{{Limit: 10, Size: time.Minute}},
				Merchants: []*ratelimit.Merchants{{PerMerchant: 1}},
			}}})
			ctx := context.Background()
			for _, merchant := range []string{"M", ""} {
				r1, r2 := "r1"+merchant, "r2"+merchant
				if d, err := l.Check(ctx, ratelimit.Request{Key: k, Member: r1, Merchant: merchant}); err != nil || !d.Allowed {
					t.Fatalf("%s for %q: %+v, %v", r1, merchant, d, err)
				}
				if err := l.Release(ctx, ratelimit.HoldOf(k, r1).OfMerchant(merchant)); err != nil {
					t.Fatal(err)
				}
				if d, err := l.Check(ctx, ratelimit.Request{Key: k, Member: r2, Merchant: merchant}); err != nil || !d.Allowed {
					t.Fatalf("%s for %q after %s was released by requestId: %+v, %v; want admitted", r2, merchant, r1, d, err)
				}
			}
		})
	}
}
