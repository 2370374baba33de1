package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"payserver/internal/apperr"
)

// ServerMaxHeaderBytes is what the http.Server serving this handler must
// set as MaxHeaderBytes. It is well above MaxURIBytes and MaxHeaderBytes, so
// that requests over those limits reach the handler and get its JSON 414
// or 431; only requests over this one are refused by net/http itself, and
// JSONErrorListener turns that refusal into the JSON error body too.
const ServerMaxHeaderBytes = 256 << 10

// preHandlerErrorHeaders is how net/http ends the header of every answer
// it writes itself, before any handler runs (net/http's conn.serve: 431 for
// oversized headers, 400 for malformed requests, 501 for an unknown
// transfer coding, 505 for an unsupported HTTP version). Answers written
// through a ResponseWriter always carry Date and a length, so never end a
// one-line header with exactly this.
const preHandlerErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// preHandlerCodes gives the error code of each status net/http answers on
// its own.
var preHandlerCodes = map[int]apperr.Code{
	http.StatusBadRequest:                  apperr.InvalidRequest,
	http.StatusRequestURITooLong:           apperr.URITooLong,
	http.StatusRequestHeaderFieldsTooLarge: apperr.HeadersTooLarge,
	http.StatusNotImplemented:              apperr.NotImplemented,
	http.StatusHTTPVersionNotSupported:     apperr.HTTPVersionNotSupported,
}

// JSONErrorListener wraps a plain TCP listener so that the answers net/http
// writes by itself, in text/plain, before any handler runs (headers over
// the server's MaxHeaderBytes, a malformed request line or header, an
// unknown transfer coding, an unsupported HTTP version) go out as the JSON
// error body, with the same status. Every other byte passes unchanged.
// It rewrites the bytes net/http writes, so it must wrap the listener the
// server reads plaintext from (payserver serves plain HTTP/1.1; a server
// with TLS would wrap its tls.Listener, not the TCP one beneath it).
func JSONErrorListener(ln net.Listener) net.Listener { return jsonErrorListener{ln} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

// CloseWrite half-closes the connection as net/http does after a 431, so
// that the client reads the answer before the connection goes away
// (without it the unread request is reset with the answer).
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if answer, ok := jsonPreHandlerError(p); ok {
		if _, err := c.Conn.Write(answer); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// jsonPreHandlerError returns the JSON version of p when p is one of
// net/http's own text/plain answers: "HTTP/1.1 <status> <text>" followed
// by preHandlerErrorHeaders and a text body.
func jsonPreHandlerError(p []byte) ([]byte, bool) {
	const prefix = "HTTP/1.1 "
	if len(p) < len(prefix)+3 || string(p[:len(prefix)]) != prefix {
		return nil, false
	}
	eol := bytes.IndexByte(p, '\r')
	if eol < 0 || !bytes.HasPrefix(p[eol:], []byte(preHandlerErrorHeaders)) {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[len(prefix) : len(prefix)+3]))
	code, known := preHandlerCodes[status]
	if err != nil || !known {
		return nil, false
	}
	// net/http's body: "400 Bad Request: missing required Host header",
	// "431 Request Header Fields Too Large", "Unsupported transfer encoding".
	text := string(p[eol+len(preHandlerErrorHeaders):])
	_, why, found := strings.Cut(text, ": ")
	if !found {
		why = strings.TrimPrefix(text, strconv.Itoa(status)+" ")
	}
	e := preHandlerError(status, code, why)
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	body, err := json.Marshal(errorBody{Code: e.Code, Message: e.Message, RequestID: "", Details: e.Details})
	if err != nil {
		return nil, false
	}
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body), true
}

// preHandlerError is the error answered for net/http's own refusal.
func preHandlerError(status int, code apperr.Code, why string) *apperr.Error {
	switch status {
	case http.StatusBadRequest:
		return apperr.Invalid(apperr.FieldError{Field: "request", Reason: "is not a valid HTTP/1.1 request: " + why})
	case http.StatusRequestHeaderFieldsTooLarge:
		return headersTooLarge(ServerMaxHeaderBytes)
	case http.StatusNotImplemented:
		return apperr.New(code, "the request uses a transfer coding other than chunked")
	default:
		return apperr.New(code, "%s", why)
	}
}
