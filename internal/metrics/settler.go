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

// WatchOwedReleases exports how many limiter releases the pay flow owes
// (pay.OwedReleases): slots given back once the limiter answers again.
func (m *Metrics) WatchOwedReleases(owed func() int) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "payserver_limiter_releases_owed",
		Help: "Limiter slots the pay flow could not give back when their fate was known (the limiter failed); each is given back once it answers again.",
	}, func() float64 { return float64(owed()) }))
}
