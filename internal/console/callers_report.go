package console

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/httpapi"
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

// getCallers answers GET /reports/limit-callers: what each caller of the
// limiter did on this instance since it started, the clients by token name
// beside POST /pay's own (caller "pay").
func (r *reports) getCallers(c *gin.Context) {
	snap := r.opts.Callers.Snapshot()
	out := callersReportJSON{Since: r.opts.CallersSince.UTC().Format(time.RFC3339Nano), Callers: make([]callerJSON, len(snap))}
	for i, s := range snap {
		out.Callers[i] = callerJSON{Caller: s.Caller, Acquired: s.Acquired, Limited: s.Limited, Released: s.Released, Peeks: s.Peeks, Failed: s.Failed}
	}
	httpapi.WriteJSON(c, r.log, http.StatusOK, out)
}
