package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

func newTestHandler(t *testing.T) http.Handler {
	t.Helper()
	gin.SetMode(gin.TestMode)
	h, err := New(Options{Pay: noPay{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// wantJSONError checks that an answer is the JSON error body with code.
func wantJSONError(t *testing.T, what string, status int, header http.Header, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s: status %d, want %d: %.300s", what, status, wantStatus, body)
	}
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, want application/json: %.300s", what, ct, body)
	}
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Code == "" || e.Message == "" || e.Details == nil {
		t.Fatalf("%s: body %.300q is not the JSON error body (%v)", what, body, err)
	}
	if string(e.Code) != wantCode {
		t.Fatalf("%s: code %s, want %s: %s", what, e.Code, wantCode, body)
	}
}

// TestStateChangingRoutesRequireJSON: POST /pay with any body type but
// application/json (charset utf-8 at most) is 415, so that no browser can
// send a payment as a "simple" cross-site request. Before, text/plain was
// decoded and paid.
func TestStateChangingRoutesRequireJSON(t *testing.T) {
	h := newTestHandler(t)
	body := `{"requestId":"r1"}` // invalid: a 400 proves the type was let through
	tests := []struct {
		contentType string
		wantStatus  int
	}{
		{"", 415},
		{"text/plain", 415},
		{"text/plain;charset=UTF-8", 415},
		{"application/x-www-form-urlencoded", 415},
		{"multipart/form-data; boundary=x", 415},
		{"application/json; charset=latin1", 415},
		{"application/json; boundary=x", 415},
		{"application/json-seq", 415},
		{"application/merge-patch+json", 415},
		{"application/json;", 415},
		{"application/json", 400},
		{"application/json; charset=utf-8", 400},
		{"Application/JSON; Charset=\"UTF-8\"", 400},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			code := "INVALID_REQUEST"
			if tt.wantStatus == 415 {
				code = "UNSUPPORTED_MEDIA_TYPE"
			}
			wantJSONError(t, tt.contentType, rec.Code, rec.Header(), rec.Body.Bytes(), tt.wantStatus, code)
		})
	}
	t.Run("unknown routes stay 404", func(t *testing.T) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/nope", strings.NewReader("x")))
		wantJSONError(t, "POST /nope", rec.Code, rec.Header(), rec.Body.Bytes(), 404, "NOT_FOUND")
	})
}

// rawExchange sends raw bytes on a new TCP connection and reads one answer.
func rawExchange(t *testing.T, addr string, request []byte) (int, http.Header, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Write in the background: the server may answer and close before it
	// has read everything.
	go func() { _, _ = conn.Write(request) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestOversizedAndMalformedRequestsGetJSON: over a real TCP connection, as
// payserver serves (ServerMaxHeaderBytes, JSONErrorListener), an over-long
// path, headers over MaxHeaderBytes, headers even over net/http's own limit
// and requests net/http refuses before any handler runs all get the JSON
// error body. Before, net/http answered 431 and 400 in text/plain.
func TestOversizedAndMalformedRequestsGetJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: newTestHandler(t), ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: ServerMaxHeaderBytes}
	go func() { _ = srv.Serve(JSONErrorListener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	get := func(path string, extra string) []byte {
		return []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, extra))
	}
	tests := []struct {
		name       string
		request    []byte
		wantStatus int
		wantCode   string
	}{
		{"100 KB path", get("/pay/"+strings.Repeat("a", 100<<10), ""), 414, "URI_TOO_LONG"},
		{"100 KB query", get("/healthz?q="+strings.Repeat("a", 100<<10), ""), 414, "URI_TOO_LONG"},
		{"20 KiB header", get("/healthz", "X-Big: "+strings.Repeat("b", 20<<10)+"\r\n"), 431, "HEADERS_TOO_LARGE"},
		{"many headers", get("/healthz", strings.Repeat("X-H: "+strings.Repeat("c", 100)+"\r\n", 200)), 431, "HEADERS_TOO_LARGE"},
		{"1 MiB header, over net/http's limit", get("/healthz", "X-Big: "+strings.Repeat("b", 1<<20)+"\r\n"), 431, "HEADERS_TOO_LARGE"},
		{"1 MiB path, over net/http's limit", get("/"+strings.Repeat("p", 1<<20), ""), 431, "HEADERS_TOO_LARGE"},
		{"garbage request line", []byte("HELLO\r\n\r\n"), 400, "INVALID_REQUEST"},
		{"no Host", []byte("GET /healthz HTTP/1.1\r\n\r\n"), 400, "INVALID_REQUEST"},
		{"bad header name", get("/healthz", "Bad Name: x\r\n"), 400, "INVALID_REQUEST"},
		{"unknown transfer coding", []byte("POST /pay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n"), 501, "NOT_IMPLEMENTED"},
		{"HTTP/2.0 over HTTP/1", []byte("GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n"), 505, "HTTP_VERSION_NOT_SUPPORTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := rawExchange(t, addr, tt.request)
			wantJSONError(t, tt.name, status, header, body, tt.wantStatus, tt.wantCode)
		})
	}
	t.Run("a normal request on the same server", func(t *testing.T) {
		status, header, body := rawExchange(t, addr, get("/healthz", "X-Ok: "+strings.Repeat("o", 8<<10)+"\r\n"))
		if status != 200 || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
			t.Fatalf("GET /healthz: %d %s %s", status, header.Get("Content-Type"), body)
		}
	})
}

// TestManyBadFieldsSmallAnswer: 6,000 unknown fields in a 59 KB body
// answer a few KB, not 257 KB: 20 listed, the rest counted.
func TestManyBadFieldsSmallAnswer(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"requestId":"r1"`)
	for i := range 6000 {
		fmt.Fprintf(&b, `,"f%d":1`, i)
	}
	b.WriteString(`}`)
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(b.String()))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	newTestHandler(t).ServeHTTP(rec, req)
	wantJSONError(t, "6,000 unknown fields", rec.Code, rec.Header(), rec.Body.Bytes(), 400, "INVALID_REQUEST")
	if n := rec.Body.Len(); n > 4<<10 {
		t.Fatalf("a %d-byte body got a %d-byte answer", b.Len(), n)
	}
	var e struct {
		Details struct {
			Fields   []map[string]string `json:"fields"`
			Unlisted int                 `json:"unlistedFields"`
		} `json:"details"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || len(e.Details.Fields) != 20 || e.Details.Unlisted != 6000+4-20 { // 4 required fields missing: bizType, merchantId, amount, currency
		t.Fatalf("fields %d, unlisted %d (%v); want 20 and %d", len(e.Details.Fields), e.Details.Unlisted, err, 6000+4-20)
	}
}
