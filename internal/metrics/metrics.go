// Package metrics exposes payserver's Prometheus metrics. Label values are
// bounded: bizType and channel labels carry only keys named in the limits
// document in force; anything else is "other".
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"payserver/internal/ratelimit"
)

// Other replaces label values outside the configured set.
const Other = "other"

// Metrics holds the collectors. It implements ratelimit.Observer.
type Metrics struct {
	Registry *prometheus.Registry

	decisions    *prometheus.CounterVec
	checkSeconds prometheus.Histogram
	storeErrors  *prometheus.CounterVec
	degraded     *prometheus.CounterVec
	released     *prometheus.CounterVec
	configEvents *prometheus.CounterVec
	httpRequests *prometheus.CounterVec
	httpSeconds  *prometheus.HistogramVec
	utilisation  *prometheus.GaugeVec

	known atomic.Pointer[map[ratelimit.Key]bool]
}

// New returns metrics registered on a fresh registry, with Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_limiter_decisions_total",
		Help: "Limiter decisions by bizType, channel, result (admitted, limited, shadow_limited, conflict, unavailable) and source (redis, near_cache, local, fail_open, closed, unlimited).",
	}, []string{"biz_type", "channel", "result", "source"})
	m.checkSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "payserver_limiter_check_seconds",
		Help:    "Latency of one limiter check.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
	})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_limiter_redis_errors_total",
		Help: "Failed limiter calls to Redis.",
	}, []string{"biz_type", "channel"})
	m.degraded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_limiter_degraded_total",
		Help: "Limiter decisions taken without Redis, by source (local, fail_open).",
	}, []string{"biz_type", "channel", "source"})
	m.released = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_limiter_released_total",
		Help: "Limiter slots given back because the channel was never called.",
	}, []string{"biz_type", "channel"})
	m.configEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_config_events_total",
		Help: "Limits documents applied or refused, by source (file, nacos).",
	}, []string{"source", "event"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payserver_http_requests_total",
		Help: "HTTP requests by route template, method and status.",
	}, []string{"route", "method", "status"})
	m.httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "payserver_http_request_seconds",
		Help:    "HTTP request latency by route template.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
	}, []string{"route"})
	m.utilisation = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "payserver_limiter_utilisation_ratio",
		Help: "Occupancy ÷ limit of the binding window at the key's latest decision (1 = full), for keys named in the limits document.",
	}, []string{"biz_type", "channel"})
	m.Registry.MustRegister(m.decisions, m.checkSeconds, m.storeErrors, m.degraded, m.released,
		m.configEvents, m.httpRequests, m.httpSeconds, m.utilisation,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	empty := map[ratelimit.Key]bool{}
	m.known.Store(&empty)
	return m
}

// WatchCoalescer exports the coalescer's totals: script calls sent and the
// checks they decided (their ratio is the mean batch size). stats is
// (*redisstore.Store).CoalesceStats.
func (m *Metrics) WatchCoalescer(stats func() (calls, checks uint64)) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "payserver_limiter_redis_calls_total",
			Help: "Limiter script calls sent to Redis by the coalescer (one per batch of a key's concurrent checks).",
		}, func() float64 { c, _ := stats(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "payserver_limiter_redis_checks_total",
			Help: "Limiter checks decided by those calls; checks ÷ calls is the mean batch size.",
		}, func() float64 { _, n := stats(); return float64(n) }),
	)
}

// WatchOrderBatches exports what group commit did per kind of order
// statement (create, finish, get): calls that reached the database, and
// how many of them shared a statement. stats returns, per kind, calls and
// batched calls.
func (m *Metrics) WatchOrderBatches(stats func() map[string][2]int64) {
	calls := prometheus.NewDesc("payserver_db_order_calls_total",
		"Order store calls that reached the database, by kind (create, finish, get).", []string{"kind"}, nil)
	batched := prometheus.NewDesc("payserver_db_order_batched_calls_total",
		"Of those, the calls that shared a statement with others (group commit).", []string{"kind"}, nil)
	m.Registry.MustRegister(collectorFunc{descs: []*prometheus.Desc{calls, batched}, collect: func(ch chan<- prometheus.Metric) {
		for kind, v := range stats() {
			ch <- prometheus.MustNewConstMetric(calls, prometheus.CounterValue, float64(v[0]), kind)
			ch <- prometheus.MustNewConstMetric(batched, prometheus.CounterValue, float64(v[1]), kind)
		}
	}})
}

// collectorFunc is a prometheus.Collector from a function.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// SetKeys makes the keys of cfg the label values that are kept.
func (m *Metrics) SetKeys(cfg *ratelimit.Config) {
	known := make(map[ratelimit.Key]bool, len(cfg.Rules))
	for k := range cfg.Rules {
		known[k] = true
	}
	old := m.known.Swap(&known)
	for k := range *old {
		if !known[k] {
			m.utilisation.DeleteLabelValues(k.BizType, k.Channel)
		}
	}
}

func (m *Metrics) labels(k ratelimit.Key) (string, string) {
	if (*m.known.Load())[k] {
		return k.BizType, k.Channel
	}
	return Other, Other
}

// Decided implements ratelimit.Observer.
func (m *Metrics) Decided(d ratelimit.Decision, elapsed time.Duration) {
	biz, ch := m.labels(d.Key)
	result := "admitted"
	switch {
	case d.Shadow:
		result = "shadow_limited"
	case d.Unknown:
		result = "unavailable" // the store's answer was lost: a 503, not a full window
	case d.Conflict:
		result = "conflict" // held for another amount: a 409
	case !d.Allowed:
		result = "limited"
	}
	m.decisions.WithLabelValues(biz, ch, result, string(d.Source)).Inc()
	m.checkSeconds.Observe(elapsed.Seconds())
	if biz != Other && d.Limit > 0 {
		m.utilisation.WithLabelValues(biz, ch).Set(float64(d.Count) / float64(d.Limit))
	}
	if d.Degraded() && !d.Unknown {
		// A lost answer decided nothing in process: it is counted above
		// as unavailable, under every policy.
		m.degraded.WithLabelValues(biz, ch, string(d.Source)).Inc()
	}
}

// Released implements ratelimit.Observer.
func (m *Metrics) Released(k ratelimit.Key) {
	biz, ch := m.labels(k)
	m.released.WithLabelValues(biz, ch).Inc()
}

// StoreFailed implements ratelimit.Observer.
func (m *Metrics) StoreFailed(k ratelimit.Key, _ error) {
	biz, ch := m.labels(k)
	m.storeErrors.WithLabelValues(biz, ch).Inc()
}

// ConfigApplied counts an applied limits document.
func (m *Metrics) ConfigApplied(source string) {
	m.configEvents.WithLabelValues(source, "applied").Inc()
}

// ConfigRefused counts a refused limits document.
func (m *Metrics) ConfigRefused(source string) {
	m.configEvents.WithLabelValues(source, "refused").Inc()
}

// HTTP counts one answered request.
func (m *Metrics) HTTP(route string, status int, method string, seconds float64) {
	switch method {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
	default:
		method = Other
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpSeconds.WithLabelValues(route).Observe(seconds)
}
