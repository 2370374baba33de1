package pay

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"payserver/internal/testutil"
)

// plainSeeds are bodies on both sides of the plain decode's edge.
var plainSeeds = []string{
	`{"requestId":"ORD-20261121-000123","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M100042","amount":1999,"currency":"CNY","subject":"Order 123"}`,
	" {\n\t\"requestId\" : \"r1\" , \"bizType\":\"ONLINE_PAY\",\"merchantId\":\"M\",\"amount\":1,\"currency\":\"CNY\"}\r\n",
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"","merchantId":"商户-42","amount":1,"currency":"CNY","subject":"订单 😀","maxWaitMs":250}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","maxWaitMs":30000}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","maxWaitMs":30001}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","maxWaitMs":-0}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1.0,"currency":"CNY"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1e3,"currency":"CNY"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":0100,"currency":"CNY"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":99999999999999999999,"currency":"CNY"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":"1","currency":"CNY"}`,
	`{"requestId":"r\u0031","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`,
	`{"request\u0049d":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`,
	`{"RequestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","amount":1}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":null,"merchantId":"M","amount":1,"currency":"CNY"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY",}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}x`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY"}{}`,
	"{\"requestId\":\"r1\",\"bizType\":\"ONLINE_PAY\",\"channel\":\"ALIPAY\",\"merchantId\":\"M\xff\",\"amount\":1,\"currency\":\"CNY\"}",
	"{\"requestId\":\"r1\",\"bizType\":\"ONLINE_PAY\",\"channel\":\"ALIPAY\",\"merchantId\":\"M\x7f\",\"amount\":1,\"currency\":\"CNY\"}",
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"XTS"}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","extra":1}`,
	`{"requestId":"r1","bizType":"ONLINE_PAY","merchantId":"M","currency":"CNY"}`,
	`{}`, `[]`, `null`, ``, `{"requestId":`, "\xef\xbb\xbf{}",
}

// FuzzPlainDecodeAgrees: whatever the one-pass decode accepts, the
// field-by-field decode accepts as the same request; and DecodePayRequest
// answers exactly as the field-by-field decode does, refusals included, so
// the fast path changes no answer.
func FuzzPlainDecodeAgrees(f *testing.F) {
	for _, s := range plainSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkPlainAgrees(t, body)
	})
}

func checkPlainAgrees(t *testing.T, body []byte) {
	t.Helper()
	want, wantErr := decodePayRequestFields(body)
	if plain, ok := decodePlainPayRequest(body); ok {
		if wantErr != nil {
			t.Fatalf("plain decode accepted %q, the field-by-field decode refuses it: %v", body, wantErr)
		}
		if plain != want {
			t.Fatalf("plain decode of %q: got %+v, want %+v", body, plain, want)
		}
	}
	got, gotErr := DecodePayRequest(body)
	if got != want || !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("DecodePayRequest(%q): got %+v, %v; want %+v, %v", body, got, gotErr, want, wantErr)
	}
}

