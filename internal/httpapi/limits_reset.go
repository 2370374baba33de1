package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
)

// LearnedResetter reads and forgets the learned limits of a key, under
// the limits in force. *ratelimit.Limiter implements it.
type LearnedResetter interface {
	LearnedSource
	Config() *ratelimit.Config
	ResetLearned(ctx context.Context, key ratelimit.Key) error
}

// LearnedResetOptions wires POST /limits/learned/reset. Every field is
// required but Now.
type LearnedResetOptions struct {
	Limits LearnedResetter
	// History keeps every reset in the audit trail of GET /limits/history
	// (kind learned_reset). *repo.LimitHistory implements it.
	History configcenter.History
	Logger  *slog.Logger
	// Now stamps the history entry. Default time.Now.
	Now func() time.Time
}

// resetSource is the Source of a reset's history entry.
const resetSource = "admin"

// resetTimeout bounds the reset and its audit entry.
const resetTimeout = 5 * time.Second

type learnedReset struct{ opts LearnedResetOptions }

// LearnedResetRoutes returns the registration of POST
// /limits/learned/reset for Options.Admin (admin auth like GET /limits).
func LearnedResetRoutes(opts LearnedResetOptions) (func(g *gin.RouterGroup), error) {
	if opts.Limits == nil || opts.History == nil || opts.Logger == nil {
		return nil, errors.New("httpapi: the learned limits reset needs a limiter, a history store and a logger")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &learnedReset{opts: opts}
	return func(g *gin.RouterGroup) { g.POST("/limits/learned/reset", r.post) }, nil
}

type resetRequest struct {
	Key *string `json:"key"`
}

type resetJSON struct {
	Key   string `json:"key"`
	Reset bool   `json:"reset"`
}

// post answers POST /limits/learned/reset: the key's learned limits are
// forgotten (its windows enforce their configured limits at once, on
// every instance) and the reset is written to the audit history, with the
// learned limits it ended. Both or an error: a reset whose entry could not
// be written answers 503, and asking again (a reset is idempotent) writes
// it.
func (r *learnedReset) post(c *gin.Context) {
	log := r.opts.Logger
	key, err := decodeResetKey(c.Request.Body)
	if err != nil {
		WriteError(c, log, err, "")
		return
	}
	cfg := r.opts.Limits.Config()
	if cfg == nil || !namesKey(cfg, key) {
		WriteError(c, log, apperr.New(apperr.NotFound, "the limits in force do not name %s: it has no learned limit to reset", key), "")
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), resetTimeout)
	defer cancel()
	// What the reset ends, for the audit entry; a failed read is said
	// there rather than refusing the reset.
	before, readErr := r.opts.Limits.Learned(ctx, key)
	if err := r.opts.Limits.ResetLearned(ctx, key); err != nil {
		WriteError(c, log, apperr.Wrap(err, apperr.DependencyUnavailable, "the learned limits of %s could not be reset: the limiter store is unavailable", key).
			WithDetails(map[string]any{"dependency": "limiter"}), "")
		return
	}
	entry := configcenter.Change{At: r.opts.Now(), Kind: configcenter.KindLearnedReset, Source: resetSource, Name: key.String(),
		Keys: resetDiff(key, before, readErr)}
	if err := r.opts.History.Record(ctx, entry); err != nil {
		WriteError(c, log, DatabaseDown(err, fmt.Sprintf("the learned limits of %s were reset, but the audit history could not be written; ask again to write it", key)), "")
		return
	}
	log.Info("learned limits reset", "key", key.String(), "ended", entry.Keys)
	c.Header("Cache-Control", "no-store")
	WriteJSON(c, log, http.StatusOK, resetJSON{Key: key.String(), Reset: true})
}

// decodeResetKey reads {"key": "BIZTYPE:CHANNEL"}: a JSON object with the
// one field key, a valid key or a channel-wide one ("*:CHANNEL").
func decodeResetKey(body io.Reader) (ratelimit.Key, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return ratelimit.Key{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: fmt.Sprintf("could not be read or is over %d bytes", MaxBodyBytes)})
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var req resetRequest
	if err := dec.Decode(&req); err != nil || dec.More() {
		reason := `must be one JSON object {"key": "BIZTYPE:CHANNEL"}`
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "key" {
			return ratelimit.Key{}, apperr.Invalid(apperr.FieldError{Field: "key", Reason: `must be a string "BIZTYPE:CHANNEL" or "*:CHANNEL"`})
		}
		if field, ok := strings.CutPrefix(fmt.Sprint(err), "json: unknown field "); ok {
			reason = "has the unknown field " + field + "; the only field is key"
		}
		return ratelimit.Key{}, apperr.Invalid(apperr.FieldError{Field: "body", Reason: reason})
	}
	if req.Key == nil {
		return ratelimit.Key{}, apperr.Invalid(apperr.FieldError{Field: "key", Reason: `is required: "BIZTYPE:CHANNEL" or "*:CHANNEL"`})
	}
	key, err := ratelimit.ParseKey(*req.Key)
	if err != nil {
		return ratelimit.Key{}, apperr.Invalid(apperr.FieldError{Field: "key", Reason: err.Error()})
	}
	return key, nil
}

// namesKey reports whether cfg has a rule or a schedule for key.
func namesKey(cfg *ratelimit.Config, key ratelimit.Key) bool {
	if _, ok := cfg.Rules[key]; ok {
		return true
	}
	for _, s := range cfg.Schedules {
		if s.Key == key {
			return true
		}
	}
	return false
}

// resetDiff describes what a reset of key ended, one line per learned
// limit that was in force: "KEY count/1s: learned 70 of 100 since T ->
// reset".
func resetDiff(key ratelimit.Key, before []ratelimit.LearnedLimit, readErr error) []string {
	if readErr != nil {
		return []string{fmt.Sprintf("%s: learned limits unknown (%v) -> reset", key, readErr)}
	}
	if len(before) == 0 {
		return []string{fmt.Sprintf("%s: no learned limit in force -> reset", key)}
	}
	out := make([]string, 0, len(before))
	for _, l := range before {
		out = append(out, fmt.Sprintf("%s %s: learned %d of %d since %s -> reset", key, l.Window.Name(),
			min(l.Learned, l.Window.Limit), l.Window.Limit, formatInstantNano(l.Since)))
	}
	sort.Strings(out)
	return out
}
