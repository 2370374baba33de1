package main

import (
	"fmt"
	"time"
)

// DecisionLogConfig tunes the decision log (internal/decisionlog) and the
// what-if replays over it.
type DecisionLogConfig struct {
	// Retention is how long decisions are kept; 0 turns the log off.
	Retention time.Duration `yaml:"retention"` // PAYSERVER_DECISION_LOG_RETENTION, default 168h
	// WhatIfMaxDecisions is the most decisions POST /limits/what-if
	// replays; over it, the CLI does.
	WhatIfMaxDecisions int64 `yaml:"whatIfMaxDecisions"` // PAYSERVER_WHATIF_MAX_DECISIONS, default 10000000
}

// defaultDecisionLog is DecisionLogConfig's default.
var defaultDecisionLog = DecisionLogConfig{Retention: 168 * time.Hour, WhatIfMaxDecisions: 10_000_000}

// validate checks the ranges.
func (c DecisionLogConfig) validate() error {
	if c.Retention < 0 {
		return fmt.Errorf("PAYSERVER_DECISION_LOG_RETENTION %v is negative (0 turns the decision log off)", c.Retention)
	}
	if c.WhatIfMaxDecisions <= 0 {
		return fmt.Errorf("PAYSERVER_WHATIF_MAX_DECISIONS %d must be positive", c.WhatIfMaxDecisions)
	}
	return nil
}
