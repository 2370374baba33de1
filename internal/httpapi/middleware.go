package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/netaddr"
)

// nosniff tells browsers never to guess another content type than the
// answer's, on every answer.
func nosniff(c *gin.Context) {
	c.Header("X-Content-Type-Options", "nosniff")
	c.Next()
}

// recover turns a panic into an INTERNAL answer; it never crashes the server.
func (h *handler) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			WriteError(c, h.log, apperr.Wrap(fmt.Errorf("panic: %v", v), apperr.Internal, "internal error"), "")
		}
	}()
	c.Next()
}

// observe reports each answered request by route template, never raw path.
func (h *handler) observe(c *gin.Context) {
	if h.opts.Observe == nil {
		c.Next()
		return
	}
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	h.opts.Observe(route, c.Writer.Status(), c.Request.Method, time.Since(start).Seconds())
}

// limitBody caps every request body at MaxBodyBytes. An oversized body is
// answered with "Connection: close": otherwise net/http, before sending the
// answer, tries to read and discard up to 256 KiB of the unread body so
// that the connection can be reused, and the refusal waits for a client
// that never sends it (until ReadTimeout).
func (h *handler) limitBody(c *gin.Context) {
	if c.Request.ContentLength > MaxBodyBytes {
		c.Header("Connection", "close")
		WriteError(c, h.log, bodyTooLarge(), "")
		return
	}
	c.Request.Body = &cappedBody{ReadCloser: http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes), c: c}
	c.Next()
}

// bodyTooLarge is the answer to a body over MaxBodyBytes.
func bodyTooLarge() *apperr.Error {
	return apperr.New(apperr.BodyTooLarge, "the request body is over %d bytes", MaxBodyBytes).
		WithDetails(map[string]any{"limitBytes": MaxBodyBytes})
}

// limitHeader refuses a request target over MaxURIBytes (414) and header
// fields over MaxHeaderBytes (431), counted as on the wire: "Name: value"
// plus CRLF per field, Host included. The server's own MaxHeaderBytes
// (ServerMaxHeaderBytes) is higher, so that these refusals are answered
// here, as JSON, and the connection can be reused.
func (h *handler) limitHeader(c *gin.Context) {
	r := c.Request
	if n := len(r.RequestURI); n > MaxURIBytes {
		WriteError(c, h.log, apperr.New(apperr.URITooLong, "the request target is %d bytes; at most %d", n, MaxURIBytes).
			WithDetails(map[string]any{"limitBytes": MaxURIBytes}), "")
		return
	}
	size := len("Host: \r\n") + len(r.Host)
	for name, values := range r.Header {
		for _, v := range values {
			size += len(name) + len(": \r\n") + len(v)
		}
	}
	if size > MaxHeaderBytes {
		WriteError(c, h.log, headersTooLarge(MaxHeaderBytes), "")
		return
	}
	c.Next()
}

func headersTooLarge(limit int) *apperr.Error {
	return apperr.New(apperr.HeadersTooLarge, "the request's header fields are over %d bytes", limit).
		WithDetails(map[string]any{"limitBytes": limit})
}

// requireJSON refuses a state-changing request (POST, PUT, PATCH, DELETE) to
// an existing route unless its Content-Type is application/json, with at
// most a charset=utf-8 parameter: 415 UNSUPPORTED_MEDIA_TYPE. A browser
// can send text/plain, form and multipart bodies cross-site without a
// preflight ("simple" requests); application/json always needs one, so no
// web page can make a payment. Unknown routes stay 404. It runs in
// checkRequest: on every public route (checkPublic), and on the
// authenticated ones after their authentication. The admin login and
// logout forms and the what-if page's form (isFormRoute) take a form body
// instead, and refuse other sites' requests themselves.
func (h *handler) requireJSON(c *gin.Context) {
	switch c.Request.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return
	}
	if c.FullPath() == "" || h.isFormRoute(c.FullPath()) {
		return
	}
	if reason := jsonMediaTypeProblem(c.GetHeader("Content-Type")); reason != "" {
		WriteError(c, h.log, apperr.New(apperr.UnsupportedMediaType, "Content-Type %s; send application/json", reason).
			WithDetails(map[string]any{"accept": "application/json"}), "")
	}
}

