package httpapi

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
)

// recover turns a panic into an INTERNAL answer; it never crashes the server.
func (h *handler) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			writeError(c, h.log, apperr.Wrap(fmt.Errorf("panic: %v", v), apperr.Internal, "internal error"), "")
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

// limitBody caps every request body at MaxBodyBytes.
func (h *handler) limitBody(c *gin.Context) {
	if c.Request.ContentLength > MaxBodyBytes {
		writeError(c, h.log, apperr.Invalid(apperr.FieldError{Field: "body", Reason: fmt.Sprintf("must be at most %d bytes", MaxBodyBytes)}), "")
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	c.Next()
}

// requireAdmin guards admin routes: with a token configured, the request must
// carry it as a bearer token (compared in constant time); without one, only
// loopback clients are let in.
func (h *handler) requireAdmin(c *gin.Context) {
	if h.opts.AdminToken == "" {
		if !isLoopback(c.Request.RemoteAddr) {
			writeError(c, h.log, apperr.New(apperr.Unauthorized, "admin routes answer only loopback clients when no admin token is configured"), "")
		}
		return
	}
	got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.AdminToken)) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="payserver-admin"`)
		writeError(c, h.log, apperr.New(apperr.Unauthorized, "a valid admin bearer token is required"), "")
	}
}

func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
