package metrics

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The gauges in this file are what deploy/prometheus/alerts.yml alerts on
// besides the decision counters: the state of each dependency, of the limits
// in force and of the Nacos link, read when Prometheus scrapes.

// DependencyCheckTimeout bounds each dependency check made during a scrape.
const DependencyCheckTimeout = time.Second

// WatchLimiter exports the limiter's live state: the fraction of each limit
// it enforces when deciding locally (share is (*ratelimit.Limiter).LocalShare)
// and whether checks currently bypass Redis (degraded is
// (*ratelimit.Limiter).Degraded).
func (m *Metrics) WatchLimiter(share func() float64, degraded func() bool) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "payserver_limiter_local_share",
			Help: "Fraction of each limit this instance enforces when it decides without Redis (1/N of the live instance count).",
		}, share),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "payserver_limiter_degraded",
			Help: "1 while limiter checks bypass Redis (it is unreachable or its breaker is open), else 0.",
		}, func() float64 { return boolValue(degraded()) }),
	)
}

// WatchDependencies exports payserver_dependency_up{dependency} for each named
// check: 1 when the check succeeds within DependencyCheckTimeout at scrape
// time, else 0. Checks run concurrently so one hanging dependency does not
// delay the others.
func (m *Metrics) WatchDependencies(checks map[string]func(context.Context) error) {
	desc := prometheus.NewDesc("payserver_dependency_up",
		"1 when the dependency (database, redis, limits) answered its readiness check at scrape time, else 0.",
		[]string{"dependency"}, nil)
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	m.Registry.MustRegister(collectorFunc{descs: []*prometheus.Desc{desc}, collect: func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), DependencyCheckTimeout)
		defer cancel()
		up := make([]chan bool, len(names))
		for i, name := range names {
			up[i] = make(chan bool, 1)
			go func(check func(context.Context) error, out chan<- bool) { out <- check(ctx) == nil }(checks[name], up[i])
		}
		for i, name := range names {
			ok := false
			select {
			case ok = <-up[i]: // finished already (even if the deadline passed since)
			default:
				select {
				case ok = <-up[i]:
				case <-ctx.Done():
				}
			}
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, boolValue(ok), name)
		}
	}})
}

// LimitsState is what the limits gauges report; see WatchLimits.
type LimitsState struct {
	// Loaded is true once a limits document is in force.
	Loaded bool
	// RefusedInForce is true when the latest document the source delivered
	// was refused, so the last good one (or none) is in force.
	RefusedInForce bool
}

// WatchLimits exports payserver_limits_loaded and
// payserver_limits_refused_in_force from state, read at scrape time.
func (m *Metrics) WatchLimits(state func() LimitsState) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "payserver_limits_loaded",
			Help: "1 once a limits document is in force, else 0.",
		}, func() float64 { return boolValue(state().Loaded) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "payserver_limits_refused_in_force",
			Help: "1 while the latest limits document from the source is refused and the last good one stays in force, else 0.",
		}, func() float64 { return boolValue(state().RefusedInForce) }),
	)
}

// NacosGauges are the gauges of the Nacos naming link. Its methods are the
// hooks configcenter.NamingOptions takes.
type NacosGauges struct {
	contact prometheus.Gauge
	live    prometheus.Gauge
}

// WatchNacos registers the Nacos gauges and returns them. Call it only
// when Nacos is the limits source, so that the stale-source alert never
// fires on an instance that reads a file.
func (m *Metrics) WatchNacos() *NacosGauges {
	g := &NacosGauges{
		contact: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payserver_nacos_last_contact_timestamp_seconds",
			Help: "Unix time at which this instance last found a live connection to a Nacos server (0 = never).",
		}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payserver_nacos_live_instances",
			Help: "Healthy payserver instances registered in Nacos naming, as this instance last saw them (0 = not known yet).",
		}),
	}
	m.Registry.MustRegister(g.contact, g.live)
	return g
}

// Contacted records a moment at which Nacos answered.
func (g *NacosGauges) Contacted(at time.Time) {
	g.contact.Set(float64(at.UnixNano()) / 1e9)
}

// LiveInstances records the live instance count.
func (g *NacosGauges) LiveInstances(n int) { g.live.Set(float64(n)) }

// WatchRedisPersistence exports payserver_redis_persistence: 1 when Redis
// keeps its data across a restart (an append-only file or RDB snapshots),
// 0 when it keeps none (a restart forgets the calendar caps). read answers
// ok false while the settings are unknown (CONFIG refused or renamed, or
// Redis down): the gauge is then absent, not guessed.
func (m *Metrics) WatchRedisPersistence(read func() (value float64, ok bool)) {
	m.Registry.MustRegister(persistenceCollector{read: read, desc: prometheus.NewDesc("payserver_redis_persistence",
		"1 when Redis keeps its data across a restart (appendonly yes or a save schedule), 0 when it keeps none, so a Redis restart forgets the calendar caps; absent while unknown.", nil, nil)})
}

type persistenceCollector struct {
	read func() (float64, bool)
	desc *prometheus.Desc
}

func (c persistenceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c persistenceCollector) Collect(ch chan<- prometheus.Metric) {
	if v, ok := c.read(); ok {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
