package stats

import (
	"fmt"
	"net/url"
	"sort"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
)

// Granularity is the size of a report bucket. Buckets are aligned to UTC.
type Granularity string

// The granularities a report can have.
const (
	Minute Granularity = "minute"
	Hour   Granularity = "hour"
	Day    Granularity = "day"
)

// Duration returns the bucket length, or 0 for an unknown granularity.
func (g Granularity) Duration() time.Duration {
	switch g {
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	}
	return 0
}

// MaxRange returns the longest from..to span a query of granularity g may
// cover, so that no query scans unbounded data: 24h of minutes, 31 days of
// hours, 366 days of days. It is 0 for an unknown granularity.
func (g Granularity) MaxRange() time.Duration {
	switch g {
	case Minute:
		return 24 * time.Hour
	case Hour:
		return 31 * 24 * time.Hour
	case Day:
		return 366 * 24 * time.Hour
	}
	return 0
}

// Format is how a report is written.
type Format string

// The report formats of the HTTP API. The CLI adds a table.
const (
	FormatJSON Format = "json"
	FormatCSV  Format = "csv"
)

// Query selects a report: the buckets of granularity Granularity whose start
// is in [From, To), for one bizType and/or channel or all of them.
type Query struct {
	// From and To are UTC and aligned to Granularity: ParseQuery rounds From
	// down and To up, so every bucket is whole.
	From, To    time.Time
	BizType     string // "" means every bizType; Other selects the unconfigured ones
	Channel     string // "" means every channel
	Granularity Granularity
	Format      Format
}

// queryParams are the parameters ParseQuery accepts.
var queryParams = []string{"from", "to", "bizType", "channel", "granularity", "format"}

// earliest is the earliest from accepted: stats are stored as Unix minutes.
var earliest = time.Unix(0, 0).UTC()

// latest is the latest time accepted: rounded up to a whole day it is
// still in year 9999, the last year RFC 3339 (and so the JSON answer) can
// write.
var latest = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// ParseQuery validates the parameters of GET /reports/channel-limits into a
// Query. It is a pure function. from and to are required RFC 3339 times,
// with from before to, both within 1970-01-01..9999-12-31T00:00:00Z, and
// the span within Granularity.MaxRange; bizType and
// channel, when given, are codes ([A-Z0-9_]{1,32}) or "other"; granularity
// is minute (the default), hour or day; format is json (the default) or csv.
// Unknown or repeated parameters are refused too. The error is an
// *apperr.Error with code INVALID_REQUEST whose details.fields names every
// bad parameter and why.
func ParseQuery(v url.Values) (Query, error) {
	var bad []apperr.FieldError
	fail := func(field, format string, args ...any) {
		bad = append(bad, apperr.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	known := map[string]bool{}
	for _, p := range queryParams {
		known[p] = true
	}
	var unknown []string
	for name, vals := range v {
		switch {
		case !known[name]:
			unknown = append(unknown, name)
		case len(vals) > 1:
			fail(name, "must be given at most once")
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		fail(name, "is not a parameter of this report (want from, to, bizType, channel, granularity, format)")
	}

	q := Query{Granularity: Minute, Format: FormatJSON}
	switch g := Granularity(v.Get("granularity")); g {
	case "":
	case Minute, Hour, Day:
		q.Granularity = g
	default:
		fail("granularity", "must be minute, hour or day")
	}
	switch f := Format(v.Get("format")); f {
	case "":
	case FormatJSON, FormatCSV:
		q.Format = f
	default:
		fail("format", "must be json or csv")
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"bizType", &q.BizType}, {"channel", &q.Channel}} {
		s := v.Get(p.name)
		if s == "" || s == Other {
			*p.dst = s
			continue
		}
		if reason := ratelimit.CodeProblem(s); reason != "" {
			fail(p.name, "%s (or is %q)", reason, Other)
			continue
		}
		*p.dst = s
	}
	from, okFrom := parseTime(v, "from", fail)
	to, okTo := parseTime(v, "to", fail)
	if okFrom && okTo {
		maxRange := q.Granularity.MaxRange()
		switch {
		case !from.Before(to):
			fail("to", "must be after from")
		case to.Sub(from) > maxRange:
			fail("to", "must be at most %s after from for granularity %s (minute: 24h, hour: 31 days, day: 366 days)",
				formatSpan(maxRange), q.Granularity)
		}
	}
	if len(bad) > 0 {
		return Query{}, apperr.Invalid(bad...)
	}
	step := q.Granularity.Duration()
	q.From = from.Truncate(step).UTC()
	q.To = to.Truncate(step).UTC()
	if q.To.Before(to) {
		q.To = q.To.Add(step)
	}
	return q, nil
}

func parseTime(v url.Values, name string, fail func(field, format string, args ...any)) (time.Time, bool) {
	s := v.Get(name)
	if s == "" {
		fail(name, "is required: an RFC 3339 time such as 2026-01-02T15:04:05Z")
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		fail(name, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		return time.Time{}, false
	}
	if t.Before(earliest) {
		fail(name, "must not be before 1970-01-01T00:00:00Z")
		return time.Time{}, false
	}
	if t.After(latest) {
		fail(name, "must not be after 9999-12-31T00:00:00Z")
		return time.Time{}, false
	}
	return t.UTC(), true
}

func formatSpan(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d > 24*time.Hour {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return fmt.Sprintf("%dh", d/time.Hour)
}
