package stats

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
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
	From, To time.Time
	BizType  string // "" means every bizType; Other selects the unconfigured ones
	Channel  string // "" means every channel
	// Keys, when not empty, selects the buckets of these keys only (BizType
	// and Channel still apply), at most MaxQueryKeys of them: the dashboard
	// reads the keys of its page. ParseQuery never sets it.
	Keys        []ratelimit.Key
	Granularity Granularity
	Format      Format
	// GroupBy is what a row of the report counts: a key (the default) or a
	// merchant of a key.
	GroupBy GroupBy
	// MaxRows, when positive, caps the rows of the report: a query that
	// finds more is INVALID_REQUEST naming the cap (Reporter.Report,
	// Reporter.Stream), and a Reader need read no more than MaxRows+1
	// buckets. ParseQuery sets it to MaxReportRows (MaxMerchantRows grouped
	// by merchant); 0 means no cap.
	MaxRows int
}

// GroupBy is what one row of a channel-limit report counts.
type GroupBy string

// The groupings of GET /reports/channel-limits.
const (
	// GroupByKey is a row per key and bucket (Report).
	GroupByKey GroupBy = "key"
	// GroupByMerchant is a row per merchant, key and bucket, at most
	// TopMerchants per key and bucket and the rest under Other
	// (MerchantReport).
	GroupByMerchant GroupBy = "merchant"
)

// MaxQueryKeys is the most keys a Query may select (Query.Keys).
const MaxQueryKeys = 500

// MaxReportRows is the most rows a report asked for through ParseQuery may
// have (a row is one key in one bucket): about 290 MB of JSON. A report is
// streamed (Reporter.Stream), so its memory does not grow with its rows;
// the cap bounds the database's work and the answer's size. A day of
// minutes for 500 keys is 720,000 rows; for 1,000 keys, 1,440,000, refused
// naming the cap.
const MaxReportRows = 1_000_000

// MaxMerchantRows is the most stored rows a report grouped by merchant
// asked for through ParseQuery may read (a row is one key, merchant and
// minute or bucket). That report is built in memory (each bucket's top
// merchants need its rows together), so its cap is lower: about 30 MB.
const MaxMerchantRows = 100_000

// queryParams are the parameters ParseQuery accepts.
var queryParams = []string{"from", "to", "bizType", "channel", "granularity", "format", "groupBy"}

// earliest is the earliest from accepted: stats are stored as Unix minutes.
var earliest = time.Unix(0, 0).UTC()

// latest is the latest time accepted: rounded up to a whole day it is
// still in year 9999, the last year RFC 3339 (and so the JSON answer) can
// write.
var latest = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// ParseQuery validates the parameters of GET /reports/channel-limits into a
// Query, with now the time "now" and relative times are read against. It is
// a pure function. from and to are read by ParseRange (RFC 3339, "now" or a
// negative duration; to defaults to now and from to DefaultSpan before to),
// and the span must be within Granularity.MaxRange; bizType and
// channel, when given, are codes ([A-Z0-9_]{1,32}) or "other"; granularity
// is minute (the default), hour or day; format is json (the default) or csv;
// groupBy is key (the default) or merchant.
// Unknown or repeated parameters are refused too. The error is an
// *apperr.Error with code INVALID_REQUEST whose details.fields names every
// bad parameter and why.
func ParseQuery(v url.Values, now time.Time) (Query, error) {
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
		fail(name, "is not a parameter of this report (want from, to, bizType, channel, granularity, format, groupBy)")
	}

	q := Query{Granularity: Minute, Format: FormatJSON, GroupBy: GroupByKey}
	switch g := GroupBy(v.Get("groupBy")); g {
	case "":
	case GroupByKey, GroupByMerchant:
		q.GroupBy = g
	default:
		fail("groupBy", "must be key or merchant")
	}
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
	from, to, badTimes := ParseRange(v, now)
	bad = append(bad, badTimes...)
	if maxRange := q.Granularity.MaxRange(); len(badTimes) == 0 && to.Sub(from) > maxRange {
		name, reason := RangeField(v, "after from", "before to")
		fail(name, "must be at most %s %s for granularity %s (minute: 24h, hour: 31 days, day: 366 days)",
			formatSpan(maxRange), reason, q.Granularity)
	}
	if len(bad) > 0 {
		return Query{}, apperr.Invalid(bad...)
	}
	step := q.Granularity.Duration()
	q.MaxRows = MaxReportRows
	if q.GroupBy == GroupByMerchant {
		q.MaxRows = MaxMerchantRows
	}
	q.From = from.Truncate(step).UTC()
	q.To = to.Truncate(step).UTC()
	if q.To.Before(to) {
		q.To = q.To.Add(step)
	}
	return q, nil
}

