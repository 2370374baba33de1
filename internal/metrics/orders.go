package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/pay"
)

// CountOrders returns store with every recorded order outcome counted in
// payserver_order_outcomes_total{status}: each successful Finish counts its
// status (SUCCEEDED, FAILED or UNKNOWN), and MarkStaleUnknown counts the
// orders it turned UNKNOWN. Orders created (PROCESSING) are counted as
// status="PROCESSING". Other methods pass through; methods added to
// pay.OrderStore later pass through unchanged as well.
func (m *Metrics) CountOrders(store pay.OrderStore) pay.OrderStore {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_order_outcomes_total",
		Help: "Order states recorded: PROCESSING when created, then SUCCEEDED, FAILED or UNKNOWN (UNKNOWN needs reconciliation with the channel).",
	}, []string{"status"})
	// Pre-create each status so that rate() sees the first increment.
	for _, s := range []pay.Status{pay.StatusProcessing, pay.StatusSucceeded, pay.StatusFailed, pay.StatusUnknown} {
		vec.WithLabelValues(string(s))
	}
	m.Registry.MustRegister(vec)
	return countingOrders{OrderStore: store, outcomes: vec}
}

// countingOrders is the pay.OrderStore CountOrders returns.
type countingOrders struct {
	pay.OrderStore
	outcomes *prometheus.CounterVec
}

func (c countingOrders) Create(ctx context.Context, o *pay.Order) error {
	err := c.OrderStore.Create(ctx, o)
	if err == nil {
		c.outcomes.WithLabelValues(string(pay.StatusProcessing)).Inc()
	}
	return err
}

func (c countingOrders) Finish(ctx context.Context, o *pay.Order) error {
	err := c.OrderStore.Finish(ctx, o)
	if err == nil {
		c.outcomes.WithLabelValues(statusLabel(o.Status)).Inc()
	}
	return err
}

func (c countingOrders) MarkStaleUnknown(ctx context.Context, cutoff time.Time) (int64, error) {
	n, err := c.OrderStore.MarkStaleUnknown(ctx, cutoff)
	if n > 0 {
		c.outcomes.WithLabelValues(string(pay.StatusUnknown)).Add(float64(n))
	}
	return n, err
}

// statusLabel keeps the label bounded to the known states.
func statusLabel(s pay.Status) string {
	switch s {
	case pay.StatusProcessing, pay.StatusSucceeded, pay.StatusFailed, pay.StatusUnknown:
		return string(s)
	}
	return Other
}
