package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

func (h *handler) healthz(c *gin.Context) {
	writeJSON(c, h.log, http.StatusOK, gin.H{"status": "ok"})
}

// readyz answers 200 only when every check passes, else 503 naming what is
// missing.
func (h *handler) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	missing := []string{}
	for _, chk := range h.opts.Ready {
		if err := chk.Check(ctx); err != nil {
			checks[chk.Name] = err.Error()
			missing = append(missing, chk.Name)
			continue
		}
		checks[chk.Name] = "ok"
	}
	if len(missing) > 0 {
		writeJSON(c, h.log, http.StatusServiceUnavailable, gin.H{"status": "not ready", "missing": missing, "checks": checks})
		return
	}
	writeJSON(c, h.log, http.StatusOK, gin.H{"status": "ready", "missing": missing, "checks": checks})
}
