package pay_test

import (
	"reflect"
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// TestLimitedErrorNamesTheBindingRule: the 429 details name the binding
// rule, its cap as limit (counts) or amount (amounts), its use, the
// channel-wide scope when that key binds, and the time until a calendar
// window's next period.
func TestLimitedErrorNamesTheBindingRule(t *testing.T) {
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	tests := []struct {
		name      string
		d         ratelimit.Decision
		want      map[string]any
		wantRetry time.Duration
		wantMsg   string
	}{
		{"sliding count",
			ratelimit.Decision{Key: key, Scope: key, Rule: "count/1s", Limit: 100, Window: time.Second, Count: 100, RetryAfter: 420 * time.Millisecond, Source: ratelimit.SourceRedis},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": int64(100), "used": int64(100), "windowMs": int64(1000), "retryAfterMs": int64(420)},
			420 * time.Millisecond, "channel ALIPAY is at its limit for ONLINE_PAY (count/1s)"},
		{"calendar amount: until the next period",
			ratelimit.Decision{Key: key, Scope: key, Rule: "amount/day", Amount: true, Limit: 500000000, Count: 499990000, RequestAmount: 20000, Currency: "CNY", RetryAfter: 2*time.Hour + 20*time.Minute, Source: ratelimit.SourceRedis},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "amount/day", "amount": int64(500000000), "used": int64(499990000), "retryAfterMs": int64(8400000),
				"requestAmount": int64(20000), "remaining": int64(10000), "currency": "CNY",
				"amountMajor": "5000000.00", "usedMajor": "4999900.00", "requestAmountMajor": "200.00", "remainingMajor": "100.00"},
			2*time.Hour + 20*time.Minute, "amount 200.00 CNY does not fit the amount/day cap 5,000,000.00 CNY of channel ALIPAY for ONLINE_PAY: 4,999,900.00 CNY used, 100.00 CNY left"},
		{"channel-wide scope",
			ratelimit.Decision{Key: key, Scope: ratelimit.ChannelWide("ALIPAY"), Rule: "count/1s", Limit: 160, Window: time.Second, Count: 160, RetryAfter: time.Millisecond, Source: ratelimit.SourceRedis},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": int64(160), "used": int64(160), "windowMs": int64(1000), "retryAfterMs": int64(1), "scope": "*:ALIPAY"},
			time.Millisecond, "channel ALIPAY is at its channel-wide limit (count/1s) for ONLINE_PAY"},
		{"a merchant's limit: scope merchant, its own use and wait",
			ratelimit.Decision{Key: key, Scope: key, Merchant: "M_VIP", Rule: "count/1s", Limit: 40, Window: time.Second, Count: 40, RetryAfter: 250 * time.Millisecond, Source: ratelimit.SourceRedis},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": int64(40), "used": int64(40), "windowMs": int64(1000), "retryAfterMs": int64(250), "scope": "merchant", "merchantId": "M_VIP"},
			250 * time.Millisecond, "merchant M_VIP is at its limit (count/1s) of ONLINE_PAY:ALIPAY"},
		{"a merchant's limit on the channel-wide key",
			ratelimit.Decision{Key: key, Scope: ratelimit.ChannelWide("ALIPAY"), Merchant: "-", Rule: "count/1m", Limit: 5, Window: time.Minute, Count: 5, RetryAfter: time.Second, Source: ratelimit.SourceRedis},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1m", "limit": int64(5), "used": int64(5), "windowMs": int64(60000), "retryAfterMs": int64(1000), "scope": "merchant", "merchantId": "-"},
			time.Second, "merchant - is at its limit (count/1m) of *:ALIPAY"},
		{"a merchant refused (limit 0)",
			ratelimit.Decision{Key: key, Scope: key, Merchant: "BAD", Limit: 0, Window: time.Second, Source: ratelimit.SourceClosed},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": int64(0), "used": int64(0), "windowMs": int64(1000), "closed": true, "scope": "merchant", "merchantId": "BAD"},
			0, "merchant BAD is refused on ONLINE_PAY:ALIPAY (its merchant limit is 0)"},
		{"closed by the base rules",
			ratelimit.Decision{Key: key, Limit: 0, Window: time.Second, Source: ratelimit.SourceClosed},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": int64(0), "used": int64(0), "windowMs": int64(1000), "closed": true},
			0, "channel ALIPAY is closed for ONLINE_PAY"},
		{"closed by a schedule that ends",
			ratelimit.Decision{Key: key, Limit: 0, Window: time.Second, Source: ratelimit.SourceClosed,
				ClosedUntil: time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), RetryAfter: 90 * time.Second},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "count/1s", "limit": int64(0), "used": int64(0), "windowMs": int64(1000), "closed": true,
				"closedUntil": "2026-12-01T04:00:00Z", "retryAfterMs": int64(90000)},
			90 * time.Second, "channel ALIPAY is closed for ONLINE_PAY until 2026-12-01T04:00:00Z"},
		{"an amount that never fits has no retry time",
			ratelimit.Decision{Key: key, Scope: key, Rule: "amount/1m", Amount: true, Limit: 100, Window: time.Minute, Count: 0, RequestAmount: 500, Source: ratelimit.SourceRedis, ExceedsCap: true},
			map[string]any{"bizType": "ONLINE_PAY", "channel": "ALIPAY", "rule": "amount/1m", "amount": int64(100), "used": int64(0), "windowMs": int64(60000), "exceedsCap": true,
				"requestAmount": int64(500), "remaining": int64(100)},
			0, "amount 500 minor units is above the amount/1m cap 100 minor units of channel ALIPAY for ONLINE_PAY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := pay.LimitedError(key, tt.d)
			if !reflect.DeepEqual(e.Details, tt.want) {
				t.Errorf("details = %v, want %v", e.Details, tt.want)
			}
			if e.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, tt.wantRetry)
			}
			if e.Message != tt.wantMsg {
				t.Errorf("message = %q, want %q", e.Message, tt.wantMsg)
			}
		})
	}
}

// TestDegradedAmountRefusalIsNotExceedsCap: in process, while Redis fails,
// the limit is the instance's share of what was left: an amount above it
// may fit later, so the answer has a Retry-After, not exceedsCap.
func TestDegradedAmountRefusalIsNotExceedsCap(t *testing.T) {
	d := ratelimit.Decision{Key: ratelimit.Key{BizType: "P", Channel: "A"}, Rule: "amount/day", Amount: true, Limit: 33_333,
		Count: 0, RequestAmount: 200_000, RetryAfter: time.Second, Source: ratelimit.SourceLocal}
	e := pay.LimitedError(d.Key, d)
	if e.Details["exceedsCap"] == true || e.RetryAfter <= 0 {
		t.Fatalf("details %v, RetryAfter %v: want a Retry-After and no exceedsCap", e.Details, e.RetryAfter)
	}
}
