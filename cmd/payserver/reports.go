package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"payserver/internal/apperr"
	"payserver/internal/console"
	"payserver/internal/httpapi"
	"payserver/internal/ratelimit"
	"payserver/internal/repo"
	"payserver/internal/stats"
)

// StatsConfig tunes the channel-limit stats behind the reports.
type StatsConfig struct {
	// FlushInterval is how often each instance writes its counts to the
	// channel_limit_stats table. Default 5s.
	FlushInterval time.Duration `yaml:"flushInterval"` // settings file only
}

// statsDrainTimeout bounds the final stats flush at shutdown.
const statsDrainTimeout = 10 * time.Second

// statsWiring is the part of Main that serves the reports.
type statsWiring struct {
	agg   *stats.Aggregator
	store *repo.ChannelStats
	// forecaster reads the calendar windows' use for the dashboard's and
	// the metrics' time-to-exhaustion forecasts.
	forecaster *stats.Forecaster
}

// openStats builds the stats aggregator, which the limiter reports every
// decision to, registers its metrics and starts its flush loop. It runs
// after the database is open and before the limiter is built.
func (m *Main) openStats(ctx context.Context) error {
	store, err := repo.NewChannelStats(m.db)
	if err != nil {
		return err
	}
	agg, err := stats.NewAggregator(stats.AggregatorOptions{
		Store:     store,
		Amounts:   store,
		Merchants: store,
		Config: func() *ratelimit.Config {
			if m.limiter == nil {
				return nil
			}
			return m.limiter.Config()
		},
		FlushInterval: m.cfg.Stats.FlushInterval,
		Logger:        m.log.With("component", "stats"),
	})
	if err != nil {
		return err
	}
	m.stats = statsWiring{agg: agg, store: store}
	m.metrics.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "payserver_stats_pending_rows", Help: "Channel-limit stats rows (minute × key) held in memory, not yet written to the database.",
		}, func() float64 { return float64(agg.Stats().Pending) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "payserver_stats_flushes_total", Help: "Channel-limit stats flushes that wrote rows to the database.",
		}, func() float64 { return float64(agg.Stats().Flushes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "payserver_stats_flush_failures_total", Help: "Channel-limit stats flushes that failed; their counts were kept and retried.",
		}, func() float64 { return float64(agg.Stats().FlushFailures) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "payserver_stats_rows_written_total", Help: "Channel-limit stats rows upserted into the database.",
		}, func() float64 { return float64(agg.Stats().RowsWritten) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "payserver_stats_dropped_events_total", Help: "Limiter events not counted in the stats because the in-memory buffer was full (the database was down too long).",
		}, func() float64 { return float64(agg.Stats().DroppedEvents) }),
	)
	m.goBackground(func() { agg.Run(ctx) })
	return nil
}

// startForecaster starts reading the calendar windows' use every 30s, for
// the time-to-exhaustion forecasts of the dashboard and of
// payserver_quota_exhaustion_seconds. It runs once the limiter is built.
func (m *Main) startForecaster(ctx context.Context) error {
	f, err := stats.NewForecaster(stats.ForecasterOptions{Source: m.limiter, Logger: m.log.With("component", "forecast")})
	if err != nil {
		return err
	}
	m.stats.forecaster = f
	m.metrics.WatchQuotas(f.Forecasts)
	m.goBackground(func() { f.Run(ctx) })
	return nil
}

// withAdmin adds to opts the admin routes beside the API: the console
// (the dashboard, its what-if page and the reports), and the limits
// history, the learned limits reset and what-if.
func (m *Main) withAdmin(opts httpapi.Options) (httpapi.Options, error) {
	history, err := repo.NewLimitHistory(m.db, instanceName(m.cfg.HTTPAddr))
	if err != nil {
		return opts, err
	}
	reporter, err := stats.NewReporter(stats.ReporterOptions{Reader: m.stats.store, History: history, Flusher: m.stats.agg, Amounts: m.stats.store,
		Merchants: m.stats.store, InProgress: m.stats.agg})
	if err != nil {
		return opts, err
	}
	routeReports, err := m.routeReports()
	if err != nil {
		return opts, err
	}
	whatIf, err := m.whatIfOptions()
	if err != nil {
		return opts, err
	}
	c, err := console.New(console.Options{
		Reports:          reporter,
		Usage:            m.limiter,
		Limits:           limitsView{m.limiter, m.manager},
		Logger:           m.log.With("component", "reports"),
		Callers:          m.api.tally,
		CallersSince:     m.api.started,
		Routes:           routeReports,
		Quotas:           m.stats.forecaster.Forecasts,
		Unresolved:       m.orders.UnresolvedStats,
		OldestUnresolved: oldestUnresolved(m.orders),
		Discrepancies:    m.orders.Discrepancies,
		Admissions:       m.orders,
		Learned:          m.limiter,
		Outage:           m.outageView(),
		WhatIf:           &whatIf,
	})
	if err != nil {
		return opts, err
	}
	historyRoutes, err := httpapi.LimitsHistoryRoutes(history, m.log.With("component", "limits-history"))
	if err != nil {
		return opts, err
	}
	resetRoutes, err := httpapi.LearnedResetRoutes(httpapi.LearnedResetOptions{
		Limits: m.limiter, History: history, Logger: m.log.With("component", "learned-limits"),
	})
	if err != nil {
		return opts, err
	}
	opts.Admin = append(opts.Admin, historyRoutes, resetRoutes, httpapi.WhatIfRoute(whatIf))
	opts.Console = c
	return opts, nil
}

