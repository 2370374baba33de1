package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/pay"
)

// Settler is pay.SettlerObserver on prometheus.
type Settler struct {
	dropped prometheus.Counter
}

var _ pay.SettlerObserver = (*Settler)(nil)

// NewSettler registers payserver_settler_dropped_total on m's registry.
func (m *Metrics) NewSettler() *Settler {
	s := &Settler{dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "payserver_settler_dropped_total",
		Help: "Limiter slots the settler's full queue dropped: each frees itself when its window passes instead of when its order's fate is known.",
	})}
	m.Registry.MustRegister(s.dropped)
	return s
}

// SettleDropped implements pay.SettlerObserver.
func (s *Settler) SettleDropped() { s.dropped.Inc() }
