package limitapi

import (
	"context"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// TestAcquireAndPeekCountAmounts: a caller's acquire with an amount counts
// against money caps of its currency and against the channel-wide key; a
// peek says whether a payment of some amount would pass, without taking
// anything.
func TestAcquireAndPeekCountAmounts(t *testing.T) {
	s, err := redisstore.New(testutil.MustRedis(t), redisstore.Options{Prefix: "test:limitapi:"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, ratelimit.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ch := testutil.UniqueName("AP")
	key := ratelimit.Key{BizType: "REFUND", Channel: ch}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		key:                       {Windows: []ratelimit.Window{{Limit: 1000, Size: time.Minute, Amount: true, Currency: "CNY"}}},
		ratelimit.ChannelWide(ch): {Windows: []ratelimit.Window{{Limit: 2, Size: time.Minute}}},
	}})
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "r1", Amount: 900, Currency: "CNY"})
	if err != nil || len(a.Windows) != 2 || a.Windows[0].Used != 900 || a.Windows[1].Scope != ratelimit.ChannelWide(ch) || a.Windows[1].Used != 1 {
		t.Fatalf("acquire 900 CNY: %+v, %v; want the CNY cap at 900 and the channel-wide window at 1", a.Windows, err)
	}
	for _, tc := range []struct {
		amount   int64
		currency string
		want     bool
	}{{200, "CNY", false}, {100, "CNY", true}, {200, "USD", true}, {0, "", true}} {
		p, err := svc.Peek(ctx, "refunds", PeekRequest{Key: key, Amount: tc.amount, Currency: tc.currency})
		if err != nil || p.Allowed != tc.want {
			t.Fatalf("peek %d %s: %+v, %v; want allowed %v", tc.amount, tc.currency, p, err, tc.want)
		}
	}
	// The peeks took nothing: one more call fits the channel-wide 2/min.
	if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "r2"}); err != nil {
		t.Fatalf("acquire r2 after the peeks: %v", err)
	}
	if p, err := svc.Peek(ctx, "refunds", PeekRequest{Key: key}); err != nil || p.Allowed {
		t.Fatalf("peek with the channel-wide window full: %+v, %v; want not allowed", p, err)
	}
}

// TestWindowsNameTheirCurrency: an amount window of one currency names it
// in the acquire and peek answers, so that its amounts can be read in
// major units; a window over every currency names none.
func TestWindowsNameTheirCurrency(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{key: {Windows: []ratelimit.Window{
		{Limit: 1000, Size: time.Minute, Amount: true, Currency: "BHD"},
		{Limit: 100000, Size: time.Hour, Amount: true},
	}}}})
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Acquire(context.Background(), "refunds", AcquireRequest{Key: key, RequestID: "r1", Amount: 600, Currency: "BHD"})
	if err != nil || len(a.Windows) != 2 || a.Windows[0].Currency != "BHD" || a.Windows[1].Currency != "" {
		t.Fatalf("acquire: %+v, %v; want the BHD window named BHD and the other none", a.Windows, err)
	}
}

// TestPeekAnswersForTheMerchant: a peek for merchant m answers for m's own
// limit in a window with limits per merchant: refused once m's use is
// full, while another merchant, and a peek naming none (the merchant "-"),
// would still be admitted, and the merchant's window names it.
func TestPeekAnswersForTheMerchant(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		key: {
			Windows:   []ratelimit.Window{{Limit: 10, Size: time.Minute}},
			Merchants: []*ratelimit.Merchants{{PerMerchant: 2, Overrides: map[string]int64{"M_VIP": 5}}},
		},
	}})
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"r1", "r2"} {
		if _, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: id, MerchantID: "M1"}); err != nil {
			t.Fatalf("acquire %s for M1: %v", id, err)
		}
	}
	for _, tc := range []struct {
		merchant string
		want     bool
		used     int64
		limit    int64
	}{{"M1", false, 2, 2}, {"M2", true, 0, 2}, {"M_VIP", true, 0, 5}, {"", true, 0, 2}} {
		p, err := svc.Peek(ctx, "refunds", PeekRequest{Key: key, MerchantID: tc.merchant})
		if err != nil || p.Allowed != tc.want {
			t.Fatalf("peek for %q: %+v, %v; want allowed %v", tc.merchant, p, err, tc.want)
		}
		want := tc.merchant
		if want == "" {
			want = ratelimit.NoMerchant
		}
		if len(p.Windows) != 2 || p.Windows[0].Used != 2 || p.Windows[1].Merchant != want || p.Windows[1].Used != tc.used || p.Windows[1].Limit != tc.limit {
			t.Fatalf("peek for %q: windows %+v; want the window at 2 used, then %s's at %d/%d", tc.merchant, p.Windows, want, tc.used, tc.limit)
		}
	}
}

// TestReleaseGivesBackTheMerchantsUse: a release naming the merchant the
// slot was acquired for gives back that merchant's use of a window with
// limits per merchant: M, limited to 1, acquires again.
func TestReleaseGivesBackTheMerchantsUse(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{key: {
		Windows:   []ratelimit.Window{{Limit: 10, Size: time.Minute}},
		Merchants: []*ratelimit.Merchants{{PerMerchant: 1}},
	}}})
	svc, err := NewService(Options{Admit: l, Peek: l, Ledger: memLedger(t, l)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "r1", MerchantID: "M"}); err != nil || !a.Decision.Allowed {
		t.Fatalf("r1 for M: %+v, %v", a, err)
	}
	if err := svc.Release(ctx, "refunds", ReleaseRequest{Key: key, RequestID: "r1", MerchantID: "M"}); err != nil {
		t.Fatal(err)
	}
	if a, err := svc.Acquire(ctx, "refunds", AcquireRequest{Key: key, RequestID: "r2", MerchantID: "M"}); err != nil || !a.Decision.Allowed {
		t.Fatalf("r2 for M after r1's release: %+v, %v; want admitted", a, err)
	}
}
