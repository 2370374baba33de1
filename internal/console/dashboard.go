package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/httpapi"
	"payserver/internal/iso4217"
	"payserver/internal/limitapi"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

//go:embed templates/dashboard.html
var templatesFS embed.FS

// DashboardRefresh is how often the dashboard page reloads itself.
const DashboardRefresh = 10 * time.Second

// dashboardMinutes is the span of the dashboard's history charts.
const dashboardMinutes = 60

// Chart geometry, in SVG user units.
const (
	chartW, chartH        = 600, 150
	chartLeft, chartRight = 44, 8
	chartTop, chartBottom = 8, 22
	barW                  = 420
)

type dashboard struct {
	r    *reports
	tmpl *template.Template
}

func newDashboard(r *reports) (*dashboard, error) {
	tmpl, err := template.New("dashboard.html").Funcs(template.FuncMap{"amount": amountText, "merchant": ratelimit.MerchantLabel}).
		ParseFS(templatesFS, "templates/dashboard.html")
	if err != nil {
		return nil, fmt.Errorf("console: dashboard template: %w", err)
	}
	return &dashboard{r: r, tmpl: tmpl}, nil
}

// amountText renders an amount of the Amounts table: in major units of its
// currency (iso4217.Text), or, for currency stats.Other, in minor units of
// different currencies added together.
func amountText(n int64, currency string) string {
	if currency == stats.Other {
		return strconv.FormatInt(n, 10) + " minor units, mixed"
	}
	return iso4217.Text(n, currency)
}

// dashboardView is everything the template shows.
type dashboardView struct {
	Now            string
	RefreshSeconds int
	Degraded       bool
	Source         sourceView
	Filter         dashQuery
	// CSRF is the session's CSRF token for the logout form; empty when the
	// page was not opened with a session cookie (bearer token, loopback).
	CSRF string
	// Input is the filter as typed; Problems the refused parameters.
	Input       dashInput
	Problems    []filterProblem
	Paging      pagingView
	Usage       []usageBar
	Charts      []hourChart
	ChartsError string
	ChartFrom   string
	ChartTo     string
	Limits      []httpapi.LimitJSON
	Callers     []limitapi.CallerCounts
	Routes      []routeView
	RoutesError string
	// Quotas are the page's calendar windows with their forecasts; nil
	// without a forecaster.
	Quotas []quotaLine
	// Amounts are the amounts admitted and refused per channel and
	// currency over the chart's hour; AmountsError says why they are
	// missing.
	Amounts      []stats.AmountBucket
	AmountsError string
	// OtherChannel and OtherCurrency say that Amounts has a row under
	// stats.Other, which the page explains.
	OtherChannel, OtherCurrency bool
	// Merchants are the top merchants of the page's keys over the chart's
	// hour; MerchantsError says why they are missing.
	Merchants      []merchantLine
	MerchantsError string
	// Unresolved is the UNKNOWN orders being resolved with their
	// channels; nil when not wired.
	Unresolved *unresolvedView
	// Discrepancies lists the newest orders a channel contradicted, when
	// the dashboard can read them.
	Discrepancies *discrepancyView
}

// unresolvedView is the dashboard's line on UNKNOWN orders.
type unresolvedView struct {
	Count  int64
	Oldest string // the age of the oldest, "" when none
	Stale  bool   // the oldest is past the alert's 15 minutes
	Error  string
	// Oldest20 lists the oldest of them; ListError says why they are not.
	Oldest20  []unresolvedLine
	ListError string
}

// discrepancyView is the dashboard's list of discrepancies.
type discrepancyView struct {
	Lines []discrepancyLine
	Error string
}

type sourceView struct {
	Loaded      bool
	Source      string
	Name        string
	Describe    string
	MD5         string
	LoadedAt    string
	Applied     int64
	Refusals    int64
	LastRefusal string
	// LastRefusalAt is when the last document was refused.
	LastRefusalAt string
	// Superseded is true once a good document was applied after it.
	Superseded bool
}

