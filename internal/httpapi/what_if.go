package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/whatif"
)

// WhatIf answers a what-if question. *whatif.Service implements it.
type WhatIf interface {
	WhatIf(ctx context.Context, q whatif.Query) (whatif.Result, error)
}

// WhatIfOptions configures POST /limits/what-if.
type WhatIfOptions struct {
	Service WhatIf
	// MaxDecisions is PAYSERVER_WHATIF_MAX_DECISIONS: a range holding more
	// is refused (400), naming the cap and the CLI.
	MaxDecisions int64
	Logger       *slog.Logger
	// Now is the clock of the default range, the last 24 hours.
	Now func() time.Time
}

// WhatIfRoute returns the registration of POST /limits/what-if, an admin
// route (Options.Admin): the body is the proposed limits document (YAML or
// JSON, sent as application/json), from and to (RFC 3339, default the last
// 24 hours) bound the decisions replayed, and the answer is
// whatif.Result's JSON. A document the server would refuse is 400 naming
// the reason. The console's what-if page asks the same question from a
// form (ParseWhatIfRange).
func WhatIfRoute(opts WhatIfOptions) func(g *gin.RouterGroup) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return func(g *gin.RouterGroup) {
		g.POST("/limits/what-if", func(c *gin.Context) {
			q, err := ParseWhatIfRange(opts, c.GetQuery)
			if err != nil {
				WriteError(c, opts.Logger, err, "")
				return
			}
			body, err := io.ReadAll(c.Request.Body)
			if err != nil {
				WriteError(c, opts.Logger, apperr.Wrap(err, apperr.InvalidRequest, "body unreadable"), "")
				return
			}
			q.Document = body
			res, err := opts.Service.WhatIf(c.Request.Context(), q)
			if err != nil {
				WriteError(c, opts.Logger, err, "")
				return
			}
			WriteJSON(c, opts.Logger, http.StatusOK, res)
		})
	}
}

// ParseWhatIfRange returns the query of from and to as get finds them (RFC
// 3339; absent, the last 24 hours before opts.Now), with opts.MaxDecisions.
func ParseWhatIfRange(opts WhatIfOptions, get func(name string) (string, bool)) (whatif.Query, error) {
	now := opts.Now()
	q := whatif.Query{From: now.Add(-24 * time.Hour), To: now, MaxDecisions: opts.MaxDecisions}
	var bad []apperr.FieldError
	for _, p := range []struct {
		name string
		into *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if v, ok := get(p.name); ok {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				bad = append(bad, apperr.FieldError{Field: p.name, Reason: "must be an RFC 3339 time"})
				continue
			}
			*p.into = t
		}
	}
	if len(bad) > 0 {
		return whatif.Query{}, apperr.Invalid(bad...)
	}
	return q, nil
}
