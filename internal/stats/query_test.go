package stats_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/stats"
)

func TestParseQueryValid(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  stats.Query
	}{
		{"defaults: minute, json, every key", "from=2026-03-01T10:00:00Z&to=2026-03-01T11:00:00Z",
			stats.Query{From: t0, To: t0.Add(time.Hour), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"every parameter", "from=2026-03-01T10:00:00Z&to=2026-03-02T10:00:00Z&bizType=ONLINE_PAY&channel=ALIPAY&granularity=hour&format=csv",
			stats.Query{From: t0, To: t0.Add(24 * time.Hour), BizType: "ONLINE_PAY", Channel: "ALIPAY", Granularity: stats.Hour, Format: stats.FormatCSV}},
		{"other is a bizType and a channel", "from=2026-03-01T10:00:00Z&to=2026-03-01T10:01:00Z&bizType=other&channel=other",
			stats.Query{From: t0, To: t0.Add(time.Minute), BizType: "other", Channel: "other", Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"offsets become UTC", "from=2026-03-01T18:00:00%2B08:00&to=2026-03-01T19:00:00%2B08:00",
			stats.Query{From: t0, To: t0.Add(time.Hour), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"from rounds down and to up to whole buckets", "from=2026-03-01T10:20:30Z&to=2026-03-01T12:00:01Z&granularity=hour",
			stats.Query{From: t0, To: t0.Add(3 * time.Hour), Granularity: stats.Hour, Format: stats.FormatJSON}},
		{"fractional seconds", "from=2026-03-01T10:00:00.5Z&to=2026-03-01T10:00:59.999Z",
			stats.Query{From: t0, To: t0.Add(time.Minute), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"exactly the minute cap", "from=2026-03-01T10:00:00Z&to=2026-03-02T10:00:00Z",
			stats.Query{From: t0, To: t0.Add(24 * time.Hour), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"a year of days", "from=2025-03-01T00:00:00Z&to=2026-03-01T00:00:00Z&granularity=day",
			stats.Query{From: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Granularity: stats.Day, Format: stats.FormatJSON}},
		{"no times: the hour before now", "",
			stats.Query{From: t0, To: t0.Add(time.Hour), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"only to: the hour before it", "to=2026-03-01T10:30:00Z",
			stats.Query{From: t0.Add(-30 * time.Minute), To: t0.Add(30 * time.Minute), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"only from: up to now", "from=2026-03-01T09:00:00Z",
			stats.Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"now and negative durations", "from=-90m&to=now",
			stats.Query{From: t0.Add(-30 * time.Minute), To: t0.Add(time.Hour), Granularity: stats.Minute, Format: stats.FormatJSON}},
		{"-1h with hours", "from=-25h&to=-1h&granularity=hour",
			stats.Query{From: t0.Add(-24 * time.Hour), To: t0, Granularity: stats.Hour, Format: stats.FormatJSON}},
		{"to before 1970 plus an hour: from is 1970", "to=1970-01-01T00:30:00Z",
			stats.Query{From: time.Unix(0, 0).UTC(), To: time.Unix(0, 0).UTC().Add(30 * time.Minute), Granularity: stats.Minute, Format: stats.FormatJSON}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := stats.ParseQuery(v, queryNow)
			if err != nil {
				t.Fatalf("ParseQuery(%s): %v", tt.query, err)
			}
			if !got.From.Equal(tt.want.From) || !got.To.Equal(tt.want.To) || got.From.Location() != time.UTC ||
				got.BizType != tt.want.BizType || got.Channel != tt.want.Channel || got.Granularity != tt.want.Granularity || got.Format != tt.want.Format {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseQueryInvalid(t *testing.T) {
	const ok = "from=2026-03-01T10:00:00Z&to=2026-03-01T11:00:00Z"
	tests := []struct {
		name  string
		query string
		// want maps each bad field to a fragment of its reason.
		want map[string]string
	}{
		{"empty values", "from=&to=", map[string]string{"from": "must not be empty", "to": "must not be empty"}},
		{"not RFC 3339", "from=yesterday&to=2026-03-01", map[string]string{"from": "RFC 3339", "to": "RFC 3339"}},
		{"an unencoded + arrives as a space", "from=2026-03-01T18:00:00+08:00&to=2026-03-01T19:00:00%2B08:00", map[string]string{"from": "%2B"}},
		{"a positive duration", "from=1h", map[string]string{"from": "must be negative"}},
		{"not a duration", "from=-1x", map[string]string{"from": "negative duration"}},
		{"a duration before 1970", "from=-600000h", map[string]string{"from": "1970"}},
		{"from after the default to", "from=2026-03-01T12:00:00Z", map[string]string{"to": "after from"}},
		{"to before from", "from=2026-03-01T11:00:00Z&to=2026-03-01T10:00:00Z", map[string]string{"to": "after from"}},
		{"empty range", "from=2026-03-01T11:00:00Z&to=2026-03-01T11:00:00Z", map[string]string{"to": "after from"}},
		{"minute range over 24h", "from=2026-03-01T10:00:00Z&to=2026-03-02T10:00:01Z", map[string]string{"to": "at most 24h after from for granularity minute"}},
		{"hour range over 31 days", "from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:01Z&granularity=hour", map[string]string{"to": "at most 31 days"}},
		{"day range over 366 days", "from=2024-01-01T00:00:00Z&to=2025-01-02T00:00:00Z&granularity=day", map[string]string{"to": "at most 366 days"}},
		{"before 1970", "from=1969-12-31T23:59:00Z&to=1970-01-01T00:10:00Z", map[string]string{"from": "1970"}},
		{"bad granularity", ok + "&granularity=week", map[string]string{"granularity": "minute, hour or day"}},
		{"bad format", ok + "&format=xml", map[string]string{"format": "json or csv"}},
		{"lower-case bizType", ok + "&bizType=online_pay", map[string]string{"bizType": "A-Z"}},
		{"long channel", ok + "&channel=" + strings.Repeat("A", 33), map[string]string{"channel": "at most 32"}},
		{"unknown parameter", ok + "&limit=5", map[string]string{"limit": "not a parameter"}},
		{"repeated parameter", ok + "&format=csv&format=json", map[string]string{"format": "at most once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = stats.ParseQuery(v, queryNow)
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != apperr.InvalidRequest {
				t.Fatalf("got %v, want INVALID_REQUEST", err)
			}
			fields := e.Details["fields"].([]apperr.FieldError)
			got := map[string]string{}
			for _, f := range fields {
				got[f.Field] = f.Reason
			}
			if len(got) != len(tt.want) {
				t.Errorf("got fields %v, want %v", got, tt.want)
			}
			for field, frag := range tt.want {
				if !strings.Contains(got[field], frag) {
					t.Errorf("field %s: got reason %q, want it to mention %q", field, got[field], frag)
				}
			}
		})
	}
}

// FuzzParseQuery checks that any query string either parses into a bounded,
// aligned, UTC query or is refused with INVALID_REQUEST naming a field, and
// never panics.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"from=2026-03-01T10:00:00Z&to=2026-03-01T11:00:00Z",
		"from=2026-03-01T10:00:00Z&to=2026-03-02T10:00:00Z&granularity=day&format=csv&bizType=other",
		"from=9999-12-31T23:59:59Z&to=9999-12-31T23:59:59.999999999Z",
		"from=1970-01-01T00:00:00Z&to=1970-01-01T00:00:01-23:59",
		"granularity=hour&granularity=day", "%zz", "from=&to=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := stats.ParseQuery(v, queryNow)
		if err != nil {
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != apperr.InvalidRequest {
				t.Fatalf("%q: error %v is not INVALID_REQUEST", raw, err)
			}
			if fields, _ := e.Details["fields"].([]apperr.FieldError); len(fields) == 0 {
				t.Fatalf("%q: no field named in %v", raw, err)
			}
			return
		}
		step := q.Granularity.Duration()
		if step == 0 || !q.From.Before(q.To) || q.To.Sub(q.From) > q.Granularity.MaxRange()+2*step {
			t.Fatalf("%q: unbounded query %+v", raw, q)
		}
		if q.From.Location() != time.UTC || !q.From.Truncate(step).Equal(q.From) || !q.To.Truncate(step).Equal(q.To) {
			t.Fatalf("%q: query not aligned to UTC %s: %+v", raw, q.Granularity, q)
		}
		if q.Format != stats.FormatJSON && q.Format != stats.FormatCSV {
			t.Fatalf("%q: format %q", raw, q.Format)
		}
	})
}

// queryNow is the "now" the query tests read relative times against.
var queryNow = t0.Add(time.Hour)
