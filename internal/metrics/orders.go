package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/pay"
)

// InstrumentOrders returns store with every recorded order outcome counted
// in payserver_order_outcomes_total{status}, and the store's three calls of
// a payment's path timed in payserver_order_store_seconds{kind}: get (every
// order read: the replay lookup first of all, and GET /pay/{requestId}, a
// claim's read-back, routing), create (the claim) and finish (the outcome),
// each as its caller waits for it, its batch's queueing and commit
// included. The kinds are those of payserver_db_order_calls_total.
// Each successful Finish counts its status (SUCCEEDED, FAILED or UNKNOWN),
// and MarkStaleUnknown counts the orders it turned UNKNOWN. Orders created
// (PROCESSING) are counted as status="PROCESSING". Other methods pass
// through; methods added to pay.OrderStore later pass through unchanged as
// well.
func (m *Metrics) InstrumentOrders(store pay.OrderStore) pay.OrderStore {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_order_outcomes_total",
		Help: "Order states recorded: PROCESSING when created, then SUCCEEDED, FAILED or UNKNOWN (UNKNOWN needs reconciliation with the channel).",
	}, []string{"status"})
	// Pre-create each status so that rate() sees the first increment.
	for _, s := range []pay.Status{pay.StatusProcessing, pay.StatusSucceeded, pay.StatusFailed, pay.StatusUnknown} {
		vec.WithLabelValues(string(s))
	}
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "payserver_order_store_seconds",
		Help:    "Latency of the order store's calls as their callers wait for them, by kind: get (order reads, the replay lookup first of all), create (claim), finish (outcome); batch queueing and commit included.",
		Buckets: prometheus.ExponentialBuckets(0.00025, 2.5, 12),
	}, []string{"kind"})
	m.Registry.MustRegister(vec, seconds)
	return instrumentedOrders{OrderStore: store, outcomes: vec,
		get: seconds.WithLabelValues("get"), create: seconds.WithLabelValues("create"),
		finish: seconds.WithLabelValues("finish")}
}

// instrumentedOrders is the pay.OrderStore InstrumentOrders returns.
type instrumentedOrders struct {
	pay.OrderStore
	outcomes            *prometheus.CounterVec
	get, create, finish prometheus.Observer
}

func (c instrumentedOrders) Get(ctx context.Context, requestID string) (*pay.Order, error) {
	start := time.Now()
	o, err := c.OrderStore.Get(ctx, requestID)
	c.get.Observe(time.Since(start).Seconds())
	return o, err
}

func (c instrumentedOrders) Create(ctx context.Context, o *pay.Order) error {
	start := time.Now()
	err := c.OrderStore.Create(ctx, o)
	c.create.Observe(time.Since(start).Seconds())
	if err == nil {
		c.outcomes.WithLabelValues(string(pay.StatusProcessing)).Inc()
	}
	return err
}

func (c instrumentedOrders) Finish(ctx context.Context, o *pay.Order) error {
	start := time.Now()
	err := c.OrderStore.Finish(ctx, o)
	c.finish.Observe(time.Since(start).Seconds())
	if err == nil {
		c.outcomes.WithLabelValues(statusLabel(o.Status)).Inc()
	}
	return err
}

func (c instrumentedOrders) MarkStaleUnknown(ctx context.Context, cutoff time.Time) (int64, error) {
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