// pagingView says which keys of how many the page shows, with links to
// the neighbouring pages (empty when there is none).
type pagingView struct {
	First, Last, Total int
	Prev, Next         string
}

// get answers GET /dashboard: server-rendered HTML with SVG drawn here, no
// script and no external resource; it reloads itself every
// DashboardRefresh. Only one page of keys is drawn (filtered by bizType
// and channel), so the page stays small with thousands of keys. A failing
// dependency shows as a message in its section, never as a failed page.
//
// Bad parameters are answered 400 with the page itself: each problem is
// said above the filter, the parameters in error are left out (an unknown
// one is ignored, a bad bizType shows every bizType), and the filter form
// keeps what was typed so that it can be corrected.
func (d *dashboard) get(c *gin.Context) {
	params := c.Request.URL.Query()
	q, bad := parseDashQuery(params)
	ctx := c.Request.Context()
	now := d.r.opts.Now().UTC()
	view := d.view(ctx, now, q)
	view.Input = dashInput{BizType: params.Get("bizType"), Channel: params.Get("channel")}
	view.Problems = filterProblems(bad, params, q)
	view.CSRF = httpapi.SessionCSRF(c.Request)
	status := http.StatusOK
	if len(bad) > 0 {
		status = http.StatusBadRequest
	}
	var buf bytes.Buffer
	if err := d.tmpl.Execute(&buf, view); err != nil {
		httpapi.WriteError(c, d.r.log, fmt.Errorf("render dashboard: %w", err), "")
		return
	}
	httpapi.PageSecurityHeaders(c)
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

func (d *dashboard) view(ctx context.Context, now time.Time, q dashQuery) dashboardView {
	st := d.r.opts.Limits.Status()
	cfg := d.r.opts.Limits.Config()
	v := dashboardView{
		Now:            now.Format("2006-01-02 15:04:05 UTC"),
		RefreshSeconds: int(DashboardRefresh / time.Second),
		Degraded:       d.r.opts.Limits.Degraded(),
		Source: sourceView{
			Loaded: st.Loaded, Source: st.Source, Name: st.Name, Describe: st.Describe, MD5: st.MD5,
			LoadedAt: formatStamp(st.LoadedAt), Applied: st.Applied, Refusals: st.Refusals, LastRefusal: st.LastRefusal,
			LastRefusalAt: formatStamp(st.LastRefusalAt), Superseded: st.LastRefusalSuperseded,
		},
		Filter: q,
	}
	if d.r.opts.Callers != nil {
		v.Callers = d.r.opts.Callers.Snapshot()
	}
	if d.r.opts.Unresolved != nil {
		v.Unresolved = d.unresolved(ctx, now)
	}
	if d.r.opts.Discrepancies != nil {
		lines, why := d.discrepancyLines(ctx, now)
		v.Discrepancies = &discrepancyView{Lines: lines, Error: why}
	}
	if d.r.opts.Routes != nil {
		var err error
		if v.Routes, err = d.r.opts.Routes.routeViews(ctx, cfg, d.r.opts.Limits.Routes(), now); err != nil {
			d.r.log.Warn("dashboard: could not read the route stats", "err", err)
			v.RoutesError = "The stats database is unavailable; the fallback counts are missing."
		}
	}
	to := now.Truncate(time.Minute).Add(time.Minute)
	from := to.Add(-dashboardMinutes * time.Minute)
	v.ChartFrom, v.ChartTo = from.Format("15:04"), to.Format("15:04 UTC")
	hour := stats.Query{From: from, To: to, BizType: q.BizType, Channel: q.Channel, Granularity: stats.Minute, Format: stats.FormatJSON}
	changes, err := d.r.opts.Reports.Changes(ctx, hour)
	if err != nil {
		d.r.log.Warn("dashboard: could not read the hour's limit changes", "err", err)
	}
	v.Amounts, v.AmountsError = d.amounts(ctx, from, to, q)
	v.OtherChannel, v.OtherCurrency = otherAmounts(v.Amounts)
	others, othersErr := d.otherRows(ctx, hour)
	resolver, resolverErr := d.resolverRows(ctx, hour)
	others, othersErr = append(others, resolver...), errors.Join(othersErr, resolverErr)
	keys := q.keys(cfg, others, changes)
	page, paging := q.page(keys)
	v.Paging = paging
	v.Merchants, v.MerchantsError = d.merchants(ctx, hour, page)
	rows, rowsErr := d.pageRows(ctx, hour, page, others)
	if err := errors.Join(othersErr, rowsErr); err != nil {
		d.r.log.Warn("dashboard: could not read the last hour's stats", "err", err)
		v.ChartsError = "The stats database is unavailable; the history charts are missing."
	}
	var configured, shown []ratelimit.Key
	inPage := map[string]bool{}
	for _, k := range page {
		inPage[k] = true
		key, err := ratelimit.ParseKey(k)
		if err != nil || cfg == nil {
			continue
		}
		if _, ok := cfg.Rules[key]; ok {
			configured = append(configured, key)
			shown = append(shown, key)
		} else if slices.ContainsFunc(cfg.Schedules, func(s ratelimit.Schedule) bool { return s.Key == key }) {
			shown = append(shown, key)
		}
	}
	for _, u := range d.r.usageOf(ctx, cfg, configured).Keys {
		v.Usage = append(v.Usage, newUsageBar(u))
	}
	if cfg != nil {
		learned := httpapi.ReadLearned(ctx, d.r.opts.Learned, cfg, shown)
		v.Limits = httpapi.LimitsJSON(cfg, shown, nil, learned, nil, now)
	}
	if d.r.opts.Quotas != nil {
		v.Quotas = quotaLines(d.r.opts.Quotas(), inPage, now)
		if d.r.opts.Outage != nil {
			markQuotas(v.Quotas, d.r.opts.Outage, d.r.opts.Outage.StoreRestartedAt(ctx), now)
		}
	}
	v.Charts = hourCharts(page, rows, changes, from)
	if err := d.channelWideCharts(ctx, v.Charts, hour, cfg, changes, now); err != nil && v.ChartsError == "" {
		d.r.log.Warn("dashboard: could not read the last hour's stats of a channel", "err", err)
		v.ChartsError = "The stats database is unavailable; the history charts are missing."
	}
	return v
}

// otherRows reads the hour's rows of the keys the limits document does not
// name, counted under bizType stats.Other ("other:CHANNEL"), when the
// filter lets them in.
func (d *dashboard) otherRows(ctx context.Context, hour stats.Query) ([]stats.ReportRow, error) {
	if hour.BizType != "" && hour.BizType != stats.Other {
		return nil, nil
	}
	hour.BizType = stats.Other
	rep, err := d.r.opts.Reports.Report(ctx, hour)
	return rep.Rows, err
}

// pageRows returns the hour's rows of the keys of page: the rows of others
// whose key is on the page, and the rows read for the rest of its keys (at
// most a page of them), so that the dashboard never reads the hour of
// every key.
func (d *dashboard) pageRows(ctx context.Context, hour stats.Query, page []string, others []stats.ReportRow) ([]stats.ReportRow, error) {
	inPage := make(map[string]bool, len(page))
	read := make(map[string]bool, len(others)) // keys whose rows others holds
	for _, r := range others {
		read[r.BizType+":"+r.Channel] = true
	}
	var named []ratelimit.Key
	for _, k := range page {
		inPage[k] = true
		if key, err := ratelimit.ParseKey(k); err == nil && !read[k] {
			named = append(named, key)
		}
	}
	var rows []stats.ReportRow
	for _, r := range others {
		if inPage[r.BizType+":"+r.Channel] {
			rows = append(rows, r)
		}
	}
	if len(named) == 0 {
		return rows, nil
	}
	hour.Keys = named
	rep, err := d.r.opts.Reports.Report(ctx, hour)
	return append(rows, rep.Rows...), err
}

// amounts sums the amounts of [from, to) per channel and currency (one
// channel when the filter names one; none when it names a bizType, as
// amounts are counted per channel).
func (d *dashboard) amounts(ctx context.Context, from, to time.Time, q dashQuery) ([]stats.AmountBucket, string) {
	if q.BizType != "" {
		return nil, ""
	}
	rep, err := d.r.opts.Reports.Amounts(ctx, stats.Query{From: from, To: to, Channel: q.Channel, Granularity: stats.Minute, Format: stats.FormatJSON})
	if err != nil {
		d.r.log.Warn("dashboard: could not read the last hour's amounts", "err", err)
		return nil, "The stats database is unavailable; the amounts are missing."
	}
	type id struct{ channel, currency string }
	sums := map[id]*stats.AmountBucket{}
	for _, b := range rep.Rows {
		k := id{b.Channel, b.Currency}
		s := sums[k]
		if s == nil {
			s = &stats.AmountBucket{Start: from, Channel: b.Channel, Currency: b.Currency}
			sums[k] = s
		}
		s.Admitted += b.Admitted
		s.AdmittedAmount += b.AdmittedAmount
		s.Refused += b.Refused
		s.RefusedAmount += b.RefusedAmount
	}
	out := make([]stats.AmountBucket, 0, len(sums))
	for _, s := range sums {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Channel != out[j].Channel {
			return out[i].Channel < out[j].Channel
		}
		return out[i].Currency < out[j].Currency
	})
	return out, ""
}

