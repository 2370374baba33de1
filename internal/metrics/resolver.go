package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/pay"
)

// Resolver is pay.ResolveObserver on prometheus.
type Resolver struct {
	resolved   *prometheus.CounterVec
	calls      *prometheus.CounterVec
	unresolved prometheus.Gauge
	oldest     prometheus.Gauge
	discrepant *prometheus.CounterVec
}

var _ pay.ResolveObserver = (*Resolver)(nil)

// NewResolver registers the resolver's metrics on m's registry:
// payserver_order_resolutions_total{channel,by,state},
// payserver_resolver_calls_total{channel,op,result},
// payserver_orders_unresolved,
// payserver_orders_unresolved_oldest_seconds and
// payserver_channel_discrepancies_total{channel}, with a series at 0 for
// each of channels (so that the first discrepancy is an increase an alert
// sees).
func (m *Metrics) NewResolver(channels []string) *Resolver {
	r := &Resolver{
		resolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payserver_order_resolutions_total",
			Help: "UNKNOWN orders resolved with their channel, by who resolved them (query, notify, close) and the state they ended in (SUCCEEDED, FAILED, NOT_SENT).",
		}, []string{"channel", "by", "state"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payserver_resolver_calls_total",
			Help: "The resolver's calls to channels (op query or close) by result: the channel's outcome, LIMITED when the RESOLVE key refused the call, ERROR when no answer was learnt.",
		}, []string{"channel", "op", "result"}),
		unresolved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payserver_orders_unresolved",
			Help: "Orders whose outcome is UNKNOWN (read from the database every 15s; the same on every instance).",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payserver_orders_unresolved_oldest_seconds",
			Help: "Age of the oldest UNKNOWN order since its last update; 0 when none.",
		}),
	}
	r.discrepant = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_channel_discrepancies_total",
		Help: "Channel notifications that contradicted a final order (a payment closed NOT_SENT or declined reported paid, a paid one reported declined, a channel the payment was routed away from reporting an outcome): each one is a payment to reconcile with the channel.",
	}, []string{"channel"})
	for _, c := range channels {
		r.discrepant.WithLabelValues(c)
	}
	m.Registry.MustRegister(r.resolved, r.calls, r.unresolved, r.oldest, r.discrepant)
	return r
}

// Resolved implements pay.ResolveObserver.
func (r *Resolver) Resolved(channel, by string, to pay.State) {
	r.resolved.WithLabelValues(channel, by, string(to)).Inc()
}

// Queried implements pay.ResolveObserver.
func (r *Resolver) Queried(channel, op, result string) {
	r.calls.WithLabelValues(channel, op, result).Inc()
}

// Unresolved implements pay.ResolveObserver.
func (r *Resolver) Unresolved(count int64, oldest time.Duration) {
	r.unresolved.Set(float64(count))
	r.oldest.Set(oldest.Seconds())
}

// Discrepancy implements pay.ResolveObserver.
func (r *Resolver) Discrepancy(channel string) {
	r.discrepant.WithLabelValues(channel).Inc()
}
