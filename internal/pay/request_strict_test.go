package pay

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"payserver/internal/apperr"
)

// validBody is a valid POST /pay body; extra is spliced in before its
// closing brace.
func validBody(extra string) string {
	return `{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":100,"currency":"CNY"` + extra + `}`
}

// refusal decodes body and returns its field errors (nil when accepted).
func refusal(t *testing.T, body string) ([]apperr.FieldError, *apperr.Error) {
	t.Helper()
	_, err := DecodePayRequest([]byte(body))
	if err == nil {
		return nil, nil
	}
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.InvalidRequest {
		t.Fatalf("got %v, want INVALID_REQUEST", err)
	}
	fields, _ := e.Details["fields"].([]apperr.FieldError)
	return fields, e
}

// TestStrictInputRefused: duplicate keys at any depth, invalid UTF-8 and
// lone surrogates anywhere, and currencies that are not active ISO 4217
// tender are refused, naming the field and the reason. (encoding/json keeps
// the last duplicate and turns bad text into U+FFFD, so all of these were
// accepted before.)
func TestStrictInputRefused(t *testing.T) {
	tests := []struct {
		name, body          string
		wantField, wantText string
	}{
		{"duplicate amount", validBody(`,"amount":200`), "amount", "duplicate key"},
		{"reserved bizType", `{"requestId":"r1","bizType":"RESOLVE","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`, "bizType", "reserved"},
		{"duplicate requestId", `{"requestId":"d2","requestId":"d3","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`, "requestId", "duplicate key"},
		{"duplicate through an escape", validBody(`,"\u0061mount":200`), "amount", "duplicate key"},
		{"duplicate null", validBody(`,"subject":null,"subject":"x"`), "subject", "duplicate key"},
		{"duplicate nested", validBody(`,"x":{"a":1,"a":2}`), "x.a", "duplicate key"},
		{"duplicate in an array", validBody(`,"x":[{"a":1},{"b":1,"b":2}]`), "x[1].b", "duplicate key"},
		{"duplicate with an invalid name", validBody(`,"\u0000":1,"\u0000":2`), "body", "duplicate key"},
		{"raw 0xFF in merchantId", `{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M` + "\xff" + `","amount":1,"currency":"CNY"}`, "merchantId", "UTF-8"},
		{"truncated UTF-8 in subject", validBody(`,"subject":"a` + "\xe4\xb8" + `"`), "subject", "UTF-8"},
		{"overlong UTF-8 in subject", validBody(`,"subject":"` + "\xc0\xaf" + `"`), "subject", "UTF-8"},
		{"UTF-8 encoded surrogate", validBody(`,"subject":"` + "\xed\xa0\x80" + `"`), "subject", "UTF-8"},
		{"lone high surrogate", validBody(`,"subject":"\ud800"`), "subject", "surrogate"},
		{"lone high surrogate, then a letter", validBody(`,"subject":"\uD800\u0041"`), "subject", "surrogate"},
		{"lone low surrogate", validBody(`,"subject":"x\udc00"`), "subject", "surrogate"},
		{"reversed pair", validBody(`,"subject":"\ude00\ud83d"`), "subject", "surrogate"},
		{"surrogate in a nested value", validBody(`,"x":{"y":["\ud800"]}`), "x.y[0]", "surrogate"},
		{"invalid UTF-8 in a key", validBody(`,"k` + "\xff" + `":1`), "body", "UTF-8"},
		{"unknown currency", validBody(``)[:len(validBody(``))-len(`"CNY"}`)] + `"ZZZ"}`, "currency", "ISO 4217"},
		{"no currency XXX", strings.Replace(validBody(``), "CNY", "XXX", 1), "currency", "ISO 4217"},
		{"test code XTS", strings.Replace(validBody(``), "CNY", "XTS", 1), "currency", "ISO 4217"},
		{"gold XAU", strings.Replace(validBody(``), "CNY", "XAU", 1), "currency", "ISO 4217"},
		{"SDR XDR", strings.Replace(validBody(``), "CNY", "XDR", 1), "currency", "ISO 4217"},
		{"fund code CLF", strings.Replace(validBody(``), "CNY", "CLF", 1), "currency", "ISO 4217"},
		{"withdrawn DEM", strings.Replace(validBody(``), "CNY", "DEM", 1), "currency", "ISO 4217"},
		{"lower case", strings.Replace(validBody(``), "CNY", "cny", 1), "currency", "ISO 4217"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fields, _ := refusal(t, tt.body)
			if fields == nil {
				t.Fatalf("accepted %q, want a refusal of %s", tt.body, tt.wantField)
			}
			for _, f := range fields {
				if f.Field == tt.wantField && strings.Contains(f.Reason, tt.wantText) {
					return
				}
			}
			t.Fatalf("got %+v, want field %q with a reason containing %q", fields, tt.wantField, tt.wantText)
		})
	}
}