// TestPlainDecode: an ordinary body takes the one-pass decode (else the
// benchmark below measures nothing), anything unusual leaves it, and both
// answer alike on every seed.
func TestPlainDecode(t *testing.T) {
	tests := []struct {
		name, body string
		plain      bool
	}{
		{"typical", plainSeeds[0], true},
		{"white space, no channel", plainSeeds[1], true},
		{"unicode, empty channel, maxWaitMs", plainSeeds[2], true},
		{"maxWaitMs at its cap", plainSeeds[3], true},
		{"maxWaitMs over its cap", plainSeeds[4], false},
		{"fraction", plainSeeds[6], false},
		{"exponent", plainSeeds[7], false},
		{"escape in a value", plainSeeds[11], false},
		{"escape in a key", plainSeeds[12], false},
		{"key in another case", plainSeeds[13], false},
		{"duplicate key", plainSeeds[14], false},
		{"null", plainSeeds[15], false},
		{"trailing data", plainSeeds[17], false},
		{"invalid UTF-8", plainSeeds[19], false},
		{"control character", plainSeeds[20], false},
		{"unknown field", plainSeeds[22], false},
		{"padded past maxPlainBody", strings.Replace(plainSeeds[0], ",", ","+strings.Repeat(" ", maxPlainBody), 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := decodePlainPayRequest([]byte(tt.body)); got != tt.plain {
				t.Errorf("plain decode of %s: got ok %v, want %v", tt.body, got, tt.plain)
			}
		})
	}
	for _, s := range plainSeeds {
		checkPlainAgrees(t, []byte(s))
	}
	r, ok := decodePlainPayRequest([]byte(plainSeeds[2]))
	want := PayRequest{RequestID: "r1", BizType: "ONLINE_PAY", MerchantID: "商户-42", Amount: 1, Currency: "CNY", Subject: "订单 😀", MaxWait: 250 * time.Millisecond}
	if !ok || r != want {
		t.Errorf("plain decode: got %+v, %v; want %+v", r, ok, want)
	}
}

// requestId, bizType and channel outlive the request (limiter members,
// metric labels, limiter maps), so the one-pass decode must not hand them
// out as substrings of the body copy that the other fields share: each would
// keep a whole body alive.
func TestPlainDecodeLongLivedFieldsOwnTheirBytes(t *testing.T) {
	pad := strings.Repeat("x", 100)
	for _, tc := range []struct{ body, channel string }{
		{`{"requestId":"r1","bizType":"ONLINE_PAY","channel":"ALIPAY","merchantId":"M","amount":1,"currency":"CNY","subject":"` + pad + `"}`, "ALIPAY"},
		{`{"requestId":"r1","bizType":"ONLINE_PAY","merchantId":"M","amount":1,"currency":"CNY","subject":"` + pad + `"}`, ""},
	} {
		r, ok := decodePlainPayRequest([]byte(tc.body))
		if !ok {
			t.Fatalf("not plain: %s", tc.body)
		}
		if r.RequestID != "r1" || r.BizType != "ONLINE_PAY" || r.Channel != tc.channel || r.MerchantID != "M" {
			t.Fatalf("got requestId %q bizType %q channel %q merchantId %q; want r1, ONLINE_PAY, %q, M",
				r.RequestID, r.BizType, r.Channel, r.MerchantID, tc.channel)
		}
		// The body copy, located from merchantId, which stays a substring.
		start := uintptr(unsafe.Pointer(unsafe.StringData(r.MerchantID))) -
			uintptr(strings.Index(tc.body, `"merchantId":"`)+len(`"merchantId":"`))
		inBody := func(v string) bool {
			p := uintptr(unsafe.Pointer(unsafe.StringData(v)))
			return v != "" && p >= start && p < start+uintptr(len(tc.body))
		}
		for name, v := range map[string]string{"requestId": r.RequestID, "bizType": r.BizType, "channel": r.Channel} {
			if inBody(v) {
				t.Errorf("%s %q points into the %d-byte body copy; want a copy of its own", name, v, len(tc.body))
			}
		}
	}
}

// BenchmarkDecodePayRequestPlainRatio interleaves DecodePayRequest (the
// one-pass decode first) and the field-by-field decode alone (what
// DecodePayRequest was before it), in rounds of 1,000 calls each on the
// typical body, and reports both ns/op and their ratio (new/old), so that
// both see the same machine load.
func BenchmarkDecodePayRequestPlainRatio(b *testing.B) {
	body := []byte(plainSeeds[0])
	if _, ok := decodePlainPayRequest(body); !ok {
		b.Fatal("the typical body does not take the plain decode")
	}
	testutil.BenchRatio(b, "old", func() { _, _ = decodePayRequestFields(body) }, "new", func() { _, _ = DecodePayRequest(body) })
}
