package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/configcenter"
)

// LimitsHistory pages the audit trail of limits documents, newest first.
// *repo.LimitHistory implements it.
type LimitsHistory interface {
	// Page returns up to limit entries whose ID is below before (any when
	// before is 0), newest first.
	Page(ctx context.Context, before uint64, limit int) ([]configcenter.Change, error)
}

// Paging of GET /limits/history.
const (
	// DefaultHistoryPage is the page size when limit is absent.
	DefaultHistoryPage = 50
	// MaxHistoryPage is the largest limit accepted.
	MaxHistoryPage = 500
)

// historyEntryJSON is one entry of GET /limits/history.
type historyEntryJSON struct {
	ID       uint64   `json:"id"`
	At       string   `json:"at"`
	Kind     string   `json:"kind"`
	Source   string   `json:"source"`
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Instance string   `json:"instance"`
	Diff     []string `json:"diff"`
	Refusal  *string  `json:"refusal"`
}

type historyPageJSON struct {
	Entries []historyEntryJSON `json:"entries"`
	// NextBefore is the before of the next (older) page; null on the last.
	NextBefore *uint64 `json:"nextBefore"`
}

// LimitsHistoryRoutes returns the registration of GET /limits/history for
// Options.Admin (admin auth like GET /limits).
func LimitsHistoryRoutes(h LimitsHistory, log *slog.Logger) (func(g *gin.RouterGroup), error) {
	if h == nil || log == nil {
		return nil, errors.New("httpapi: limits history needs a history store and a logger")
	}
	return func(g *gin.RouterGroup) {
		g.GET("/limits/history", func(c *gin.Context) { getLimitsHistory(c, h, log) })
	}, nil
}

func getLimitsHistory(c *gin.Context, h LimitsHistory, log *slog.Logger) {
	before, limit, err := parseHistoryPage(c.Request.URL.Query())
	if err != nil {
		WriteError(c, log, err, "")
		return
	}
	// One more than asked tells whether an older page exists.
	list, err := h.Page(c.Request.Context(), before, limit+1)
	if err != nil {
		WriteError(c, log, DatabaseDown(err, "the limits history database is unavailable"), "")
		return
	}
	page := historyPageJSON{Entries: make([]historyEntryJSON, 0, min(len(list), limit))}
	for i, e := range list {
		if i == limit {
			next := page.Entries[limit-1].ID
			page.NextBefore = &next
			break
		}
		page.Entries = append(page.Entries, historyEntry(e))
	}
	c.Header("Cache-Control", "no-store")
	WriteJSON(c, log, http.StatusOK, page)
}

func historyEntry(e configcenter.Change) historyEntryJSON {
	kind := e.Kind
	if kind == "" {
		kind = configcenter.KindChange
	}
	out := historyEntryJSON{
		ID: e.ID, At: e.At.UTC().Format(time.RFC3339Nano), Kind: string(kind), Source: e.Source, Name: e.Name,
		Version: e.MD5, Instance: e.Instance, Diff: e.Keys,
	}
	if out.Diff == nil {
		out.Diff = []string{}
	}
	if kind == configcenter.KindRefused {
		r := e.Refusal
		out.Refusal = &r
	}
	return out
}

// parseHistoryPage validates limit (1..MaxHistoryPage) and before (a
// positive entry id); unknown or repeated parameters are refused too.
func parseHistoryPage(v url.Values) (before uint64, limit int, err error) {
	bad := CheckParams(v, []string{"limit", "before"}, "limit, before")
	limit = DefaultHistoryPage
	if s := first(v["limit"]); s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 || n > MaxHistoryPage {
			bad = append(bad, apperr.FieldError{Field: "limit", Reason: "must be a whole number from 1 to " + strconv.Itoa(MaxHistoryPage)})
		} else {
			limit = n
		}
	}
	if s := first(v["before"]); s != "" {
		n, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil || n == 0 {
			bad = append(bad, apperr.FieldError{Field: "before", Reason: "must be a positive entry id (nextBefore of the previous page)"})
		} else {
			before = n
		}
	}
	if len(bad) > 0 {
		return 0, 0, apperr.Invalid(bad...)
	}
	return before, limit, nil
}

func first(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	return vals[0]
}
