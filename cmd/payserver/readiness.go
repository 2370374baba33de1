package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"payserver/internal/httpapi"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
)

// This file holds the readiness checks that need more than a ping: the
// database schema's version, and Redis under the limiter's policy.
// docs/OPERATIONS.md, "Readiness", says what each answers.

// schemaCheckEvery is how long a read of the schema's version answers
// /readyz: a probe reads it again once the last read is older, so an
// instance turns ready within this (plus one probe period) of a
// `payserver migrate`.
const schemaCheckEvery = 5 * time.Second

// schemaCheck is the readiness check of the database schema. A schema
// behind this binary is not ready, naming the command to run; one ahead
// (migrated by a newer payserver) is served, because migrations only add
// (docs/OPERATIONS.md, "Schema version"), and shown as such. Each change of
// state is logged once.
type schemaCheck struct {
	read  func(ctx context.Context) (repo.Schema, error)
	now   func() time.Time
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	readAt  time.Time // of the last successful read; zero before it
	last    httpapi.Readiness
	logged  *repo.Schema // the schema last logged
	failing bool         // the last read failed (and was logged)
}

func newSchemaCheck(read func(ctx context.Context) (repo.Schema, error), now func() time.Time, log *slog.Logger) *schemaCheck {
	return &schemaCheck{read: read, now: now, every: schemaCheckEvery, log: log}
}

// Check answers for /readyz from a read at most schemaCheckEvery old. A
// failed read is not ready and is retried on the next call; the first of a
// run of failures is logged.
func (c *schemaCheck) Check(ctx context.Context) httpapi.Readiness {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.readAt.IsZero() && now.Sub(c.readAt) < c.every {
		return c.last
	}
	s, err := c.read(ctx)
	if err != nil {
		if !c.failing {
			c.failing = true
			c.log.Warn("cannot read the database schema version; not ready until it can", "err", err)
		}
		return httpapi.Readiness{NotReady: true, Text: "cannot read the schema version: " + err.Error()}
	}
	c.failing = false
	c.readAt, c.last = now, schemaReadiness(s)
	if c.logged == nil || c.logged.State != s.State || c.logged.Applied != s.Applied {
		c.logged = &s
		logSchema(c.log, s)
	}
	return c.last
}

// Behind says how the schema is behind this binary ("behind (0 < 8)"), from
// a read at most schemaCheckEvery old (Check); "" when it is not behind or
// could not be read. It serves httpapi.Options.SchemaBehind.
func (c *schemaCheck) Behind(ctx context.Context) string {
	if !c.Check(ctx).NotReady {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing || c.logged == nil || c.logged.State != repo.SchemaBehind {
		return ""
	}
	return c.logged.String()
}

// schemaReadiness is what /readyz shows for a schema.
func schemaReadiness(s repo.Schema) httpapi.Readiness {
	switch s.State {
	case repo.SchemaBehind:
		return httpapi.Readiness{NotReady: true, Text: s.String() + ": run payserver migrate"}
	case repo.SchemaAhead:
		return httpapi.Readiness{Text: s.String() + ", serving"}
	default:
		return httpapi.Readiness{}
	}
}

func logSchema(log *slog.Logger, s repo.Schema) {
	attrs := []any{"schema", s.String(), "applied", s.Applied, "embedded", s.Embedded}
	switch s.State {
	case repo.SchemaBehind:
		log.Error("database schema is behind this binary: not ready until `payserver migrate` runs",
			append(attrs, "missing", s.Missing)...)
	case repo.SchemaAhead:
		log.Warn("database schema is ahead of this binary (migrated by a newer payserver); serving, as migrations only add",
			append(attrs, "unknown", s.Unknown)...)
	default:
		log.Info("database schema is current", attrs...)
	}
}

// redisReadiness is the readiness check of Redis under the limiter's
// policy. Under deny, a Redis that fails refuses every payment, so the
// instance is not ready. Under local (decisions in process) and allow
// (admissions without limits) it serves without Redis: degraded, not
// not-ready, since Redis is shared and every instance leaving the load
// balancer at once would defeat the fallback.
func redisReadiness(ping func(ctx context.Context) error, policy ratelimit.Policy) func(ctx context.Context) httpapi.Readiness {
	return func(ctx context.Context) httpapi.Readiness {
		err := ping(ctx)
		switch {
		case err == nil:
			return httpapi.Readiness{}
		case policy == ratelimit.PolicyLocal:
			return httpapi.Readiness{Text: "degraded (deciding in process): " + err.Error()}
		case policy == ratelimit.PolicyAllow:
			return httpapi.Readiness{Text: "degraded (admitting without limits): " + err.Error()}
		default:
			return httpapi.Readiness{NotReady: true, Text: err.Error()}
		}
	}
}
