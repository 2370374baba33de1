package whatif

import (
	"context"
	"errors"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/decisionlog"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

// Store is the decision log as a replay reads it. repo.DecisionLog
// implements it.
type Store interface {
	Source
	// Documents returns every limits document applied, by version.
	Documents(ctx context.Context) (map[string][]byte, error)
	// Count returns how many entries f selects.
	Count(ctx context.Context, f decisionlog.Filter) (int64, error)
}

// Service answers what-if questions over a Store: the one place the CLI and
// POST /limits/what-if share.
type Service struct {
	store Store
}

// NewService returns the what-if service on store.
func NewService(store Store) (*Service, error) {
	if store == nil {
		return nil, errors.New("whatif: nil store")
	}
	return &Service{store: store}, nil
}

// Query is one what-if question.
type Query struct {
	// Document is the proposed limits document, as published.
	Document []byte
	From, To time.Time
	Keys     []ratelimit.Key
	// MaxDecisions, when above 0, refuses a replay of more entries
	// (INVALID_REQUEST naming the cap and the CLI, which has none).
	MaxDecisions int64
}

// WhatIf parses q's document as the server would (INVALID_REQUEST naming
// the reason when it would refuse it) and replays the decision log of q's
// interval under it (Replay), with the fidelity of the documents in force.
func (s *Service) WhatIf(ctx context.Context, q Query) (Result, error) {
	doc, err := limits.Parse(q.Document)
	if err != nil {
		return Result{}, apperr.Invalid(apperr.FieldError{Field: "document", Reason: err.Error()})
	}
	if !q.From.Before(q.To) {
		return Result{}, apperr.Invalid(apperr.FieldError{Field: "from", Reason: "must be before to"})
	}
	texts, err := s.store.Documents(ctx)
	if err != nil {
		return Result{}, apperr.Wrap(err, apperr.DependencyUnavailable, "limits documents unreadable")
	}
	inForce := make(map[string]*ratelimit.Config, len(texts))
	for v, text := range texts {
		if d, err := limits.Parse(text); err == nil {
			inForce[v] = d.Config
		}
	}
	if q.MaxDecisions > 0 {
		// What the replay reads: its warm-up before from included.
		from := q.From.Add(-WarmUp(doc.Config, inForce))
		n, err := s.store.Count(ctx, decisionlog.Filter{From: from, To: q.To, Keys: q.Keys})
		if err != nil {
			return Result{}, apperr.Wrap(err, apperr.DependencyUnavailable, "decision log unreadable")
		}
		if n > q.MaxDecisions {
			return Result{}, apperr.Invalid(apperr.FieldError{Field: "from", Reason: fmtCap(n, q.MaxDecisions)})
		}
	}
	return Replay(ctx, s.store, Options{From: q.From, To: q.To, Keys: q.Keys, Proposed: doc.Config, InForce: inForce})
}
