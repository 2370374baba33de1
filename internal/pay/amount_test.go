package pay_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"payserver/internal/apperr"
	"payserver/internal/pay"
)

// amountReason returns the reason err gives for the amount field, or "".
func amountReason(t *testing.T, err error) string {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) {
		t.Fatalf("err %v, want INVALID_REQUEST", err)
	}
	for _, f := range e.Details["fields"].([]apperr.FieldError) {
		if f.Field == "amount" {
			return f.Reason
		}
	}
	return ""
}

// TestAmountRefusalSaysTheRange: every refused amount, out of int64's range
// or not a whole number, is told the range it must be in.
func TestAmountRefusalSaysTheRange(t *testing.T) {
	want := fmt.Sprintf("1..%d", int64(pay.MaxAmount))
	for _, amount := range []string{"99999999999999999999999", "-99999999999999999999999", "1000000000001", "0", "-1", "10.5", "1e3", `"5"`, "true"} {
		t.Run(amount, func(t *testing.T) {
			body := `{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":` + amount + `,"currency":"CNY"}`
			_, err := pay.DecodePayRequest([]byte(body))
			if got := amountReason(t, err); !strings.Contains(got, want) {
				t.Errorf("amount %s: reason %q; want it to say the range %s", amount, got, want)
			}
		})
	}
}
