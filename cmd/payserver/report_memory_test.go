package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"payserver/internal/stats"
	"payserver/internal/testutil"
)

// BenchmarkReportMemory10k measures the heap a channel-limits report holds
// while it is answered, side by side in one run: the minute report of an
// hour of 10,000 busy keys (600,000 rows) streamed by GET
// /reports/channel-limits, against the same report built in memory and
// then encoded (Reporter.Report and json.Marshal, as an answer built whole
// is), and the same for the hourly report (10,000 rows). peak-heap-MB is
// the most the live heap grew over its level before the request, sampled
// every 2 ms; the client discards the body as it arrives.
//
//	go test ./cmd/payserver/ -run '^$' -bench BenchmarkReportMemory10k -benchtime 3x
func BenchmarkReportMemory10k(b *testing.B) {
	m := startManyKeys(b, manyKeys)
	seedHour(b, m, manyKeys)
	built, err := stats.NewReporter(stats.ReporterOptions{Reader: m.stats.store})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	hour := stats.Query{From: now.Truncate(time.Minute).Add(-59 * time.Minute), To: now.Truncate(time.Minute).Add(time.Minute), Granularity: stats.Minute}
	for _, c := range []struct {
		name string
		run  func(b *testing.B) int64
	}{
		{"minutes-streamed", func(b *testing.B) int64 { return discard(b, m, "/reports/channel-limits") }},
		{"minutes-built", func(b *testing.B) int64 { return buildReport(b, built, hour) }},
		{"hourly-streamed", func(b *testing.B) int64 { return discard(b, m, "/reports/channel-limits?granularity=hour") }},
		{"hourly-built", func(b *testing.B) int64 {
			q := hour
			q.From, q.To, q.Granularity = now.Truncate(time.Hour).Add(-time.Hour), now.Truncate(time.Hour).Add(time.Hour), stats.Hour
			return buildReport(b, built, q)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var peak, size int64
			for b.Loop() {
				base, top := testutil.PeakHeap(2*time.Millisecond, func() { size = c.run(b) })
				peak = max(peak, int64(top)-int64(base))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(size), "B/answer")
		})
	}
}

// discard answers GET path from m, reading the body as it arrives and
// keeping none of it; it returns the body's size.
func discard(b *testing.B, m *Main, path string) int64 {
	resp, err := http.Get("http://" + m.Addr() + path)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s = %d after %d bytes: %v", path, resp.StatusCode, n, err)
	}
	return n
}

// buildReport builds q's report whole and encodes it, as an answer built
// in memory is; it returns the encoding's size.
func buildReport(b *testing.B, r *stats.Reporter, q stats.Query) int64 {
	rep, err := r.Report(context.Background(), q)
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		b.Fatal(err)
	}
	return int64(len(body))
}
