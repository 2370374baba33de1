package stats_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// TestReportRowsAreCapped: a report query over more rows than the cap is
// 400 INVALID_REQUEST naming the cap, before a byte of the report is
// written, whether streamed or built.
func TestReportRowsAreCapped(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	q, err := stats.ParseQuery(url.Values{"from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}, "granularity": {"minute"}}, t0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxRows != stats.MaxReportRows {
		t.Fatalf("ParseQuery's cap %d, want %d", q.MaxRows, stats.MaxReportRows)
	}
	t.Run("streamed", func(t *testing.T) {
		r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{count: stats.MaxReportRows + 1}})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = r.Stream(context.Background(), q, stats.NewJSONWriter(&out))
		if apperr.CodeOf(err) != apperr.InvalidRequest || !strings.Contains(err.Error(), "1000000") || out.Len() != 0 {
			t.Fatalf("a report of %d rows: got %v and %d bytes written, want INVALID_REQUEST naming the cap of %d rows, nothing written",
				stats.MaxReportRows+1, err, out.Len(), stats.MaxReportRows)
		}
	})
	t.Run("built", func(t *testing.T) {
		const maxRows = 100
		buckets := make([]stats.Bucket, maxRows+1)
		for i := range buckets {
			buckets[i] = stats.Bucket{Start: t0.Add(time.Duration(i) * time.Minute), Key: ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}}
		}
		r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{buckets: buckets}})
		if err != nil {
			t.Fatal(err)
		}
		q := q
		q.MaxRows = maxRows
		_, err = r.Report(context.Background(), q)
		if apperr.CodeOf(err) != apperr.InvalidRequest || !strings.Contains(err.Error(), "100") {
			t.Fatalf("a report of %d rows: got %v, want INVALID_REQUEST naming the cap of %d rows", maxRows+1, err, maxRows)
		}
	})
}

// TestStreamedReportIsTheReport: the streamed JSON is byte for byte the
// report json.Marshal makes, and the streamed CSV WriteCSV's, limit
// changes included.
func TestStreamedReportIsTheReport(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var buckets []stats.Bucket
	for i := range 50 {
		buckets = append(buckets, stats.Bucket{Start: t0.Add(time.Duration(i/5) * time.Minute), Key: ratelimit.Key{BizType: "PAY", Channel: "CH" + string(rune('A'+i%5))},
			Rule: "10/1s", RulesSeen: 1 + i%2, Counts: stats.Counts{Attempts: int64(i), Admitted: int64(i / 2), Limited: int64(i - i/2), PeakUtilization: float64(i) / 50}})
	}
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{buckets: buckets}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := stats.ParseQuery(url.Values{"from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-01T01:00:00Z"}}, t0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	built, err := r.Report(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(built)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := r.Stream(context.Background(), q, stats.NewJSONWriter(&got)); err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Fatalf("streamed JSON\n%s\nwant\n%s", got.String(), want)
	}
	var wantCSV, gotCSV bytes.Buffer
	if err := stats.WriteCSV(&wantCSV, built); err != nil {
		t.Fatal(err)
	}
	if err := r.Stream(context.Background(), q, stats.NewCSVWriter(&gotCSV)); err != nil {
		t.Fatal(err)
	}
	if gotCSV.String() != wantCSV.String() || strings.Count(gotCSV.String(), "\n") != 51 {
		t.Fatalf("streamed CSV\n%s\nwant\n%s", gotCSV.String(), wantCSV.String())
	}
	empty := stats.Report{From: q.From, To: q.To, Granularity: q.Granularity, Rows: []stats.ReportRow{}}
	want, _ = json.Marshal(empty)
	got.Reset()
	r, _ = stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{}})
	if err := r.Stream(context.Background(), q, stats.NewJSONWriter(&got)); err != nil || got.String() != string(want) {
		t.Fatalf("an empty report streamed: %q, %v; want %s", got.String(), err, want)
	}
}

// TestStreamPastTheCapFails: rows written between the count and the read
// that take a streamed report past its cap fail it (the server then cuts
// the answer), rather than end it one row short as if whole.
func TestStreamPastTheCapFails(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var buckets []stats.Bucket
	for i := range 11 {
		buckets = append(buckets, stats.Bucket{Start: t0.Add(time.Duration(i) * time.Minute), Key: ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}})
	}
	// The count saw 10 rows; the read finds 11.
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{buckets: buckets, count: 10}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := stats.ParseQuery(url.Values{"from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-01T01:00:00Z"}}, t0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	q.MaxRows = 10
	var out bytes.Buffer
	if err := r.Stream(context.Background(), q, stats.NewJSONWriter(&out)); err == nil || strings.HasSuffix(out.String(), "]}") {
		t.Fatalf("a report that grew past its cap while read: %v, answer ends %q; want an error and no end", err, out.String()[max(0, out.Len()-10):])
	}
}