// drainStats writes the pending stats at shutdown, once the HTTP server
// and the background loops have stopped and before the database closes.
func (m *Main) drainStats() error {
	if m.stats.agg == nil || m.db == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsDrainTimeout)
	defer cancel()
	if err := m.stats.agg.Drain(ctx); err != nil {
		return fmt.Errorf("final stats flush: %w", err)
	}
	return nil
}

const reportUsage = `usage: payserver report [--from TIME] [--to TIME] [--bizType CODE] [--channel CODE]
                        [--granularity minute|hour|day] [--format table|csv|json]

Prints the channel-limit report from the database that payserver's
configuration (PAYSERVER_CONFIG, PAYSERVER_MYSQL_DSN, PAYSERVER_DATA_DIR, ...)
points at: the same report as GET /reports/channel-limits, with the same
times. TIME is RFC 3339 (2026-03-01T10:00:00Z), "now", or a negative
duration from now ("-1h"); --to defaults to now and --from to an hour
before --to. Counts an instance has not flushed yet (at most one flush
interval) are not included.
`

// reportCmd runs `payserver report`.
func reportCmd(args []string, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var from, to optionalFlag
	fs.Var(&from, "from", "")
	fs.Var(&to, "to", "")
	biz := fs.String("bizType", "", "")
	channel := fs.String("channel", "", "")
	gran := fs.String("granularity", "", "")
	format := fs.String("format", "table", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, reportUsage)
			return 0
		}
		fmt.Fprintf(stderr, "payserver report: %v\n%s", err, reportUsage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "payserver report: unexpected argument %q\n%s", fs.Arg(0), reportUsage)
		return 2
	}
	if *format != "table" && *format != "csv" && *format != "json" {
		fmt.Fprintf(stderr, "payserver report: --format must be table, csv or json\n")
		return 2
	}
	v := url.Values{}
	for name, val := range map[string]string{"bizType": *biz, "channel": *channel, "granularity": *gran} {
		if val != "" {
			v.Set(name, val)
		}
	}
	for name, f := range map[string]optionalFlag{"from": from, "to": to} {
		if f.set {
			v.Set(name, f.value) // given empty, it is refused as over HTTP
		}
	}
	q, err := stats.ParseQuery(v, time.Now())
	if err != nil {
		printFieldErrors(stderr, err)
		return 2
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		fmt.Fprintf(stderr, "payserver report: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, code := openCommandDB(ctx, "report", cfg, stderr)
	if db == nil {
		return code
	}
	defer func() { _ = repo.Close(db) }()
	store, err := repo.NewChannelStats(db)
	if err != nil {
		fmt.Fprintf(stderr, "payserver report: %v\n", err)
		return 1
	}
	history, err := repo.NewLimitHistory(db, "")
	if err != nil {
		fmt.Fprintf(stderr, "payserver report: %v\n", err)
		return 1
	}
	reporter, err := stats.NewReporter(stats.ReporterOptions{Reader: store, History: history})
	if err != nil {
		fmt.Fprintf(stderr, "payserver report: %v\n", err)
		return 1
	}
	if *format == "csv" {
		// Written as the rows are read: its memory does not grow with them.
		if err := reporter.Stream(ctx, q, stats.NewCSVWriter(stdout)); err != nil {
			fmt.Fprintf(stderr, "payserver report: %v\n(has `payserver migrate` run on this database?)\n", err)
			return 1
		}
		return 0
	}
	rep, err := reporter.Report(ctx, q)
	if err != nil {
		fmt.Fprintf(stderr, "payserver report: %v\n(has `payserver migrate` run on this database?)\n", err)
		return 1
	}
	switch *format {
	case "json":
		err = writeJSON(stdout, rep)
	default:
		err = stats.WriteTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "payserver report: %v\n", err)
		return 1
	}
	return 0
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// optionalFlag is a string flag that knows whether it was given.
type optionalFlag struct {
	value string
	set   bool
}

func (f *optionalFlag) String() string { return f.value }

func (f *optionalFlag) Set(s string) error {
	f.value, f.set = s, true
	return nil
}

// printFieldErrors prints an INVALID_REQUEST error one flag per line.
func printFieldErrors(w io.Writer, err error) {
	var e *apperr.Error
	if errors.As(err, &e) {
		if fields, ok := e.Details["fields"].([]apperr.FieldError); ok {
			for _, f := range fields {
				fmt.Fprintf(w, "payserver report: --%s %s\n", f.Field, f.Reason)
			}
			return
		}
	}
	fmt.Fprintf(w, "payserver report: %v\n", err)
}

// oldestUnresolved lists the oldest UNKNOWN orders of orders for the
// dashboard.
func oldestUnresolved(orders *repo.Orders) func(ctx context.Context, limit int) ([]console.UnresolvedOrder, error) {
	return func(ctx context.Context, limit int) ([]console.UnresolvedOrder, error) {
		list, err := orders.OldestUnresolved(ctx, limit)
		out := make([]console.UnresolvedOrder, len(list))
		for i, u := range list {
			out[i] = console.UnresolvedOrder{RequestID: u.RequestID, Channel: u.Channel, Since: u.Since, Next: u.Next,
				LeasedUntil: u.LeasedUntil, Close: u.Close, Attempts: u.Attempts}
		}
		return out, err
	}
}
