package console

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/configcenter"
	"payserver/internal/httpapi"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// ReportService builds channel-limit and channel-amount reports.
// *stats.Reporter implements it.
type ReportService interface {
	Report(ctx context.Context, q stats.Query) (stats.Report, error)
	// Stream is Report written to w as it is read (GET
	// /reports/channel-limits).
	Stream(ctx context.Context, q stats.Query, w stats.ReportWriter) error
	Amounts(ctx context.Context, q stats.Query) (stats.AmountReport, error)
	// Merchants is the channel-limit report grouped by merchant
	// (groupBy=merchant, and the dashboard's top merchants).
	Merchants(ctx context.Context, q stats.Query) (stats.MerchantReport, error)
	// Changes lists the limit changes of q's buckets for every key, with
	// traffic or without (the dashboard's "limit changed" badges).
	Changes(ctx context.Context, q stats.Query) ([]stats.KeyChange, error)
}

// Options wires the console. Reports, Usage, Limits and Logger are
// required; every other field adds a part of the console when set.
type Options struct {
	Reports ReportService
	Usage   httpapi.UsageSource
	// Limits tells whether the limiter is degraded, and (for the dashboard)
	// which document is in force.
	Limits httpapi.LimitsView
	Logger *slog.Logger
	// Now is the clock of the live views. Default time.Now.
	Now func() time.Time
	// Callers, when set, adds the limiter's operations per caller (client
	// token names and POST /pay) to the dashboard.
	Callers CallerTally
	// Routes, when set, adds each route's preferred channel and fallbacks
	// per minute to the dashboard (route_reports.go).
	Routes *RouteReports
	// Quotas, when set, adds each calendar window's use and its
	// time-to-exhaustion forecast to the dashboard.
	// (*stats.Forecaster).Forecasts fits.
	Quotas func() []stats.Forecast
	// Unresolved, when set, adds the orders whose outcome is UNKNOWN (how
	// many, and the last update of the oldest) to the dashboard.
	Unresolved func(ctx context.Context) (int64, time.Time, error)
	// OldestUnresolved, when set, lists up to limit of those orders, the
	// oldest first, with the resolver's next step.
	OldestUnresolved func(ctx context.Context, limit int) ([]UnresolvedOrder, error)
	// Discrepancies, when set, lists up to limit orders a channel
	// contradicted once they were final, the newest first: GET
	// /reports/discrepancies and the dashboard.
	Discrepancies func(ctx context.Context, limit int) ([]*pay.Order, error)
	// Learned, when set, marks the dashboard's windows whose limit is
	// learned from the channel, as GET /limits shows them.
	Learned httpapi.LearnedSource
	// Outage, when set, adds to the calendar quotas what their use may
	// leave out after an outage, as GET /limits shows it.
	Outage httpapi.OutageView
	// Admissions, when set, serves GET /reports/admissions.
	// *repo.Orders implements it.
	Admissions AdmissionRows
	// CallersSince is when Callers began counting, which GET
	// /reports/limit-callers (served with Callers) says.
	CallersSince time.Time
	// WhatIf, when set, serves the dashboard's what-if page, which asks
	// the question of POST /limits/what-if from a form.
	WhatIf *httpapi.WhatIfOptions
}

type reports struct {
	opts Options
	log  *slog.Logger
}

