package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// limiterWith returns a limiter on the in-process store with doc in force.
func limiterWith(t *testing.T, doc string) *ratelimit.Limiter {
	t.Helper()
	return limiterOn(t, ratelimit.NewLocalStore(nil), ratelimit.Options{}, doc)
}

// limiterOn returns a limiter on store with opts and doc in force.
func limiterOn(t *testing.T, store ratelimit.Store, opts ratelimit.Options, doc string) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
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

// flakyStore fails every call while down is set, as a Redis that is gone.
type flakyStore struct {
	ratelimit.Store
	down atomic.Bool
}

var errGone = errors.New("dial tcp: connection refused")

func (f *flakyStore) Check(ctx context.Context, ws []ratelimit.KeyWindow, m string, a int64) (ratelimit.StoreResult, error) {
	if f.down.Load() {
		return ratelimit.StoreResult{}, fmt.Errorf("%w: %w", ratelimit.ErrNotSent, &net.OpError{Op: "dial", Err: errGone})
	}
	return f.Store.Check(ctx, ws, m, a)
}

func flakyLimiter(t *testing.T, doc string) (*ratelimit.Limiter, *flakyStore) {
	t.Helper()
	f := &flakyStore{Store: ratelimit.NewLocalStore(nil)}
	return limiterOn(t, f, ratelimit.Options{DisableNearCache: true, BreakerCooldown: time.Hour}, doc), f
}

// TestRetryDuringAnOutageIsNoConflict: a member the store admitted, retried
// with the same amount while the store is down, is the same member in the
// in-process windows (their copy keeps its amount), not a conflict.
func TestRetryDuringAnOutageIsNoConflict(t *testing.T) {
	l, f := flakyLimiter(t, "limits:\n  A:B: [{limit: 10, window: 1m}]\n")
	key := ratelimit.Key{BizType: "A", Channel: "B"}
	r := ratelimit.Request{Key: key, Member: "m", Amount: 100, Currency: "CNY"}
	if d, err := l.Check(context.Background(), r); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	f.down.Store(true)
	d, err := l.Check(context.Background(), r)
	if err != nil || d.Conflict || !d.Allowed {
		t.Fatalf("retry with the store down: allowed %v conflict %v source %s (%v); want admitted as the same member", d.Allowed, d.Conflict, d.Source, err)
	}
}

// TestAmountThatFitsAfterAnOutageIsNotAboveTheCap: back on the store after
// an outage, the limits asked are lowered by the in-process admissions; an
// amount above a lowered limit but within the cap may fit later, so it is
// no exceedsCap.
func TestAmountThatFitsAfterAnOutageIsNotAboveTheCap(t *testing.T) {
	l, f := flakyLimiter(t, "limits:\n  A:B: [{amount: 1000, window: 1m}]\n")
	key := ratelimit.Key{BizType: "A", Channel: "B"}
	f.down.Store(true)
	if d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "m1", Amount: 500, Currency: "CNY"}); err != nil || !d.Allowed {
		t.Fatalf("500 in process: %+v, %v", d, err)
	}
	f.down.Store(false)
	d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "m2", Amount: 600, Currency: "CNY"})
	if err != nil || d.Allowed || d.ExceedsCap {
		t.Fatalf("600 after the outage: allowed %v exceedsCap %v (%v); want refused, but not above the cap 1000", d.Allowed, d.ExceedsCap, err)
	}
}

// TestPeekKeepsReservations: peek answers as a check would, the other
// names' unmet reservations taken off.
func TestPeekKeepsReservations(t *testing.T) {
	l := limiterWith(t, "limits:\n  \"*:W\": [{limit: 5, window: 1m, reserve: {REFUND: 2, PAYOUT: 2}}]\n")
	online := ratelimit.Key{BizType: "ONLINE", Channel: "W"}
	if d, err := l.Check(context.Background(), ratelimit.Request{Key: online, Member: "o1"}); err != nil || !d.Allowed {
		t.Fatalf("o1: %+v, %v", d, err)
	}
	p, err := l.Peek(context.Background(), ratelimit.Request{Key: online})
	if err != nil || p.Allowed {
		t.Fatalf("peek for ONLINE with 1 used and 4 kept: allowed %v (%v), want refused as a check is", p.Allowed, err)
	}
	c, err := l.Check(context.Background(), ratelimit.Request{Key: online, Member: "o2"})
	if err != nil || c.Allowed || c.Remaining != 0 {
		t.Fatalf("check o2: allowed %v remaining %d (%v); want refused with nothing left", c.Allowed, c.Remaining, err)
	}
}

// TestIdentityKeptInProcessForEveryWindowKind: a member the shared store
// admitted for one amount, checked in process during an outage for
// another, is a conflict on every kind of window, not only on the sliding
// count windows whose admissions the in-process windows copy. An amount
// window or a calendar window alone keeps the member's amount too; with
// only the use Redis reported, the in-process check admitted the member
// again for another amount.
func TestIdentityKeptInProcessForEveryWindowKind(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"count", "limits:\n  A:B: [{limit: 10, window: 1m}]\n"},
		{"amount", "limits:\n  A:B: [{amount: 100000, window: 1m}]\n"},
		{"calendar count", "limits:\n  A:B: [{limit: 10, calendar: day}]\n"},
		{"calendar amount", "limits:\n  A:B: [{amount: 100000, calendar: day}]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, f := flakyLimiter(t, tc.doc)
			key := ratelimit.Key{BizType: "A", Channel: "B"}
			if d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "m", Amount: 100, Currency: "CNY"}); err != nil || !d.Allowed || d.Source != ratelimit.SourceRedis {
				t.Fatalf("100 on the store: %+v, %v", d, err)
			}
			f.down.Store(true)
			d, err := l.Check(context.Background(), ratelimit.Request{Key: key, Member: "m", Amount: 200, Currency: "CNY"})
			if err != nil || d.Allowed || !d.Conflict {
				t.Fatalf("200 in process: allowed %v conflict %v source %s (%v); want a conflict", d.Allowed, d.Conflict, d.Source, err)
			}
			d, err = l.Check(context.Background(), ratelimit.Request{Key: key, Member: "m", Amount: 100, Currency: "CNY"})
			if err != nil || !d.Allowed || !d.Duplicate {
				t.Fatalf("100 again in process: allowed %v duplicate %v source %s (%v); want the same member", d.Allowed, d.Duplicate, d.Source, err)
			}
		})
	}
}