// jsonMediaTypeProblem returns why a Content-Type header is not
// application/json (charset utf-8 at most), or "" when it is.
func jsonMediaTypeProblem(header string) string {
	switch header {
	case "application/json", "application/json; charset=utf-8":
		return "" // what clients send, without parsing
	case "":
		return "is missing"
	}
	mediaType, params, err := mime.ParseMediaType(header)
	switch {
	case err != nil:
		return "is malformed"
	case mediaType != "application/json":
		return "is not application/json"
	}
	for name, value := range params {
		if name != "charset" || !strings.EqualFold(value, "utf-8") {
			return "may have no parameter but charset=utf-8"
		}
	}
	if strings.HasSuffix(strings.TrimSpace(header), ";") {
		return "is malformed"
	}
	return ""
}

// cappedBody sets "Connection: close" once the cap is hit (a body without
// Content-Length), before the handler answers. (http.MaxBytesReader does
// that itself only on net/http's own ResponseWriter, not gin's.) It also
// marks itself (cut), so that WriteError answers the handler's refusal as
// 413 BODY_TOO_LARGE: a mark on the body, not on the gin context, reaches
// a handler of another engine (the console) that the request is handed to.
type cappedBody struct {
	io.ReadCloser
	c   *gin.Context
	cut atomic.Bool
}

// bodyCut reports whether r's body ran past MaxBodyBytes.
func bodyCut(r *http.Request) bool {
	b, ok := r.Body.(*cappedBody)
	return ok && b.cut.Load()
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	if err != nil && errors.As(err, &tooBig) {
		b.c.Header("Connection", "close")
		b.cut.Store(true)
	}
	return n, err
}

// requireAdmin guards admin routes: with a token configured, the request must
// carry it as a bearer token (compared in constant time); without one, only
// requests of a loopback client, addressed to a loopback name (Host), and
// carrying no forwarding header are let in (localOnlyProblem).
func (h *handler) requireAdmin(c *gin.Context) {
	if h.opts.AdminToken == "" {
		if reason := localOnlyProblem(c.Request); reason != "" {
			h.logAdminAuthFailure(c, reason+" and no admin token is configured")
			WriteError(c, h.log, apperr.New(apperr.Unauthorized, "admin routes answer only local requests (a loopback client, a loopback Host, no proxy) when no admin token is configured"), "")
		}
		return
	}
	got, ok := bearerToken(c.GetHeader("Authorization"))
	if !equalSecret(got, h.opts.AdminToken) || !ok {
		reason := "wrong bearer token"
		if !ok {
			reason = "no bearer token"
		}
		h.logAdminAuthFailure(c, reason)
		if got != "" {
			h.opts.AuthGuard.Failed(c.Request.RemoteAddr, "admin")
		}
		c.Header("WWW-Authenticate", `Bearer realm="payserver-admin"`)
		WriteError(c, h.log, apperr.New(apperr.Unauthorized, "a valid admin bearer token is required"), "")
	}
}

// authThrottle refuses, 429 AUTH_THROTTLED with Retry-After, a request
// from an address that failed to authenticate too often (authguard), before
// its credentials are looked at: even the right token waits out the
// window, so guessing costs a minute per authguard.MaxFailures tries.
func (h *handler) authThrottle(c *gin.Context) {
	wait := h.opts.AuthGuard.Blocked(c.Request.RemoteAddr)
	if wait <= 0 {
		c.Next()
		return
	}
	h.opts.AuthGuard.Refused(surfaceOf(c))
	e := apperr.New(apperr.AuthThrottled, "too many failed authentications from this address; try again later")
	e.RetryAfter = wait
	WriteError(c, h.log, e, "")
}

// surfaceOf names the authenticated surface of a request, for metrics.
func surfaceOf(c *gin.Context) string {
	switch p := c.FullPath(); {
	case p == loginPath:
		return "login"
	case strings.HasPrefix(p, "/v1/limits"):
		return "client"
	case strings.HasPrefix(p, "/pay"):
		return "pay"
	}
	return "admin"
}

// localOnlyProblem says why r is not a local request, or "" when it is:
//   - its peer is not a loopback address;
//   - its Host is not a loopback name: a page of another site whose name
//     resolves to 127.0.0.1 (DNS rebinding) sends its own name;
//   - it carries a forwarding header: a reverse proxy on this host
//     connects from loopback on behalf of anyone.
func localOnlyProblem(r *http.Request) string {
	switch {
	case !netaddr.IsLoopback(r.RemoteAddr):
		return "not a loopback client"
	case !netaddr.IsLoopbackName(r.Host):
		return "Host is not a loopback name"
	}
	for _, name := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"} {
		if _, ok := r.Header[name]; ok {
			return "forwarded by a proxy (" + name + ")"
		}
	}
	return ""
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110, 11.1); exactly one space
// separates it from the token.
func bearerToken(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return h[len(scheme):], true
}
