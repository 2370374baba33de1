package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/limitapi"
	"payserver/internal/ratelimit"
)

// LimitsAPI holds the metrics of the limits service (/v1/limits and gRPC)
// and of waiting for a slot. It implements limitapi.Observer and
// ratelimit.WaitObserver. The client label is a token name from the
// configuration or limitapi.PayCaller, so it is bounded.
type LimitsAPI struct {
	calls       *prometheus.CounterVec
	waits       *prometheus.CounterVec
	waitSeconds *prometheus.HistogramVec
	m           *Metrics
}

// NewLimitsAPI registers the limits-service metrics on m's registry.
func (m *Metrics) NewLimitsAPI() *LimitsAPI {
	a := &LimitsAPI{m: m}
	a.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_limit_calls_total",
		Help: "Limiter operations by calling client (token name, or \"pay\" for POST /pay's own), op (acquire, release, peek) and result (admitted, limited, released, not_held, refused, peeked, failed).",
	}, []string{"client", "op", "result"})
	a.waits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_limiter_waits_total",
		Help: "Refused requests that asked to wait (maxWaitMs), by how the wait ended (admitted, timed_out, queue_full, cancelled, failed).",
	}, []string{"biz_type", "channel", "outcome"})
	a.waitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "payserver_limiter_wait_seconds",
		Help:    "How long refused requests waited for a slot, by outcome.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"outcome"})
	m.Registry.MustRegister(a.calls, a.waits, a.waitSeconds)
	return a
}

// WatchWaiters exports how many requests wait for a slot now; total is
// (*ratelimit.Limiter).Waiters.
func (a *LimitsAPI) WatchWaiters(total func() int) {
	a.m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "payserver_limiter_waiting",
		Help: "Requests waiting for a slot (maxWaitMs) now, over every key.",
	}, func() float64 { return float64(total()) }))
}

// Called implements limitapi.Observer.
func (a *LimitsAPI) Called(client string, op limitapi.Op, _ ratelimit.Key, r limitapi.Result) {
	a.calls.WithLabelValues(client, string(op), string(r)).Inc()
}

// Waited implements ratelimit.WaitObserver.
func (a *LimitsAPI) Waited(k ratelimit.Key, o ratelimit.WaitOutcome, waited time.Duration) {
	biz, ch := a.m.labels(k)
	a.waits.WithLabelValues(biz, ch, string(o)).Inc()
	a.waitSeconds.WithLabelValues(string(o)).Observe(waited.Seconds())
}
