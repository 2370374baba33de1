package pay_test

import (
	"testing"
	"time"

	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// TestLimitedAmountsInMajorUnits: a 429 for an amount cap writes its
// amounts in major units of their currency, with the currency (CNY and
// USD 2 digits, JPY 0, BHD 3), and its details carry each amount also as
// a decimal string, <field>Major; the minor-unit integers stay. An amount
// over every currency has no major unit and says minor units.
func TestLimitedAmountsInMajorUnits(t *testing.T) {
	key := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	amountDay := func(currency string, limit, used, request int64, windows ...ratelimit.WindowUsage) ratelimit.Decision {
		return ratelimit.Decision{Key: key, Scope: key, Rule: "amount/day", Amount: true, Limit: limit, Count: used, RequestAmount: request,
			Currency: currency, RetryAfter: time.Hour, Source: ratelimit.SourceRedis, Windows: windows}
	}
	anyCurrency := ratelimit.WindowUsage{Scope: key, Window: ratelimit.Window{Amount: true, Limit: 500000000,
		Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}}, Count: 499990000}
	for _, tc := range []struct {
		name  string
		d     ratelimit.Decision
		msg   string
		major map[string]any
	}{
		{"CNY", amountDay("CNY", 500000000, 499990000, 20000),
			"amount 200.00 CNY does not fit the amount/day cap 5,000,000.00 CNY of channel ALIPAY for ONLINE_PAY: 4,999,900.00 CNY used, 100.00 CNY left",
			map[string]any{"amountMajor": "5000000.00", "usedMajor": "4999900.00", "requestAmountMajor": "200.00", "remainingMajor": "100.00"}},
		{"JPY", amountDay("JPY", 1000000, 999000, 5000),
			"amount 5,000 JPY does not fit the amount/day cap 1,000,000 JPY of channel ALIPAY for ONLINE_PAY: 999,000 JPY used, 1,000 JPY left",
			map[string]any{"amountMajor": "1000000", "usedMajor": "999000", "requestAmountMajor": "5000", "remainingMajor": "1000"}},
		{"BHD", amountDay("BHD", 1500, 1000, 600),
			"amount 0.600 BHD does not fit the amount/day cap 1.500 BHD of channel ALIPAY for ONLINE_PAY: 1.000 BHD used, 0.500 BHD left",
			map[string]any{"amountMajor": "1.500", "usedMajor": "1.000", "requestAmountMajor": "0.600", "remainingMajor": "0.500"}},
		{"a cap over every currency", amountDay("CNY", 500000000, 499990000, 20000, anyCurrency),
			"amount 200.00 CNY does not fit the amount/day cap 500000000 minor units of channel ALIPAY for ONLINE_PAY: 499990000 minor units used, 10000 minor units left",
			map[string]any{"requestAmountMajor": "200.00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := pay.LimitedError(key, tc.d)
			if e.Message != tc.msg {
				t.Errorf("message = %q\nwant      %q", e.Message, tc.msg)
			}
			for _, f := range []string{"amountMajor", "usedMajor", "requestAmountMajor", "remainingMajor"} {
				if got, want := e.Details[f], tc.major[f]; got != want {
					t.Errorf("details.%s = %v, want %v", f, got, want)
				}
			}
			if e.Details["amount"] != tc.d.Limit || e.Details["requestAmount"] != tc.d.RequestAmount {
				t.Errorf("details %v: the minor-unit amounts must stay", e.Details)
			}
		})
	}
}
