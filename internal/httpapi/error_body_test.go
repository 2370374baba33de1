package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// limitedBody is the body of a typical 429 on POST /pay.
func limitedBody() errorBody {
	e := pay.LimitedError(ratelimit.Key{BizType: "FULL", Channel: "ALIPAY"},
		ratelimit.Decision{Count: 1, Limit: 1, Window: time.Hour, RetryAfter: 1500 * time.Millisecond})
	return errorBody{Code: e.Code, Message: e.Message, RequestID: "r1763935000-full-c64-1-12345", Details: e.Details}
}

// TestErrorBodyMatchesEncodingJSON: the error body's own encoder writes
// exactly the bytes json.Marshal writes, for every kind of detail and for
// text encoding/json escapes (quotes, control characters, HTML, invalid
// UTF-8, U+2028).
func TestErrorBodyMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		body errorBody
	}{
		{"429", limitedBody()},
		{"400 with fields", errorBody{Code: apperr.InvalidRequest, Message: "request has 2 invalid fields",
			Details: apperr.Invalid(apperr.FieldError{Field: "amount", Reason: "is required"}, apperr.FieldError{Field: "x<y>", Reason: "unknown field"}).Details}},
		{"no details", errorBody{Code: apperr.NotFound, Message: "no route", Details: map[string]any{}}},
		{"nil details", errorBody{Code: apperr.Internal, Message: "internal error"}},
		{"escaped text", errorBody{Code: apperr.ChannelError, Message: "a \"quote\", a \\ and a\ttab\n", RequestID: "r&1",
			Details: map[string]any{"channelMessage": "<b>\u2028\u2029\x00\x7f\xff é 😀", "é": "key", "": "empty key"}}},
		{"numbers and booleans", errorBody{Code: apperr.RequestLimited, Message: "m",
			Details: map[string]any{"int": 7, "int64": int64(-9_000_000_000), "yes": true, "no": false, "float": 1.5, "nil": nil, "list": []string{"a"}}}},
		{"routed 429", errorBody{Code: apperr.RequestLimited, Message: "m",
			Details: map[string]any{"bizType": "B", "candidates": []map[string]any{{"channel": "ALIPAY", "retryAfterMs": int64(3)}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := json.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.body.appendJSON(nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("got %s (%v)\nwant %s", got, err, want)
			}
		})
	}
	if _, err := (errorBody{Details: map[string]any{"bad": func() {}}}).appendJSON(nil); err == nil {
		t.Error("a detail that cannot be encoded: got no error, want one")
	}
}

// FuzzErrorBodyText: any text in any string of an error body encodes as
// json.Marshal encodes it.
func FuzzErrorBodyText(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\"\\", "\x00\x1f\x7f", "\xff\xfe", "\u2028", "é😀"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, text, key string) {
		body := errorBody{Code: apperr.RequestLimited, Message: text, RequestID: text, Details: map[string]any{key: text, "n": int64(len(text))}}
		want, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := body.appendJSON(nil); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("got %s (%v)\nwant %s", got, err, want)
		}
	})
}

// BenchmarkErrorBodyRatio interleaves json.Marshal (gin's encoder, what
// writeError used before) and the error body's own encoder on a typical
// 429 body, in rounds of 1,000 each, and reports both ns/op and their
// ratio (new/old), measured under the same load.
func BenchmarkErrorBodyRatio(b *testing.B) {
	body := limitedBody()
	testutil.BenchRatio(b, "old", func() { _, _ = json.Marshal(body) }, "new", func() { _, _ = body.appendJSON(make([]byte, 0, 512)) })
}

// TestWriteErrorWithAnUnencodableDetail: an error whose details cannot be
// encoded still gets a JSON body: 500 INTERNAL, without the Retry-After of
// the error it replaces. (gin's encoder, the old fallback, sent the status
// with an empty body.)
func TestWriteErrorWithAnUnencodableDetail(t *testing.T) {
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodPost, "/pay", nil)
	err := apperr.New(apperr.RequestLimited, "limited").WithDetails(map[string]any{"bad": make(chan int)})
	err.RetryAfter = time.Second
	WriteError(c, slog.New(slog.DiscardHandler), err, "r1")
	var got struct{ Code, RequestID string }
	if jerr := json.Unmarshal(rec.Body.Bytes(), &got); jerr != nil {
		t.Fatalf("body %q is not JSON: %v", rec.Body.String(), jerr)
	}
	if rec.Code != http.StatusInternalServerError || got.Code != string(apperr.Internal) || got.RequestID != "r1" {
		t.Fatalf("got %d %+v, want 500 INTERNAL for r1", rec.Code, got)
	}
	if h := rec.Header().Get("Retry-After"); h != "" {
		t.Fatalf("Retry-After %q on the INTERNAL answer, want none", h)
	}
}
