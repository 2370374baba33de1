package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/limitapi"
)

// CallerTally is the per-caller count of limiter operations.
// *limitapi.Tally implements it.
type CallerTally interface {
	Snapshot() []limitapi.CallerCounts
}

type callerJSON struct {
	Caller   string `json:"caller"`
	Acquired int64  `json:"acquired"`
	Limited  int64  `json:"limited"`
	Released int64  `json:"released"`
	Peeks    int64  `json:"peeks"`
	Failed   int64  `json:"failed"`
}

type callersReportJSON struct {
	Since   string       `json:"since"`
	Callers []callerJSON `json:"callers"`
}

// CallersReport returns the admin route GET /reports/limit-callers: what
// each caller of the limiter did on this instance since it started, the
// clients by token name beside POST /pay's own (caller "pay"). log is
// where an answer that cannot be written is logged.
func CallersReport(t CallerTally, since time.Time, log *slog.Logger) func(*gin.RouterGroup) {
	return func(g *gin.RouterGroup) {
		g.GET("/reports/limit-callers", func(c *gin.Context) {
			snap := t.Snapshot()
			out := callersReportJSON{Since: since.UTC().Format(time.RFC3339Nano), Callers: make([]callerJSON, len(snap))}
			for i, s := range snap {
				out.Callers[i] = callerJSON{Caller: s.Caller, Acquired: s.Acquired, Limited: s.Limited, Released: s.Released, Peeks: s.Peeks, Failed: s.Failed}
			}
			writeJSON(c, log, http.StatusOK, out)
		})
	}
}
