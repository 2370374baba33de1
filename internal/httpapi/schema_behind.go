package httpapi

import (
	"context"
	"errors"
	"maps"

	"payserver/internal/apperr"
)

// SchemaBehind says how the order database's schema is behind this binary
// ("behind (0 < 9)"), or "" when it is not behind or could not be read.
// It is asked only after the order database failed a request, and may
// answer from a recent read.
type SchemaBehind func(ctx context.Context) string

// explainDatabase turns a DEPENDENCY_UNAVAILABLE error of the order
// database into one that says the schema is behind and what to run, when
// Options.SchemaBehind says so: the database answers, only its tables are
// missing or old, so "unavailable" alone sends the operator the wrong way.
// An error whose details carry an orderNo (the channel was called) is left
// as it is: its message says how to learn the outcome.
func (h *handler) explainDatabase(ctx context.Context, err error) error {
	var e *apperr.Error
	if h.opts.SchemaBehind == nil || !errors.As(err, &e) || e.Code != apperr.DependencyUnavailable ||
		e.Details["dependency"] != "database" || e.Details["orderNo"] != nil {
		return err
	}
	behind := h.opts.SchemaBehind(ctx)
	if behind == "" {
		return err
	}
	details := maps.Clone(e.Details)
	details["schema"] = behind
	return apperr.Wrap(err, apperr.DependencyUnavailable,
		"the order database answers, but its schema is behind this binary (schema %s): run `payserver migrate` against it, then retry with the same requestId", behind).
		WithDetails(details)
}
