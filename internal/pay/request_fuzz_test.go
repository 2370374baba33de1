package pay

import (
	"errors"
	"testing"

	"payserver/internal/apperr"
)

// FuzzDecodePayRequest: any body either decodes to a request that passes
// every contract rule, or is refused with INVALID_REQUEST naming at least
// one field and why. It never panics.
func FuzzDecodePayRequest(f *testing.F) {
	for _, s := range []string{
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`,
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1e3,"currency":"CNY","subject":"x"}`,
		`{"amount":-1}`, `[]`, `null`, `{"requestId":null}`, `{"a":1}{"b":2}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodePayRequest(body)
		if err != nil {
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != apperr.InvalidRequest {
				t.Fatalf("error %v is not INVALID_REQUEST", err)
			}
			fields, _ := e.Details["fields"].([]apperr.FieldError)
			if len(fields) == 0 || fields[0].Field == "" || fields[0].Reason == "" {
				t.Fatalf("refusal names no field: %+v", e.Details)
			}
			return
		}
		if p := req.problems(nil); len(p) > 0 {
			t.Fatalf("accepted a request with problems %v", p)
		}
		if !ValidRequestID(req.RequestID) || req.Amount < 1 || req.Amount > MaxAmount {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func TestDecodePayRequest(t *testing.T) {
	tests := []struct {
		name, body string
		wantFields []string
	}{
		{"valid", `{"requestId":"a.b_c:d-1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"商户","amount":1000000000000,"currency":"USD","subject":"s"}`, nil},
		{"null subject is absent", `{"requestId":"r","bizType":"B","channel":"C","merchantId":"M","amount":1,"currency":"CNY","subject":null}`, nil},
		{"every field wrong", `{"requestId":"","bizType":"b","channel":"c c","merchantId":"","amount":0,"currency":"cn"}`,
			[]string{"requestId", "bizType", "channel", "merchantId", "amount", "currency"}},
		{"types wrong", `{"requestId":1,"bizType":true,"channel":[],"merchantId":{},"amount":"1","currency":3}`,
			[]string{"requestId", "bizType", "channel", "merchantId", "amount", "currency"}},
		{"trailing data", `{"requestId":"r"} x`, []string{"body"}},
		{"control char in merchant", `{"requestId":"r","bizType":"B","channel":"C","merchantId":"a\u0000b","amount":1,"currency":"CNY"}`, []string{"merchantId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodePayRequest([]byte(tt.body))
			if tt.wantFields == nil {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var e *apperr.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want INVALID_REQUEST", err)
			}
			got := map[string]bool{}
			for _, f := range e.Details["fields"].([]apperr.FieldError) {
				got[f.Field] = true
			}
			for _, f := range tt.wantFields {
				if !got[f] {
					t.Errorf("field %s not reported; got %v", f, got)
				}
			}
		})
	}
}

func TestHashDistinguishesPayloads(t *testing.T) {
	a := PayRequest{BizType: "A", Channel: "B", MerchantID: "M1", Amount: 1, Currency: "CNY", Subject: "x"}
	b := a
	b.MerchantID, b.Subject = "M", "1x" // same concatenation without length prefixes
	if a.Hash() == b.Hash() {
		t.Fatal("different payloads hash the same")
	}
	c := a
	c.RequestID = "other"
	if a.Hash() != c.Hash() {
		t.Fatal("the requestId must not change the payload hash")
	}
}
