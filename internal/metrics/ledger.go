package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/pay"
)

// Ledger is pay.LedgerObserver on prometheus.
type Ledger struct {
	refused prometheus.Counter
}

var _ pay.LedgerObserver = (*Ledger)(nil)

// NewLedger registers payserver_slot_ledger_refusals_total on m's registry.
func (m *Metrics) NewLedger() *Ledger {
	l := &Ledger{refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "payserver_slot_ledger_refusals_total",
		Help: "Payments and limits API acquires refused (503, dependency ledger) before taking a slot because the ledger of unsettled slots was full or could not write to disk.",
	})}
	m.Registry.MustRegister(l.refused)
	return l
}

// LedgerRefused implements pay.LedgerObserver.
func (l *Ledger) LedgerRefused() { l.refused.Inc() }

// WatchLedger exports how many slots the ledger keeps in each phase
// (pay.Ledger.Sizes): claims to close, slots watched, fates to carry out,
// lost acquires.
func (m *Metrics) WatchLedger(sizes func() map[string]int) {
	for _, phase := range []string{"close", "watch", "carry", "acquire"} {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "payserver_slot_ledger_entries",
			Help:        "Limiter slots whose fate is not carried out yet, by phase: close (a 503'd payment's requestId to close NOT_SENT), watch (waiting for the order holding the requestId), carry (a release or give-back the limiter failed), acquire (a limits API acquire answered 503 with its outcome unknown, its member released after the grace unless acquired again).",
			ConstLabels: prometheus.Labels{"phase": phase},
		}, func() float64 { return float64(sizes()[phase]) }))
	}
}
