package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/stats"
)

// quotaCollector exports the calendar windows' use and their forecasts at
// each scrape, from the Forecaster's last read. The key label is a key of
// the limits document in force (the Forecaster reads only those), so it is
// bounded.
type quotaCollector struct {
	forecasts  func() []stats.Forecast
	now        func() time.Time
	used       *prometheus.Desc
	limit      *prometheus.Desc
	exhaustion *prometheus.Desc
}

// WatchQuotas exports, for every calendar window in force (label key, rule
// such as "amount/day", and window: its ID, which tells two windows of
// one kind apart by cutoff, zone or currency):
//
//   - payserver_quota_used: what the window holds now (admissions, or
//     amount in minor units);
//   - payserver_quota_limit: its cap, in the same unit;
//   - payserver_quota_exhaustion_seconds: seconds until it runs out at the
//     current rate, 0 when it has; absent when it lasts until its period
//     ends.
//
// forecasts is (*stats.Forecaster).Forecasts.
func (m *Metrics) WatchQuotas(forecasts func() []stats.Forecast) {
	m.Registry.MustRegister(newQuotaCollector(forecasts, time.Now))
}

// newQuotaCollector returns the collector of WatchQuotas on the clock now.
func newQuotaCollector(forecasts func() []stats.Forecast, now func() time.Time) *quotaCollector {
	labels := []string{"key", "rule", "window"}
	return &quotaCollector{
		forecasts: forecasts,
		now:       now,
		used: prometheus.NewDesc("payserver_quota_used",
			"What a calendar window holds now: admissions, or amount in minor units (read every 30s from the shared store).", labels, nil),
		limit: prometheus.NewDesc("payserver_quota_limit",
			"A calendar window's cap: admissions, or amount in minor units.", labels, nil),
		exhaustion: prometheus.NewDesc("payserver_quota_exhaustion_seconds",
			"Seconds until a calendar window runs out at its current rate (0: it has); absent when it lasts until its period ends.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.limit
	ch <- c.exhaustion
}

// Collect implements prometheus.Collector.
func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, f := range c.forecasts() {
		lv := []string{f.Key.String(), f.Window.Name(), f.Window.ID()}
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(f.Used), lv...)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(f.Limit), lv...)
		if !f.ExhaustsAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.exhaustion, prometheus.GaugeValue, max(f.ExhaustsAt.Sub(now).Seconds(), 0), lv...)
		}
	}
}
