package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/apperr"
	"payserver/internal/configcenter"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// RouteRows reads stored routing counts. *repo.RouteStats implements it.
type RouteRows interface {
	Routes(ctx context.Context, from, to time.Time, bizType string) ([]stats.RouteRow, error)
}

// HealthView says which channels routed payments skip as unhealthy.
// *channel.Health implements it.
type HealthView interface {
	Unhealthy(code string) bool
}

// RouteReportsOptions wires GET /reports/routes and the dashboard's routes
// section. Every field is required but Now.
type RouteReportsOptions struct {
	Rows   RouteRows
	Usage  httpapi.UsageSource
	Health HealthView
	// Flush, when set, writes this instance's pending counts before a
	// report is read, so that a report includes them.
	Flush  func(ctx context.Context) error
	Logger *slog.Logger
	Now    func() time.Time
}

// RouteReports serves routing reports and the dashboard's routes view.
type RouteReports struct {
	opts RouteReportsOptions
}

// NewRouteReports returns the routing reports.
func NewRouteReports(opts RouteReportsOptions) (*RouteReports, error) {
	if opts.Rows == nil || opts.Usage == nil || opts.Health == nil || opts.Logger == nil {
		return nil, errors.New("console: route reports need rows, a usage source, a health view and a logger")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &RouteReports{opts: opts}, nil
}

// maxRouteReportRange bounds one report's time range.
const maxRouteReportRange = 31 * 24 * time.Hour

// routeReportJSON is GET /reports/routes: per bizType, the routed payments
// per channel and the fallbacks per reason, over [from, to).
type routeReportJSON struct {
	From   string              `json:"from"`
	To     string              `json:"to"`
	Routes []stats.RouteReport `json:"routes"`
}

// get answers GET /reports/routes?from=&to=&bizType=, its times read as
// every report's (stats.ParseRange: to defaults to now, from to an hour
// before to).
func (rr *RouteReports) get(c *gin.Context) {
	from, to, bad := stats.ParseRange(c.Request.URL.Query(), rr.opts.Now())
	biz := c.Query("bizType")
	if biz != "" {
		if reason := ratelimit.CodeProblem(biz); reason != "" {
			bad = append(bad, apperr.FieldError{Field: "bizType", Reason: reason})
		}
	}
	if len(bad) == 0 && to.Sub(from) > maxRouteReportRange {
		name, reason := stats.RangeField(c.Request.URL.Query(), "after from", "before to")
		bad = append(bad, apperr.FieldError{Field: name, Reason: "must be at most 31 days " + reason})
	}
	if len(bad) > 0 {
		sort.Slice(bad, func(i, j int) bool { return bad[i].Field < bad[j].Field })
		httpapi.WriteError(c, rr.opts.Logger, apperr.Invalid(bad...), "")
		return
	}
	ctx := c.Request.Context()
	if rr.opts.Flush != nil {
		if err := rr.opts.Flush(ctx); err != nil {
			rr.opts.Logger.Warn("route report: this instance's pending counts could not be written first", "err", err)
		}
	}
	rows, err := rr.opts.Rows.Routes(ctx, from, to, biz)
	if err != nil {
		httpapi.WriteError(c, rr.opts.Logger, httpapi.DatabaseDown(err, "the stats database is unavailable"), "")
		return
	}
	c.Header("Cache-Control", "no-store")
	httpapi.WriteJSON(c, rr.opts.Logger, http.StatusOK, routeReportJSON{
		From: from.Format(time.RFC3339), To: to.Format(time.RFC3339), Routes: stats.SummarizeRoutes(rows),
	})
}

// routeView is one route on the dashboard.
type routeView struct {
	BizType    string
	Candidates string // [ALIPAY, WECHAT]
	// Preferred is the channel a routed payment would go to now: the first
	// candidate that is healthy, not closed and not full; "" when none.
	Preferred string
	// Skipped says why each candidate before Preferred would be skipped.
	Skipped string
	// LastMinute is the fallbacks of the last complete minute; PerMinute
	// the average over the last hour; Series one bar per minute.
	LastMinute int64
	PerMinute  string
	Series     []routeBar
	// Total is the fallbacks of the hour; without any the page says 0
	// rather than drawing an empty series.
	Total int64
}

// routeBar is one minute's fallbacks, drawn as an SVG bar.
type routeBar struct {
	X, Y, H float64
	Count   int64
	Minute  string
}

// routeViews returns the dashboard's routes section: each of routes with
// its preferred channel now under the limits of cfg, and its fallbacks per
// minute over the hour before now. Rows that cannot be read leave the
// fallbacks at zero and return the error for the page to show.
func (rr *RouteReports) routeViews(ctx context.Context, cfg *ratelimit.Config, routes limits.Routes, now time.Time) ([]routeView, error) {
	if cfg == nil || len(routes) == 0 {
		return nil, nil
	}
	to := now.Truncate(time.Minute)
	from := to.Add(-dashboardMinutes * time.Minute)
	perMinute := map[string]map[int64]int64{}
	rows, err := rr.opts.Rows.Routes(ctx, from, to, "")
	for _, r := range rows {
		if r.Reason == "" {
			continue
		}
		if perMinute[r.BizType] == nil {
			perMinute[r.BizType] = map[int64]int64{}
		}
		perMinute[r.BizType][int64(r.Minute.Sub(from)/time.Minute)] += r.Count
	}
	bizTypes := make([]string, 0, len(routes))
	for biz := range routes {
		bizTypes = append(bizTypes, biz)
	}
	sort.Strings(bizTypes)
	out := make([]routeView, 0, len(bizTypes))
	for _, biz := range bizTypes {
		v := routeView{BizType: biz, Candidates: configcenter.DescribeRoute(routes[biz])}
		v.Preferred, v.Skipped = rr.preferred(ctx, cfg, biz, routes[biz])
		counts := perMinute[biz]
		var total, peak int64
		for i := int64(0); i < dashboardMinutes; i++ {
			total += counts[i]
			peak = max(peak, counts[i])
		}
		v.LastMinute, v.Total = counts[dashboardMinutes-1], total
		v.PerMinute = strconv.FormatFloat(float64(total)/dashboardMinutes, 'f', 2, 64)
		for i := int64(0); i < dashboardMinutes; i++ {
			h := 0.0
			if peak > 0 {
				h = 28 * float64(counts[i]) / float64(peak)
			}
			v.Series = append(v.Series, routeBar{X: float64(i) * 4, Y: 30 - h, H: h, Count: counts[i],
				Minute: from.Add(time.Duration(i) * time.Minute).Format("15:04")})
		}
		out = append(out, v)
	}
	return out, err
}

// preferred returns the first of candidates, biz's route, that would
// admit a payment now (healthy, its key and its channel-wide key neither
// closed nor full), and why the ones before it would be skipped.
func (rr *RouteReports) preferred(ctx context.Context, cfg *ratelimit.Config, biz string, candidates []string) (string, string) {
	var skipped []string
	for _, ch := range candidates {
		reason := ""
		if rr.opts.Health.Unhealthy(ch) {
			reason = "unhealthy"
		}
		for _, key := range []ratelimit.Key{{BizType: biz, Channel: ch}, ratelimit.ChannelWide(ch)} {
			if reason == "" {
				reason = rr.refusal(ctx, cfg, key, biz)
			}
		}
		if reason == "" {
			return ch, strings.Join(skipped, ", ")
		}
		skipped = append(skipped, ch+" "+reason)
	}
	return "", strings.Join(skipped, ", ")
}

// refusal says why key would refuse a payment now: "closed", "limited" (a
// window full, as read from the limiter's store), or "" when it has room
// or its occupancy cannot be read.
// A window's limit is the one for biz (a channel-wide key's reservations
// for other bizTypes taken off); amount windows are left out (whether a
// payment fits depends on its amount).
func (rr *RouteReports) refusal(ctx context.Context, cfg *ratelimit.Config, key ratelimit.Key, biz string) string {
	rule := cfg.RuleAt(key, rr.opts.Now())
	switch {
	case rule.IsUnlimited():
		return ""
	case rule.IsClosed():
		return "closed"
	}
	_, counts, err := rr.opts.Usage.Usage(ctx, key)
	if err != nil {
		return ""
	}
	for i, w := range rule.Windows {
		if w.Amount || i >= len(counts) {
			continue
		}
		switch limit := rule.LimitFor(i, biz); {
		case limit == 0:
			return "closed"
		case counts[i] >= limit:
			return "limited"
		}
	}
	return ""
}
