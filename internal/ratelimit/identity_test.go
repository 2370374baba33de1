package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// limiterWith returns a limiter on the in-process store with doc in force.
func limiterWith(t *testing.T, doc string) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ratelimit.ParseDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(cfg)
	return l
}

// TestRetryWithAnotherAmountIsAConflict: a member's identity is its
// requestId and its amount. R1 admitted for 100 under a 1000 cap, then
// checked for 900000, must not be admitted as a duplicate at the old
// amount (the cap would be bypassed by whoever pays the larger amount);
// nor on a count-only key.
func TestRetryWithAnotherAmountIsAConflict(t *testing.T) {
	for _, doc := range []string{
		"limits:\n  REFUND:ALIPAY: [{amount: 1000, window: 1m}]\n",
		"limits:\n  REFUND:ALIPAY: [{limit: 5, window: 1m}]\n",
	} {
		l := limiterWith(t, doc)
		key := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
		ctx := context.Background()
		if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "R1", Amount: 100}); err != nil || !d.Allowed {
			t.Fatalf("%s: R1 for 100: %+v, %v", doc, d, err)
		}
		d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "R1", Amount: 900000})
		if err != nil || d.Allowed || !d.Conflict || d.RetryAfter != 0 {
			t.Fatalf("%s: R1 again for 900000: allowed %v duplicate %v conflict %v retry %v (%v); want a conflict", doc, d.Allowed, d.Duplicate, d.Conflict, d.RetryAfter, err)
		}
		if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "R1", Amount: 100}); err != nil || !d.Allowed || !d.Duplicate {
			t.Fatalf("%s: R1 again for 100: %+v, %v; want a duplicate", doc, d, err)
		}
	}
}

// TestAmountAboveACapExceedsItWhateverTheWaits: when a refusing window can
// never take the amount, the refusal says so (ExceedsCap, bound by that
// window), even when another refusing window has a longer wait: a
// Retry-After would send the client to wait for nothing.
func TestAmountAboveACapExceedsItWhateverTheWaits(t *testing.T) {
	l := limiterWith(t, "limits:\n  ONLINE_PAY:ALIPAY: [{limit: 1, window: 3s}, {amount: 1000, window: 1s}]\n")
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	ctx := context.Background()
	if d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "P1", Amount: 10}); err != nil || !d.Allowed {
		t.Fatalf("P1: %+v, %v", d, err)
	}
	d, err := l.Check(ctx, ratelimit.Request{Key: key, Member: "P2", Amount: 5000})
	if err != nil || d.Allowed || !d.ExceedsCap || !d.Amount || d.Limit != 1000 {
		t.Fatalf("P2 for 5000: allowed %v exceedsCap %v rule %s limit %d (%v); want exceedsCap on the amount window", d.Allowed, d.ExceedsCap, d.Rule, d.Limit, err)
	}
}

// TestScheduledClosureSaysWhenItEnds: a key closed by a schedule answers
// when it opens again (ClosedUntil, RetryAfter until then); a key closed by
// its base rules knows no such time.
func TestScheduledClosureSaysWhenItEnds(t *testing.T) {
	now := time.Now().UTC()
	to := now.Add(time.Hour).Truncate(time.Second)
	l := limiterWith(t, fmt.Sprintf("limits:\n  ONLINE_PAY:ALIPAY: 5\n  ONLINE_PAY:WECHAT: 0\nschedules:\n  - {key: \"ONLINE_PAY:ALIPAY\", from: %q, to: %q, limits: 0}\n",
		now.Add(-time.Minute).Format(time.RFC3339), to.Format(time.RFC3339)))
	ctx := context.Background()
	d, err := l.Check(ctx, ratelimit.Request{Key: ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}, Member: "P1"})
	if err != nil || d.Allowed || !d.Closed() || !d.ClosedUntil.Equal(to) || d.RetryAfter <= 59*time.Minute {
		t.Fatalf("scheduled closure: allowed %v closed %v until %v retry %v (%v); want closed until %v", d.Allowed, d.Closed(), d.ClosedUntil, d.RetryAfter, err, to)
	}
	d, err = l.Check(ctx, ratelimit.Request{Key: ratelimit.Key{BizType: "ONLINE_PAY", Channel: "WECHAT"}, Member: "P2"})
	if err != nil || !d.Closed() || !d.ClosedUntil.IsZero() || d.RetryAfter != 0 {
		t.Fatalf("closed by the base rules: closed %v until %v retry %v (%v); want no reopening time", d.Closed(), d.ClosedUntil, d.RetryAfter, err)
	}
}

// TestReservationIsNotTakenByAnotherName: what is kept for PAYOUT is not
// REFUND's to take, and the reverse: with *:WECHAT at 5 keeping 2 for each,
// ONLINE (unnamed) gets 1, REFUND 2 and PAYOUT 2, whoever asks first.
func TestReservationIsNotTakenByAnotherName(t *testing.T) {
	l := limiterWith(t, "limits:\n  \"*:WECHAT\": [{limit: 5, window: 1m, reserve: {REFUND: 2, PAYOUT: 2}}]\n")
	ctx := context.Background()
	got := map[string]int{}
	for _, try := range []struct {
		biz string
		n   int
	}{{"ONLINE", 3}, {"REFUND", 4}, {"PAYOUT", 3}} {
		for i := range try.n {
			d, err := l.Check(ctx, ratelimit.Request{Key: ratelimit.Key{BizType: try.biz, Channel: "WECHAT"}, Member: fmt.Sprintf("%s-%d", try.biz, i)})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				got[try.biz]++
			}
		}
	}
	if got["ONLINE"] != 1 || got["REFUND"] != 2 || got["PAYOUT"] != 2 {
		t.Fatalf("admitted %v, want ONLINE 1, REFUND 2, PAYOUT 2", got)
	}
}
