package pay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"payserver/internal/ratelimit"
)

// The field rules of POST /pay, for the other routes that take the same
// fields (/v1/limits): each returns why the value is bad, or "" when it is
// good.

// RequestIDProblem returns why s is not a valid requestId: 1..64
// characters of [A-Za-z0-9._:-].
func RequestIDProblem(s string) string { return requestIDProblem(s) }

// AmountProblem returns why n is not a valid amount: 1..MaxAmount minor
// units.
func AmountProblem(n int64) string {
	if n < 1 || n > MaxAmount {
		return amountRange
	}
	return ""
}

// amountRange is the reason every refused amount is given.
var amountRange = fmt.Sprintf("must be an integer number of minor units, 1..%d", int64(MaxAmount))

// ParseAmount reads an amount from its text (a JSON number, a query value):
// a whole number of minor units in 1..MaxAmount, in decimal digits. It returns the amount, or why the text is
// not one; a number past int64's range is told the same range as any other
// out of range.
func ParseAmount(text string) (int64, string) {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, amountRange
	}
	return n, AmountProblem(n)
}

// CurrencyProblem returns why s is not a currency a payment may be made
// in (CurrencyExponent).
func CurrencyProblem(s string) string {
	if _, ok := CurrencyExponent(s); !ok {
		return "must be an active ISO 4217 currency code in upper case, such as CNY (not XXX, XTS, a precious metal or a fund code)"
	}
	return ""
}

// MaxWaitMsCap is the largest maxWaitMs accepted (30,000).
const MaxWaitMsCap = int64(ratelimit.MaxWaitCap / time.Millisecond)

// ParseMaxWaitMs parses the optional maxWaitMs field: a JSON integer in
// 0..MaxWaitMsCap, absent or null meaning 0 (no waiting). The reason is ""
// when v is good.
func ParseMaxWaitMs(v json.RawMessage) (time.Duration, string) {
	if v == nil || string(v) == "null" {
		return 0, ""
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
	if err != nil {
		return 0, "must be an integer number of milliseconds"
	}
	if n < 0 || n > MaxWaitMsCap {
		return 0, fmt.Sprintf("must be 0..%d milliseconds", MaxWaitMsCap)
	}
	return time.Duration(n) * time.Millisecond, ""
}