// otherAmounts says whether the amounts have a row under the channel
// stats.Other and one under the currency stats.Other.
func otherAmounts(rows []stats.AmountBucket) (channel, currency bool) {
	for _, b := range rows {
		channel = channel || b.Channel == stats.Other
		currency = currency || b.Currency == stats.Other
	}
	return channel, currency
}

func formatStamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// usageBar is one key's live utilisation bar.
type usageBar struct {
	Key, Rule, Label, Percent, Color, Error string
	Flags                                   []string
	Width                                   int // SVG width
	Fill                                    string
}

func newUsageBar(u keyUsage) usageBar {
	b := usageBar{Key: u.Key, Rule: u.Rule, Width: barW, Fill: "0", Color: "#2e9d5b", Error: u.Error}
	if u.Unlimited {
		b.Flags = append(b.Flags, "unlimited")
	}
	if u.Shadow {
		b.Flags = append(b.Flags, "shadow")
	}
	if u.Closed {
		b.Flags = append(b.Flags, "closed")
	}
	switch {
	case u.Error != "":
		b.Label, b.Percent = "occupancy unavailable", "?"
	case u.Unlimited:
		b.Label, b.Percent = "no limit", "–"
	default:
		util := 0.0
		if u.Utilization != nil {
			util = *u.Utilization
		}
		w := u.Windows[max(u.Binding, 0)]
		count := int64(0)
		if w.Count != nil {
			count = *w.Count
		}
		b.Label = w.OfLimit(count) + " in " + w.Span()
		b.Percent = strconv.FormatFloat(100*util, 'f', 0, 64) + "%"
		b.Fill = svgNum(math.Min(util, 1) * barW)
		switch {
		case util >= 0.9:
			b.Color = "#d64545"
		case util >= 0.7:
			b.Color = "#e0a030"
		}
	}
	return b
}