// TestStrictInputAccepted: what is valid stays valid, surrogate pairs and
// every active currency included.
func TestStrictInputAccepted(t *testing.T) {
	for _, body := range []string{
		validBody(``),
		validBody(`,"subject":"\ud83d\ude00 \u00e9 商户 😀"`),
		validBody(`,"subject":"\uD83D\uDE00"`),
		validBody(`,"subject":"\\ud800 is text, not an escape"`),
		strings.Replace(validBody(``), "CNY", "JPY", 1),
		strings.Replace(validBody(``), "CNY", "KWD", 1),
		strings.Replace(validBody(``), "CNY", "VES", 1),
		strings.Replace(validBody(``), "CNY", "XOF", 1),
	} {
		if fields, _ := refusal(t, body); fields != nil {
			t.Errorf("refused %q: %+v", body, fields)
		}
	}
}

// TestCurrencyExponent: the minor-unit exponent of ISO 4217, which is not
// CLDR's display digits (CLDR says 0 for IQD and IDR).
func TestCurrencyExponent(t *testing.T) {
	for code, want := range map[string]int{"CNY": 2, "USD": 2, "EUR": 2, "JPY": 0, "KRW": 0, "KWD": 3, "BHD": 3, "IQD": 3, "IDR": 2, "COP": 2, "CLP": 0, "XOF": 0, "VES": 2} {
		got, ok := CurrencyExponent(code)
		if !ok || got != want {
			t.Errorf("CurrencyExponent(%s) = %d, %v; want %d, true", code, got, ok, want)
		}
	}
	for _, code := range []string{"XXX", "XTS", "XAU", "XAG", "XPT", "XPD", "XBA", "XBB", "XBC", "XBD", "XDR", "XSU", "XUA", "ZZZ", "", "cny", "CNYY"} {
		if n, ok := CurrencyExponent(code); ok {
			t.Errorf("CurrencyExponent(%q) = %d, true; want not a currency", code, n)
		}
	}
}

// TestRefusalsHideGoInternals: no reason names Go types or encoding/json.
func TestRefusalsHideGoInternals(t *testing.T) {
	for _, body := range []string{`[]`, `[1,2]`, `"x"`, `42`, `true`, `{"amount":1`, `{"requestId":"r"}}`, `{"requestId":"r"}]`, `{} x`, `{"a":}`, "", " ", `{"requestId":{"a":1}}`} {
		fields, e := refusal(t, body)
		if fields == nil {
			t.Fatalf("accepted %q", body)
		}
		text := fmt.Sprintf("%s %+v", e.Message, fields)
		for _, leak := range []string{"Go value", "json:", "RawMessage", "unmarshal", "map[", "int64"} {
			if strings.Contains(text, leak) {
				t.Errorf("refusal of %q says %q: %s", body, leak, text)
			}
		}
	}
}

// TestRefusalListIsCapped: thousands of bad fields list at most
// apperr.MaxListedFields of them, with the count of the rest.
func TestRefusalListIsCapped(t *testing.T) {
	var b strings.Builder
	for i := range 6000 {
		fmt.Fprintf(&b, `,"u%d":1`, i)
	}
	fields, e := refusal(t, validBody(b.String()))
	if len(fields) != apperr.MaxListedFields {
		t.Fatalf("listed %d fields, want %d", len(fields), apperr.MaxListedFields)
	}
	if got := e.Details["unlistedFields"]; got != 6000-apperr.MaxListedFields {
		t.Fatalf("unlistedFields = %v, want %d", got, 6000-apperr.MaxListedFields)
	}
	if !strings.Contains(e.Message, "6000") {
		t.Fatalf("message %q does not give the total", e.Message)
	}
}
