package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

func (h *handler) healthz(c *gin.Context) {
	WriteJSON(c, h.log, http.StatusOK, gin.H{"status": "ok"})
}

// readyz answers 200 when no check says not ready, else 503 naming each
// that does. Every check's text is shown: "ok", why it is not ready, or how
// it is degraded while the instance still serves.
func (h *handler) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	missing := []string{}
	for _, chk := range h.opts.Ready {
		r := chk.Check(ctx)
		text := cmp.Or(r.Text, "ok")
		if r.NotReady {
			text = cmp.Or(r.Text, "not ready")
			missing = append(missing, chk.Name)
		}
		checks[chk.Name] = text
	}
	if len(missing) > 0 {
		WriteJSON(c, h.log, http.StatusServiceUnavailable, gin.H{"status": "not ready", "missing": missing, "checks": checks})
		return
	}
	WriteJSON(c, h.log, http.StatusOK, gin.H{"status": "ready", "missing": missing, "checks": checks})
}