func newReports(opts Options) (*reports, error) {
	if opts.Reports == nil || opts.Usage == nil || opts.Limits == nil || opts.Logger == nil {
		return nil, errors.New("console: reports need a report service, a usage source, a limits view and a logger")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &reports{opts: opts, log: opts.Logger}, nil
}

// getReport answers GET /reports/channel-limits: a row per key and
// bucket, or with groupBy=merchant per merchant, key and bucket.
func (r *reports) getReport(c *gin.Context) {
	q, err := stats.ParseQuery(c.Request.URL.Query(), r.opts.Now())
	if err != nil {
		httpapi.WriteError(c, r.log, err, "")
		return
	}
	if q.GroupBy != stats.GroupByMerchant {
		r.streamReport(c, q)
		return
	}
	m, err := r.opts.Reports.Merchants(c.Request.Context(), q)
	if err != nil {
		httpapi.WriteError(c, r.log, httpapi.DatabaseDown(err, "the stats database is unavailable"), "")
		return
	}
	r.answer(c, q, "channel-merchants-", m, func(w io.Writer) error { return stats.WriteMerchantsCSV(w, m) })
}

// answer answers v, a whole report of q, as JSON, or as CSV written by
// csv and offered as a file named with prefix.
func (r *reports) answer(c *gin.Context, q stats.Query, prefix string, v any, csv func(io.Writer) error) {
	c.Header("Cache-Control", "no-store")
	if q.Format != stats.FormatCSV {
		httpapi.WriteJSON(c, r.log, http.StatusOK, v)
		return
	}
	var buf bytes.Buffer
	if err := csv(&buf); err != nil {
		httpapi.WriteError(c, r.log, err, "")
		return
	}
	c.Header("Content-Disposition", `attachment; filename="`+reportFile(prefix, q)+`"`)
	c.Data(http.StatusOK, "text/csv; charset=utf-8", buf.Bytes())
}

// reportFile is the file name a CSV report of q is offered under.
func reportFile(prefix string, q stats.Query) string {
	return prefix + q.From.Format("20060102T1504Z") + "-" + string(q.Granularity) + ".csv"
}

// streamReport answers the channel-limits report of q row by row as the
// database returns them, in JSON or CSV, holding none of them: its memory
// does not grow with its rows. Until the first byte is written an error is
// answered as usual; after it, the connection is cut (http.ErrAbortHandler)
// so that a client never takes a report cut short for a whole one.
func (r *reports) streamReport(c *gin.Context, q stats.Query) {
	out := &startedWriter{c: c, contentType: "application/json; charset=utf-8"}
	w := stats.NewJSONWriter(out)
	if q.Format == stats.FormatCSV {
		out.contentType, out.file = "text/csv; charset=utf-8", reportFile("channel-limits-", q)
		w = stats.NewCSVWriter(out)
	}
	err := r.opts.Reports.Stream(c.Request.Context(), q, w)
	if err == nil {
		return
	}
	if !out.started {
		httpapi.WriteError(c, r.log, httpapi.DatabaseDown(err, "the stats database is unavailable"), "")
		return
	}
	r.log.Error("channel-limits report cut short", "err", err)
	panic(http.ErrAbortHandler)
}

// startedWriter writes a 200 answer's headers before its first byte.
type startedWriter struct {
	c           *gin.Context
	contentType string
	file        string // a CSV's file name; "" for JSON
	started     bool
}

func (w *startedWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.started = true
		h := w.c.Writer.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Type", w.contentType)
		if w.file != "" {
			h.Set("Content-Disposition", `attachment; filename="`+w.file+`"`)
		}
		w.c.Writer.WriteHeader(http.StatusOK)
	}
	return w.c.Writer.Write(p)
}

// getAmounts answers GET /reports/channel-amounts: the amounts the limiter
// admitted and refused per channel and currency. It takes the parameters of
// the channel-limits report but bizType, and answers JSON or CSV.
func (r *reports) getAmounts(c *gin.Context) {
	q, err := stats.ParseQuery(c.Request.URL.Query(), r.opts.Now())
	if err == nil {
		var bad []apperr.FieldError
		if q.BizType != "" {
			bad = append(bad, apperr.FieldError{Field: "bizType", Reason: "is not a parameter of this report: amounts are counted per channel"})
		}
		if len(bad) > 0 {
			err = apperr.Invalid(bad...)
		}
	}
	if err != nil {
		httpapi.WriteError(c, r.log, err, "")
		return
	}
	rep, err := r.opts.Reports.Amounts(c.Request.Context(), q)
	if err != nil {
		httpapi.WriteError(c, r.log, httpapi.DatabaseDown(err, "the stats database is unavailable"), "")
		return
	}
	r.answer(c, q, "channel-amounts-", rep, func(w io.Writer) error { return stats.WriteAmountsCSV(w, rep) })
}

// windowUsage is one window of a key, live.
type windowUsage struct {
	httpapi.WindowJSON
	// Count is the window's occupancy (admissions, or amount in minor
	// units); nil when it could not be read.
	Count *int64 `json:"count"`
	// CountMajor is Count in major units of the window's currency, on an
	// amount window with a currency whose occupancy was read.
	CountMajor *string `json:"countMajor,omitempty"`
	// Utilization is Count / Limit (1 for a closed window); nil when unread.
	Utilization *float64 `json:"utilization"`
}