// hourChart is one key's admitted-vs-limited chart, one stacked bar per
// minute.
type hourChart struct {
	Key string
	// Scope, on a channel-wide key's chart, says what it counts ("every
	// bizType on UNIONPAY"); empty otherwise.
	Scope             string
	Admitted, Limited int64
	Shadow            int64
	LimitedPercent    string
	// Rule is the rule in force at the end of the hour, one window a part
	// (a header wraps between windows, never inside one).
	Rule []string
	Bars []chartBar
	// YTicks are the y axis's labelled grid lines, from 0 up, whole
	// numbers evenly spaced, each at the height of the count it names.
	YTicks                   []chartTick
	YZeroAt, NoTrafficAt     string
	XTicks                   []chartTick
	Width, Height, PlotLeft  int
	PlotRight                int
	HasTraffic, LimitChanged bool
	// Changes lists the recorded limit changes of the hour, for a tooltip.
	Changes string
}

// chartBar is one minute: admitted stacked under limited. A non-zero part
// is at least one unit high so that it stays visible.
type chartBar struct {
	Admitted, Limited                      int64
	X, W                                   string
	AdmittedY, AdmittedH, LimitedY, LimitH string
	Title                                  string
}

type chartTick struct {
	X, Y, Label, Anchor string
}

// hourCharts builds one chart per key, in the order given, from the rows
// and the hour's recorded limit changes.
func hourCharts(keys []string, rows []stats.ReportRow, changes []stats.KeyChange, from time.Time) []hourChart {
	byKey := map[string][]stats.ReportRow{}
	for _, r := range rows {
		k := r.BizType + ":" + r.Channel
		byKey[k] = append(byKey[k], r)
	}
	changesOf := map[string][]stats.KeyChange{}
	for _, c := range changes {
		changesOf[c.Key.String()] = append(changesOf[c.Key.String()], c)
	}
	out := make([]hourChart, 0, len(keys))
	for _, k := range keys {
		out = append(out, newHourChart(k, byKey[k], changesOf[k], from))
	}
	return out
}

