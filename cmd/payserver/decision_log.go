package main

import (
	"context"

	"payserver/internal/decisionlog"
	"payserver/internal/httpapi"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/whatif"
)

// decisionObserver starts the decision log (internal/decisionlog) on the
// database, its writer owned by Main, and returns it as the limiter's
// observer; nil when PAYSERVER_DECISION_LOG_RETENTION is 0 (off) or the
// log cannot be made (logged: the log is analytics, never a reason not to
// serve).
func (m *Main) decisionObserver(ctx context.Context) ratelimit.Observer {
	if m.cfg.DecisionLog.Retention <= 0 {
		m.log.Info("decision log off (PAYSERVER_DECISION_LOG_RETENTION is 0): what-if has nothing new to replay")
		return nil
	}
	store, err := repo.NewDecisionLog(m.db)
	if err != nil {
		m.log.Warn("decision log off", "err", err)
		return nil
	}
	dl, err := decisionlog.New(store, decisionlog.Options{
		Retention: m.cfg.DecisionLog.Retention,
		Dropped:   m.metrics.NewDecisionLogDropped(),
		Logger:    m.log.With("component", "decision-log"),
	})
	if err != nil {
		m.log.Warn("decision log off", "err", err)
		return nil
	}
	m.decisions = dl
	m.goBackground(func() { dl.Run(ctx) })
	return dl
}

// documentApplied keeps every limits document applied in the decision
// log, for fidelity checks (configcenter.Hooks.Document).
func (m *Main) documentApplied(version string, content []byte) {
	if m.decisions != nil {
		m.decisions.DocumentApplied(version, content)
	}
}

// whatIfOptions returns what POST /limits/what-if and the console's
// what-if page answer with: the decisions recorded in the database.
func (m *Main) whatIfOptions() (httpapi.WhatIfOptions, error) {
	store, err := repo.NewDecisionLog(m.db)
	if err != nil {
		return httpapi.WhatIfOptions{}, err
	}
	svc, err := whatif.NewService(store)
	if err != nil {
		return httpapi.WhatIfOptions{}, err
	}
	return httpapi.WhatIfOptions{
		Service: svc, MaxDecisions: m.cfg.DecisionLog.WhatIfMaxDecisions, Logger: m.log.With("component", "what-if"),
	}, nil
}
