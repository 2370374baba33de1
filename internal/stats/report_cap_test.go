package stats_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// TestReportRowsAreCapped: a report query over more rows than the cap is
// 400 INVALID_REQUEST naming the cap, not an answer of hundreds of MB.
func TestReportRowsAreCapped(t *testing.T) {
	const maxRows = stats.MaxReportRows
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	buckets := make([]stats.Bucket, maxRows+1)
	for i := range buckets {
		buckets[i] = stats.Bucket{Start: t0.Add(time.Duration(i%1440) * time.Minute), Key: ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}}
	}
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{buckets: buckets}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := stats.ParseQuery(url.Values{"from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}, "granularity": {"minute"}}, t0.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Report(context.Background(), q)
	if apperr.CodeOf(err) != apperr.InvalidRequest || !strings.Contains(err.Error(), "100000") {
		t.Fatalf("a report of %d rows: got %v, want INVALID_REQUEST naming the cap of %d rows", maxRows+1, err, maxRows)
	}
}