func newHourChart(key string, rows []stats.ReportRow, changes []stats.KeyChange, from time.Time) hourChart {
	ch := hourChart{Key: key, Width: chartW, Height: chartH, PlotLeft: chartLeft, PlotRight: chartW - chartRight}
	var admitted, limited [dashboardMinutes]int64
	var said []string
	for _, r := range rows {
		i := int(r.Bucket.Sub(from) / time.Minute)
		if i < 0 || i >= dashboardMinutes {
			continue
		}
		admitted[i] += r.Admitted
		limited[i] += r.Limited
		ch.Admitted += r.Admitted
		ch.Limited += r.Limited
		ch.Shadow += r.ShadowLimited
		ch.Rule = ruleWindows(r.Limit)
		ch.LimitChanged = ch.LimitChanged || r.LimitChanged
		if len(changes) == 0 { // the rows' changes, when the list has none (or could not be read)
			for _, c := range r.LimitChanges {
				said = append(said, r.Bucket.Format("15:04")+" "+c)
			}
		}
	}
	// A key whose limit changed without traffic has no row in the minute
	// of the change; the list has it.
	for _, c := range changes {
		ch.LimitChanged = true
		for _, s := range c.Changes {
			said = append(said, c.Bucket.Format("15:04")+" "+s)
		}
	}
	ch.Changes = strings.Join(said, "; ")
	ch.HasTraffic = ch.Admitted+ch.Limited > 0
	if total := ch.Admitted + ch.Limited; total > 0 {
		ch.LimitedPercent = strconv.FormatFloat(100*float64(ch.Limited)/float64(total), 'f', 1, 64) + "%"
	} else {
		ch.LimitedPercent = "–"
	}
	var peak int64
	for i := range admitted {
		peak = max(peak, admitted[i]+limited[i])
	}
	step, top := countAxis(peak)
	plotH := float64(chartH - chartTop - chartBottom)
	plotW := float64(chartW - chartLeft - chartRight)
	y := func(v int64) float64 { return chartTop + plotH - plotH*float64(v)/float64(top) }
	for v := int64(0); v <= top; v += step {
		ch.YTicks = append(ch.YTicks, chartTick{Y: svgNum(y(v)), Label: strconv.FormatInt(v, 10)})
	}
	ch.YZeroAt, ch.NoTrafficAt = svgNum(y(0)), svgNum(chartTop+plotH/2)
	slot := plotW / dashboardMinutes
	for i := 0; i < dashboardMinutes; i++ {
		if admitted[i]+limited[i] == 0 {
			continue
		}
		x := chartLeft + float64(i)*slot
		at := from.Add(time.Duration(i) * time.Minute).Format("15:04")
		base := y(0)
		admH := visible(base-y(admitted[i]), admitted[i])
		limH := visible(y(admitted[i])-y(admitted[i]+limited[i]), limited[i])
		ch.Bars = append(ch.Bars, chartBar{
			Admitted: admitted[i], Limited: limited[i],
			X: svgNum(x + 0.5), W: svgNum(math.Max(slot-1, 1)),
			AdmittedY: svgNum(base - admH), AdmittedH: svgNum(admH),
			LimitedY: svgNum(base - admH - limH), LimitH: svgNum(limH),
			Title: fmt.Sprintf("%s UTC: %d admitted, %d limited", at, admitted[i], limited[i]),
		})
	}
	for i := 0; i <= dashboardMinutes; i += 15 {
		tick := chartTick{X: svgNum(chartLeft + float64(i)*slot), Y: svgNum(chartH - 6), Label: "now", Anchor: "end"}
		if i < dashboardMinutes {
			tick.Label, tick.Anchor = fmt.Sprintf("−%dm", dashboardMinutes-i), "middle"
		}
		ch.XTicks = append(ch.XTicks, tick)
	}
	return ch
}

