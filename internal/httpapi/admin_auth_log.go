package httpapi

import (
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/ratelog"
)

// Failed admin authentications are logged at most this often after a
// burst of adminAuthLogBurst, so a scan cannot flood the log.
const (
	adminAuthLogEvery = 10 * time.Second
	adminAuthLogBurst = 5
)

func newAdminAuthLog() *ratelog.Limiter { return ratelog.New(adminAuthLogEvery, adminAuthLogBurst) }

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
