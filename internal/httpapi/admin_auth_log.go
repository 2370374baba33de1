package httpapi

import (
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/ratelog"
)

// Failed authentications (admin and client tokens, each on its own budget)
// are logged at most this often after a burst of adminAuthLogBurst, so a
// scan cannot flood the log.
const (
	adminAuthLogEvery = 10 * time.Second
	adminAuthLogBurst = 5
)

func newAuthLog() *ratelog.Limiter { return ratelog.New(adminAuthLogEvery, adminAuthLogBurst) }

// logAdminAuthFailure logs a refused admin request at warn, rate-limited,
// with the route, the client address and why; never the token.
func (h *handler) logAdminAuthFailure(c *gin.Context, reason string) {
	ok, suppressed := h.authLog.Allow()
	if !ok {
		return
	}
	h.log.Warn("admin authentication failed", "route", c.FullPath(), "method", c.Request.Method,
		"remote", c.Request.RemoteAddr, "reason", reason, "suppressedSinceLast", suppressed)
}

// logClientAuthFailure logs a /v1/limits call without a valid client token
// at warn, rate-limited, with the route and the client address; never the
// token.
func (h *handler) logClientAuthFailure(c *gin.Context) {
	ok, suppressed := h.clientAuthLog.Allow()
	if !ok {
		return
	}
	h.log.Warn("limits call refused: no valid client token", "route", c.FullPath(), "remote", c.ClientIP(), "suppressedSinceLast", suppressed)
}