// maxCountTicks is the most intervals a count axis is divided into.
const maxCountTicks = 5

// countAxis returns the step and the top of a y axis for counts up to
// peak: the step is 1, 2 or 5 times a power of ten, the smallest that
// divides [0, peak] into at most maxCountTicks intervals, and the top the
// first multiple of the step at or above peak (at least one step). Every
// tick is then a whole number at its own height: a peak of 5 is 0, 1, …, 5
// (not 0, 2, 5, whose 2 was read as the middle, 2.5).
func countAxis(peak int64) (step, top int64) {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			step = m * p
			if n := (peak + step - 1) / step; n <= maxCountTicks {
				return step, max(n, 1) * step
			}
		}
	}
}

// ruleWindows splits a rule as the reports write it ("500/1m+3000/1h+
// 300000/day[23:00 Asia/Shanghai]") into its windows, at each "+" that
// joins two, not at one inside brackets (a zone such as Etc/GMT+8).
func ruleWindows(rule string) []string {
	if rule == "" {
		return nil
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(rule); i++ {
		switch rule[i] {
		case '[':
			depth++
		case ']':
			depth--
		case '+':
			if depth == 0 {
				out = append(out, rule[start:i])
				start = i + 1
			}
		}
	}
	return append(out, rule[start:])
}

// visible returns h, or 1 when h is smaller but n is not zero.
func visible(h float64, n int64) float64 {
	if n > 0 && h < 1 {
		return 1
	}
	return h
}

func svgNum(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// unresolvedAlertAge is the age past which PayserverOrdersUnresolved
// fires; the dashboard marks such an order.
const unresolvedAlertAge = 15 * time.Minute

func (d *dashboard) unresolved(ctx context.Context, now time.Time) *unresolvedView {
	n, oldest, err := d.r.opts.Unresolved(ctx)
	if err != nil {
		d.r.log.Warn("dashboard: could not count the unresolved orders", "err", err)
		return &unresolvedView{Error: "The orders database is unavailable; the unresolved payments are not counted."}
	}
	v := &unresolvedView{Count: n}
	if n > 0 && !oldest.IsZero() {
		age := max(now.Sub(oldest), 0)
		v.Oldest, v.Stale = age.Round(time.Second).String(), age > unresolvedAlertAge
	}
	if n > 0 {
		v.Oldest20, v.ListError = d.unresolvedLines(ctx, now)
	}
	return v
}
