package limitapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/pay"
)

func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	var e *apperr.Error
	if !errors.As(err, &e) || e.Code != apperr.InvalidRequest {
		t.Fatalf("err %v, want INVALID_REQUEST", err)
	}
	var out []string
	for _, f := range e.Details["fields"].([]apperr.FieldError) {
		out = append(out, f.Field)
	}
	return out
}

func TestDecodeAcquire(t *testing.T) {
	ok, err := DecodeAcquire([]byte(`{"bizType":"REFUND","channel":"ALIPAY","requestId":"r-1","amount":100,"currency":"CNY","merchantId":"M1","maxWaitMs":2500}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok.Key.String() != "REFUND:ALIPAY" || ok.RequestID != "r-1" || ok.Amount != 100 || ok.Currency != "CNY" || ok.MerchantID != "M1" || ok.MaxWait != 2500*time.Millisecond {
		t.Errorf("got %+v", ok)
	}
	if r, err := DecodeAcquire([]byte(`{"bizType":"A","channel":"B","requestId":"x","amount":null,"currency":null,"maxWaitMs":null}`)); err != nil || r.Amount != 0 || r.MaxWait != 0 {
		t.Errorf("nulls: got %+v, %v; want absent", r, err)
	}
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"not an object", `"x"`, []string{"body"}},
		{"two objects", `{} {}`, []string{"body"}},
		{"empty", `{}`, []string{"bizType", "channel", "requestId"}},
		{"unknown field", `{"bizType":"A","channel":"B","requestId":"x","merchant":"M"}`, []string{"merchant"}},
		{"merchantId too long", `{"bizType":"A","channel":"B","requestId":"x","merchantId":"` + strings.Repeat("m", 65) + `"}`, []string{"merchantId"}},
		{"merchantId not a string", `{"bizType":"A","channel":"B","requestId":"x","merchantId":5}`, []string{"merchantId"}},
		{"bad codes", `{"bizType":"a","channel":"B:C","requestId":"x"}`, []string{"bizType", "channel"}},
		{"bad requestId", `{"bizType":"A","channel":"B","requestId":""}`, []string{"requestId"}},
		{"amount string", `{"bizType":"A","channel":"B","requestId":"x","amount":"5"}`, []string{"amount"}},
		{"amount over max", `{"bizType":"A","channel":"B","requestId":"x","amount":1000000000001}`, []string{"amount"}},
		{"currency", `{"bizType":"A","channel":"B","requestId":"x","currency":"yen"}`, []string{"currency"}},
		{"amount without currency", `{"bizType":"A","channel":"B","requestId":"x","amount":100}`, []string{"currency"}},
		{"maxWaitMs over cap", `{"bizType":"A","channel":"B","requestId":"x","maxWaitMs":30001}`, []string{"maxWaitMs"}},
		{"maxWaitMs fraction", `{"bizType":"A","channel":"B","requestId":"x","maxWaitMs":1.5}`, []string{"maxWaitMs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeAcquire([]byte(tc.body))
			got := fieldsOf(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("fields %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("fields %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestDecodeRelease(t *testing.T) {
	if _, err := DecodeRelease([]byte(`{"bizType":"A","channel":"B","requestId":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if got := fieldsOf(t, func() error {
		_, err := DecodeRelease([]byte(`{"bizType":"A","channel":"B","requestId":"x","maxWaitMs":1}`))
		return err
	}()); len(got) != 1 || got[0] != "maxWaitMs" {
		t.Errorf("fields %v, want [maxWaitMs] (release takes no wait)", got)
	}
}

func TestParsePeek(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query map[string][]string
		want  []string // bad fields; nil means valid
	}{
		{"valid", map[string][]string{"bizType": {"A"}, "channel": {"B"}, "amount": {"10"}, "currency": {"CNY"}, "merchantId": {"M1"}}, nil},
		{"amount without currency", map[string][]string{"bizType": {"A"}, "channel": {"B"}, "amount": {"10"}}, []string{"currency"}},
		{"missing", map[string][]string{}, []string{"bizType", "channel"}},
		{"repeated", map[string][]string{"bizType": {"A", "B"}, "channel": {"B"}}, []string{"bizType"}},
		{"bad amount", map[string][]string{"bizType": {"A"}, "channel": {"B"}, "amount": {"0"}}, []string{"amount"}},
		{"unknown", map[string][]string{"bizType": {"A"}, "channel": {"B"}, "x": {"1"}}, []string{"x"}},
		{"bad merchantId", map[string][]string{"bizType": {"A"}, "channel": {"B"}, "merchantId": {"\x01"}}, []string{"merchantId"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for n := range tc.query {
				names = append(names, n)
			}
			r, err := ParsePeek(func(n string) []string { return tc.query[n] }, names)
			if tc.want == nil {
				if err != nil || r.Key.String() != "A:B" || r.Amount != 10 || r.MerchantID != "M1" {
					t.Fatalf("got %+v, %v", r, err)
				}
				return
			}
			got := fieldsOf(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("fields %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBodyProblemsNameNoGoTypes: a body that is not an object is told so in
// POST /pay's words, never with the decoder's Go type names.
func TestBodyProblemsNameNoGoTypes(t *testing.T) {
	for _, body := range []string{`[]`, `"x"`, `1`, `{"a":`} {
		_, err := DecodeAcquire([]byte(body))
		var e *apperr.Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v, want INVALID_REQUEST", body, err)
		}
		for _, f := range e.Details["fields"].([]apperr.FieldError) {
			if strings.Contains(f.Reason, "Go value") || strings.Contains(f.Reason, "map[") || strings.Contains(f.Reason, "json:") {
				t.Errorf("%s: reason %q names Go's types", body, f.Reason)
			}
		}
	}
}

// TestAmountRefusalSaysTheRange: an acquire body's and a peek query's bad
// amount, past int64 or not a whole number, is told the range, as POST
// /pay's is.
func TestAmountRefusalSaysTheRange(t *testing.T) {
	want := fmt.Sprintf("1..%d", int64(pay.MaxAmount))
	reason := func(err error) string {
		var e *apperr.Error
		if errors.As(err, &e) {
			for _, f := range e.Details["fields"].([]apperr.FieldError) {
				if f.Field == "amount" {
					return f.Reason
				}
			}
		}
		return ""
	}
	for _, amount := range []string{"99999999999999999999999", "-99999999999999999999999", "1000000000001", "0", "10.5"} {
		t.Run(amount, func(t *testing.T) {
			_, err := DecodeAcquire([]byte(`{"bizType":"A","channel":"B","requestId":"x","amount":` + amount + `,"currency":"CNY"}`))
			if got := reason(err); !strings.Contains(got, want) {
				t.Errorf("acquire: reason %q, want it to say %s", got, want)
			}
			q := map[string][]string{"bizType": {"A"}, "channel": {"B"}, "amount": {amount}, "currency": {"CNY"}}
			_, err = ParsePeek(func(n string) []string { return q[n] }, []string{"bizType", "channel", "amount", "currency"})
			if got := reason(err); !strings.Contains(got, want) {
				t.Errorf("peek: reason %q, want it to say %s", got, want)
			}
		})
	}
}
