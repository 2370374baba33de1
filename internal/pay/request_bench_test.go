package pay

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"testing"
	"unicode/utf8"

	"payserver/internal/apperr"
	"payserver/internal/testutil"
)

// decodeBeforeStrict is DecodePayRequest as it was before the strict checks
// (duplicate keys, UTF-8, surrogates, the ISO 4217 list), kept only as the
// baseline of BenchmarkDecodePayRequest: the decoding half, without the
// value checks that both versions share.
func decodeBeforeStrict(data []byte) (PayRequest, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return PayRequest{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: "malformed"})
	}
	if dec.More() {
		return PayRequest{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: "must hold exactly one JSON object"})
	}
	var bad []apperr.FieldError
	unknown := make([]string, 0)
	for name := range raw {
		if !payFields[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		if name == "" || len(name) > 64 || !utf8.ValidString(name) {
			bad = append(bad, apperr.FieldError{Field: "body", Reason: "bad name"})
			continue
		}
		bad = append(bad, apperr.FieldError{Field: name, Reason: "unknown field"})
	}
	var r PayRequest
	str := func(name string, dst *string) {
		if v, ok := raw[name]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, dst); err != nil {
				bad = append(bad, apperr.FieldError{Field: name, Reason: "must be a string"})
			}
		}
	}
	str("requestId", &r.RequestID)
	str("bizType", &r.BizType)
	str("channel", &r.Channel)
	str("merchantId", &r.MerchantID)
	str("currency", &r.Currency)
	str("subject", &r.Subject)
	if n, err := strconv.ParseInt(string(bytes.TrimSpace(raw["amount"])), 10, 64); err == nil {
		r.Amount = n
	}
	// The value checks of the time, for a like-for-like comparison.
	if len(r.Currency) != 3 {
		bad = append(bad, apperr.FieldError{Field: "currency", Reason: "bad"})
	}
	bad = append(bad, r.problems(bad)...)
	if len(bad) > 0 {
		return PayRequest{}, apperr.Invalid(bad...)
	}
	return r, nil
}

// BenchmarkDecodePayRequest compares, in one run, the POST /pay decode
// before and after the strict checks, on a typical valid body (the hot
// path) and on a body with a non-ASCII subject. Compare ns/op of the
// before/ and strict/ lines of the same body. One goroutine; run it with
// -count and -cpu 1 on an otherwise quiet machine.
func BenchmarkDecodePayRequest(b *testing.B) {
	bodies := map[string][]byte{
		"typical": []byte(`{"requestId":"ORD-20261121-000123","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M100042","amount":1999,"currency":"CNY","subject":"Order 123"}`),
		"unicode": []byte(`{"requestId":"ORD-20261121-000124","bizType":"ONLINE_PAY","channel":"WECHAT","merchantId":"商户-42","amount":1999,"currency":"CNY","subject":"订单 123 \u00e9 \ud83d\ude00 😀"}`),
	}
	for _, name := range []string{"typical", "unicode"} {
		body := bodies[name]
		if _, err := decodeBeforeStrict(body); err != nil {
			b.Fatal(err)
		}
		if _, err := DecodePayRequest(body); err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/before", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = decodeBeforeStrict(body)
			}
		})
		b.Run(name+"/strict", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = DecodePayRequest(body)
			}
		})
	}
}

// BenchmarkDecodePayRequestRatio interleaves the two decodes in rounds of
// 1,000 calls each, so that both see the same machine load, and reports
// strict-ns/op, before-ns/op and their ratio (strict/before) for the
// typical body. This is the figure to quote on a shared machine.
func BenchmarkDecodePayRequestRatio(b *testing.B) {
	body := []byte(`{"requestId":"ORD-20261121-000123","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M100042","amount":1999,"currency":"CNY","subject":"Order 123"}`)
	testutil.BenchRatio(b, "before", func() { _, _ = decodeBeforeStrict(body) }, "strict", func() { _, _ = DecodePayRequest(body) })
}