// keyUsage is the live view of one configured key.
type keyUsage struct {
	Key       string        `json:"key"`
	BizType   string        `json:"bizType"`
	Channel   string        `json:"channel"`
	Rule      string        `json:"rule"`
	Unlimited bool          `json:"unlimited"`
	Shadow    bool          `json:"shadow"`
	Closed    bool          `json:"closed"`
	Windows   []windowUsage `json:"windows"`
	// Utilization is the highest of the windows' (0 for an unlimited key);
	// nil when the occupancy could not be read.
	Utilization *float64 `json:"utilization"`
	// Binding is the index in Windows of the most utilised window, or -1.
	Binding int `json:"binding"`
	// Error says why the occupancy could not be read; "" when it was.
	Error string `json:"error"`
}

type usageReport struct {
	At              time.Time  `json:"at"`
	LimiterDegraded bool       `json:"limiterDegraded"`
	Keys            []keyUsage `json:"keys"`
	// Total counts every configured key; Next is the after of the next
	// page, nil on the last page and when every key is listed.
	Total int     `json:"total"`
	Next  *string `json:"next"`
}

// getUsage answers GET /channels/usage: every configured key, or with
// limit or after one page of them, as GET /limits pages (limitsPage).
func (r *reports) getUsage(c *gin.Context) {
	page, err := httpapi.ParseLimitsPage(c.Request.URL.Query())
	if err != nil {
		httpapi.WriteError(c, r.log, err, "")
		return
	}
	c.Header("Cache-Control", "no-store")
	httpapi.WriteJSON(c, r.log, http.StatusOK, r.usage(c.Request.Context(), page))
}

// usage reads the occupancy of page's configured keys within usageTimeout;
// only those keys are read from the limiter's store. A key whose read
// fails carries the error; the others are still shown.
func (r *reports) usage(ctx context.Context, page httpapi.LimitsPage) usageReport {
	cfg := r.opts.Usage.Config()
	var all []ratelimit.Key
	if cfg != nil {
		all = make([]ratelimit.Key, 0, len(cfg.Rules))
		for k := range cfg.Rules {
			all = append(all, k)
		}
		httpapi.SortKeys(all)
	}
	keys, next := page.Of(all)
	out := r.usageOf(ctx, cfg, keys)
	out.Total, out.Next = len(all), next
	return out
}

// usageOf reads the occupancy of keys (configured in cfg), in their order.
// A key whose read fails carries the error; the others are still shown.
func (r *reports) usageOf(ctx context.Context, cfg *ratelimit.Config, keys []ratelimit.Key) usageReport {
	out := usageReport{At: r.opts.Now().UTC(), LimiterDegraded: r.opts.Limits.Degraded(), Keys: []keyUsage{}}
	if cfg == nil || len(keys) == 0 {
		return out
	}
	reads := httpapi.ReadUsage(ctx, r.opts.Usage, keys)
	out.Keys = make([]keyUsage, len(keys))
	failed := 0
	for i, k := range keys {
		if out.Keys[i] = keyUsageOf(k, reads[i]); reads[i].Err != nil {
			if failed == 0 {
				r.log.Warn("could not read window occupancy", "key", k.String(), "err", reads[i].Err)
			}
			failed++
		}
	}
	if failed > 1 {
		r.log.Warn("could not read the window occupancy of more keys", "keys", failed-1)
	}
	return out
}

// keyUsageOf describes key k's occupancy as read.
func keyUsageOf(k ratelimit.Key, read ratelimit.KeyUsage) keyUsage {
	rule := read.Rule
	u := keyUsage{
		Key: k.String(), BizType: k.BizType, Channel: k.Channel, Rule: configcenter.DescribeRule(rule, true),
		Unlimited: rule.IsUnlimited(), Shadow: rule.Shadow, Closed: rule.IsClosed(),
		Windows: []windowUsage{}, Binding: -1,
	}
	for _, w := range httpapi.DescribeWindows(rule) {
		u.Windows = append(u.Windows, windowUsage{WindowJSON: w})
	}
	if read.Err != nil {
		u.Error = "could not read the window occupancy from Redis: " + read.Err.Error()
		return u
	}
	if rule.IsUnlimited() {
		zero := 0.0
		u.Utilization = &zero
		return u
	}
	best := -1.0
	for i := range u.Windows {
		w := &u.Windows[i]
		n := read.Counts[i]
		util := 1.0
		if w.Limit > 0 {
			util = float64(n) / float64(w.Limit)
		}
		w.Count, w.CountMajor, w.Utilization = &n, w.Major(n), &util
		if util > best {
			best, u.Binding = util, i
		}
	}
	u.Utilization = &best
	return u
}