// DefaultSpan is how long before to a report starts when from is not given.
const DefaultSpan = time.Hour

// timeForms is what a report time may be, for the reasons given.
const timeForms = "an RFC 3339 time such as 2026-01-02T15:04:05Z, now, or a negative duration before now such as -1h"

// ParseRange reads the from and to parameters of a report (every report
// endpoint and `payserver report` read them alike), with now the time they
// are relative to. Each is an RFC 3339 time, "now", or a negative Go
// duration before now ("-1h", "-90m"), within 1970-01-01..9999-12-31T00:00:00Z.
// An absent to is now and an absent from DefaultSpan before to (not before
// 1970); an empty
// value is refused, as it is more likely a script's unset variable than a
// wish for the default. from must be before to. It returns both in UTC,
// or the bad fields and why (a value with a space where an offset's "+"
// was, as an unencoded "+" in a URL query arrives, is told to encode it).
func ParseRange(v url.Values, now time.Time) (from, to time.Time, bad []apperr.FieldError) {
	read := func(name string, absent time.Time) time.Time {
		s, given := v[name]
		if !given || len(s) == 0 {
			return absent
		}
		t, reason := ParseTime(s[0], now)
		if reason != "" {
			bad = append(bad, apperr.FieldError{Field: name, Reason: reason})
		}
		return t
	}
	to = read("to", now.UTC())
	from = read("from", later(to.Add(-DefaultSpan), earliest))
	if len(bad) == 0 && !from.Before(to) {
		bad = append(bad, apperr.FieldError{Field: "to", Reason: "must be after from"})
	}
	return from, to, bad
}

// RangeField names the parameter to blame for a span from..to that is too
// long: to, with toReason, when it was given; else from, which was (to is
// now), with fromReason.
func RangeField(v url.Values, toReason, fromReason string) (name, reason string) {
	if _, given := v["to"]; given {
		return "to", toReason
	}
	return "from", fromReason
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// ParseTime reads one report time (see ParseRange) relative to now: the
// time in UTC, or why s is not one.
func ParseTime(s string, now time.Time) (time.Time, string) {
	var t time.Time
	switch {
	case s == "":
		return time.Time{}, "must not be empty: give " + timeForms + ", or leave it out for the default"
	case s == "now":
		t = now
	case s[0] == '-' || s[0] == '+' || (s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "T:")):
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return time.Time{}, "must be " + timeForms
		case d > 0:
			return time.Time{}, "a duration must be negative (before now), such as -1h"
		}
		t = now.Add(d)
	default:
		var err error
		if t, err = time.Parse(time.RFC3339, s); err != nil {
			if _, plusErr := time.Parse(time.RFC3339, strings.Replace(s, " ", "+", 1)); plusErr == nil {
				return time.Time{}, "must be " + timeForms + "; it has a space where its offset's + was: " +
					"in a URL, write + as %2B (2026-01-02T15:04:05%2B08:00), as an unencoded + arrives as a space"
			}
			return time.Time{}, "must be " + timeForms
		}
	}
	switch {
	case t.Before(earliest):
		return time.Time{}, "must not be before 1970-01-01T00:00:00Z"
	case t.After(latest):
		return time.Time{}, "must not be after 9999-12-31T00:00:00Z"
	}
	return t.UTC(), ""
}

func formatSpan(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d > 24*time.Hour {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return fmt.Sprintf("%dh", d/time.Hour)
}
