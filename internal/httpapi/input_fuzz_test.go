package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzContentType: a Content-Type is let through to a state-changing route
// only if it parses as application/json with no parameter but
// charset=utf-8; every refusal gives a reason.
func FuzzContentType(f *testing.F) {
	for _, s := range []string{
		"application/json", "application/json; charset=utf-8", "APPLICATION/JSON;CHARSET=\"UTF-8\"",
		"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/json; charset=latin1", "application/json;",
		"application/json; charset=utf-8; charset=utf-8", "application/json, text/plain", "application/jsonx",
		"application/merge-patch+json", " application/json ", "application/json\x00", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		reason := jsonMediaTypeProblem(header)
		mediaType, params, err := mime.ParseMediaType(header)
		if reason != "" {
			return
		}
		if err != nil || mediaType != "application/json" {
			t.Fatalf("accepted %q: %q %v", header, mediaType, err)
		}
		for name, value := range params {
			if name != "charset" || !strings.EqualFold(value, "utf-8") {
				t.Fatalf("accepted %q with parameter %s=%s", header, name, value)
			}
		}
	})
}

// FuzzPreHandlerRewrite: whatever net/http (or anything) writes, the
// connection rewriter never panics; what it rewrites is one HTTP answer
// with the same status and the JSON error body, and it leaves alone every
// answer that has a Date header (everything written through a
// ResponseWriter).
func FuzzPreHandlerRewrite(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 431 Request Header Fields Too Large" + preHandlerErrorHeaders + "431 Request Header Fields Too Large",
		"HTTP/1.1 400 Bad Request: missing required Host header" + preHandlerErrorHeaders + "400 Bad Request: missing required Host header",
		"HTTP/1.1 501 Not Implemented" + preHandlerErrorHeaders + "Unsupported transfer encoding",
		"HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + preHandlerErrorHeaders + "505 HTTP Version Not Supported: unsupported protocol version",
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 418 Teapot" + preHandlerErrorHeaders + "x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		out, ok := jsonPreHandlerError(p)
		if !ok {
			return
		}
		if bytes.Contains(p, []byte("\r\nDate: ")) && bytes.Index(p, []byte("\r\nDate: ")) < bytes.Index(p, []byte("\r\n\r\n")) {
			t.Fatalf("rewrote an answer with a Date header: %q", p)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("rewrote %q into an unreadable answer %q: %v", p, out, err)
		}
		body, _ := io.ReadAll(resp.Body)
		var e errorBody
		if err := json.Unmarshal(body, &e); err != nil || e.Code == "" || e.Details == nil {
			t.Fatalf("rewrote %q into a body that is not the JSON error: %q", p, body)
		}
		if got, want := strconv.Itoa(resp.StatusCode), string(p[len("HTTP/1.1 "):len("HTTP/1.1 ")+3]); got != want {
			t.Fatalf("status changed: %q -> %s", p, got)
		}
	})
}
