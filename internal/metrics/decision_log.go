package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewDecisionLogDropped registers payserver_decision_log_dropped_total on
// m's registry and returns the function that counts one drop
// (decisionlog.Options.Dropped).
func (m *Metrics) NewDecisionLogDropped() func() {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "payserver_decision_log_dropped_total",
		Help: "Decision log entries dropped because its buffer was full: decisions and releases a what-if replay will not see.",
	})
	m.Registry.MustRegister(c)
	return c.Inc
}
