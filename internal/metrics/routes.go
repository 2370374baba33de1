package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/pay"
)

// NoChannel is the `to` label of a fallback from a candidate when every
// candidate refused the payment.
const NoChannel = "none"

// Routes counts routed payments for Prometheus. It implements
// pay.RouteObserver. Its bizType and channel labels come from the routes of
// the limits document (a payment is routed only by a route), so they are
// bounded by it.
type Routes struct {
	fallbacks *prometheus.CounterVec
	payments  *prometheus.CounterVec
	breakers  *prometheus.GaugeVec
}

// NewRoutes registers the routing metrics on m's registry:
// payserver_route_fallbacks_total{biz_type,from,to,reason},
// payserver_routed_payments_total{biz_type,channel} and
// payserver_channel_breaker_open{channel}.
func (m *Metrics) NewRoutes() *Routes {
	r := &Routes{
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payserver_route_fallbacks_total",
			Help: "Candidates routed payments skipped, by candidate (from), channel used (to; none when every candidate refused) and reason (limited, closed, unhealthy).",
		}, []string{"biz_type", "from", "to", "reason"}),
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payserver_routed_payments_total",
			Help: "Routed payments (POST /pay without a channel) sent to each channel.",
		}, []string{"biz_type", "channel"}),
		breakers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "payserver_channel_breaker_open",
			Help: "1 while a channel's health breaker is open (routed payments skip it as unhealthy), else 0; per instance.",
		}, []string{"channel"}),
	}
	m.Registry.MustRegister(r.fallbacks, r.payments, r.breakers)
	return r
}

// Routed implements pay.RouteObserver.
func (r *Routes) Routed(bizType, channel string, skipped []pay.RouteSkip) {
	r.payments.WithLabelValues(bizType, channel).Inc()
	for _, s := range skipped {
		r.fallbacks.WithLabelValues(bizType, s.Channel, channel, s.Reason).Inc()
	}
}

// Exhausted implements pay.RouteObserver.
func (r *Routes) Exhausted(bizType string, skipped []pay.RouteSkip) {
	for _, s := range skipped {
		r.fallbacks.WithLabelValues(bizType, s.Channel, NoChannel, s.Reason).Inc()
	}
}

// BreakerOpen sets the breaker gauge of channel.
func (r *Routes) BreakerOpen(channel string, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	r.breakers.WithLabelValues(channel).Set(v)
}
