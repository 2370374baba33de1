package pay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"payserver/internal/apperr"
	"payserver/internal/testutil"
)

// FuzzDecodePayRequest: any body either decodes to a request that passes
// every contract rule, or is refused with INVALID_REQUEST naming at least
// one field and why, in plain words. It never panics. An accepted body also
// has no key repeated in any object (checked with encoding/json's token
// reader, not with the decoder's own scanner), is valid UTF-8, and decoded
// to no U+FFFD that the body did not spell out: so no duplicate key, invalid
// byte or lone surrogate escape ever gets through.
func FuzzDecodePayRequest(f *testing.F) {
	for _, s := range []string{
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`,
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1e3,"currency":"CNY","subject":"x"}`,
		`{"amount":-1}`, `[]`, `null`, `{"requestId":null}`, `{"a":1}{"b":2}`, "\xff",
		// Duplicate keys, at the top, through escapes, nested.
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","amount":2}`,
		`{"requestId":"r1","requestId":"r2","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`,
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","\u0063urrency":"USD"}`,
		`{"x":{"a":1,"a":2},"y":[{"b":1,"b":1}]}`,
		// Invalid UTF-8 and surrogates.
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M\xff","amount":1,"currency":"CNY"}`,
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","subject":"\ud800"}`,
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","subject":"\ud83d\ude00\udc00"}`,
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"\xed\xa0\x80","amount":1,"currency":"CNY"}`,
		`{"k\xc0\xaf":1}`,
		// Currencies that are not active tender.
		`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"XTS"}`,
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
			if len(fields) == 0 || len(fields) > apperr.MaxListedFields || fields[0].Field == "" || fields[0].Reason == "" {
				t.Fatalf("refusal names no field, or too many: %+v", e.Details)
			}
			for _, fe := range fields {
				if strings.Contains(fe.Reason, "Go value") || strings.Contains(fe.Reason, "json:") {
					t.Fatalf("reason shows Go internals: %q", fe.Reason)
				}
			}
			return
		}
		if p := req.problems(nil); len(p) > 0 {
			t.Fatalf("accepted a request with problems %v", p)
		}
		if !ValidRequestID(req.RequestID) || req.Amount < 1 || req.Amount > MaxAmount {
			t.Fatalf("accepted %+v", req)
		}
		if _, ok := CurrencyExponent(req.Currency); !ok {
			t.Fatalf("accepted currency %q", req.Currency)
		}
		if !utf8.Valid(body) {
			t.Fatalf("accepted a body that is not valid UTF-8: %q", body)
		}
		if key, ok := repeatedKey(body); ok {
			t.Fatalf("accepted a body that repeats key %q: %q", key, body)
		}
		// A U+FFFD the body spells out (raw, or as an escape in any case)
		// may be decoded; any other one came from a bad byte or escape.
		spelled := bytes.ContainsRune(body, utf8.RuneError) || bytes.Contains(bytes.ToLower(body), []byte("\\ufffd"))
		for _, s := range []string{req.RequestID, req.BizType, req.Channel, req.MerchantID, req.Currency, req.Subject} {
			if !spelled && strings.ContainsRune(s, utf8.RuneError) {
				t.Fatalf("accepted %q, which decoded to U+FFFD (a lone surrogate or invalid byte): %+v", body, req)
			}
		}
	})
}

// repeatedKey walks body with encoding/json's token reader and returns the
// first key that appears twice in one object.
func repeatedKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key := tok.(string)
			if top.keys[key] {
				return key, true
			}
			top.keys[key] = true
			top.expectKey = false
			continue
		}
		if top != nil && top.object {
			top.expectKey = true // this token starts the member's value
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]bool{}})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
		}
	}
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

// TestHashIsStable: the payload hash of a request is the one stored with
// its order by earlier versions (SHA-256 of "%d:%s;" per field, in hex),
// so that a retry of an order stored before an upgrade still matches it.
func TestHashIsStable(t *testing.T) {
	tests := []struct {
		name string
		req  PayRequest
		want string
	}{
		{"pinned, unicode", PayRequest{RequestID: "r1", BizType: "ONLINE_PAY", Channel: "ALIPAY", MerchantID: "商户-42", Amount: 1999, Currency: "CNY", Subject: "订单 😀"},
			"5c3147d379a13e6baeacc0812d861f40d88dd81f11efbc64f7340d056e5cd0c1"},
		{"routed, negative amount", PayRequest{BizType: "B", MerchantID: "M", Amount: -5, Currency: "CNY"},
			"5abce97da66ef34e901e5aa1ab9efb829e171941a62b6031014d36bbb0d02479"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.req.Hash(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// hashWithFmt is PayRequest.Hash as it was written before the third pass,
// with fmt: the oracle of FuzzHashIsStable and the baseline of
// BenchmarkPayRequestHashRatio.
func hashWithFmt(r PayRequest) string {
	h := sha256.New()
	for _, s := range []string{r.BizType, r.Channel, r.MerchantID, strconv.FormatInt(r.Amount, 10), r.Currency, r.Subject} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FuzzHashIsStable: for any payload, Hash is what the fmt version gave, so
// orders stored before it still match their retries.
func FuzzHashIsStable(f *testing.F) {
	f.Add("ONLINE_PAY", "ALIPAY", "商户-42", int64(1999), "CNY", "订单 😀")
	f.Add("", "", "", int64(-1), "", strings.Repeat("x", 300))
	f.Fuzz(func(t *testing.T, biz, ch, merchant string, amount int64, currency, subject string) {
		r := PayRequest{BizType: biz, Channel: ch, MerchantID: merchant, Amount: amount, Currency: currency, Subject: subject}
		if got, want := r.Hash(), hashWithFmt(r); got != want {
			t.Fatalf("Hash(%+v) = %s, want %s", r, got, want)
		}
	})
}

// BenchmarkPayRequestHashRatio interleaves the fmt version of the hash and
// Hash on a typical payload and prints both and their ratio.
func BenchmarkPayRequestHashRatio(b *testing.B) {
	r := PayRequest{RequestID: "ORD-20261121-000123", BizType: "ONLINE_PAY", Channel: "ALIPAY", MerchantID: "M100042", Amount: 1999, Currency: "CNY", Subject: "Order 123"}
	testutil.BenchRatio(b, "old", func() { _ = hashWithFmt(r) }, "new", func() { _ = r.Hash() })
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
