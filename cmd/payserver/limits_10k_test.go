package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// manyKeys is the size of the large limits document: limits.MaxKeys.
const manyKeys = 10_000

// manyKey is the i-th key of the large document (from 1): BIZ0001:ALIPAY.
func manyKey(i int) ratelimit.Key {
	return ratelimit.Key{BizType: fmt.Sprintf("BIZ%04d", i), Channel: "ALIPAY"}
}

// manyKeysDoc is a limits document of n keys BIZ0001:ALIPAY, …, each with
// a sliding count window and a calendar day.
func manyKeysDoc(n int) []byte {
	var b strings.Builder
	b.WriteString("limits:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  %s: [{limit: 100, window: 1s}, {limit: 1000, calendar: day}]\n", manyKey(i))
	}
	return []byte(b.String())
}

// startManyKeys starts the embedded default (SQLite, the in-process
// limiter journaled in the data dir) on a random port with the n-key
// document, and admits one payment's slot on each key so that every
// window holds something. It is closed when tb ends.
func startManyKeys(tb testing.TB, n int) *Main {
	tb.Helper()
	cfg := embeddedConfig(tb, tb.TempDir())
	if err := os.WriteFile(cfg.LimitsFile, manyKeysDoc(n), 0o600); err != nil {
		tb.Fatal(err)
	}
	m := NewMain(cfg, slog.New(slog.DiscardHandler))
	if err := m.Run(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = m.Close() })
	if got := len(m.limiter.Config().Rules); got != n {
		tb.Fatalf("%d keys in force, want %d", got, n)
	}
	for i := 1; i <= n; i++ {
		if _, err := m.limiter.Allow(context.Background(), manyKey(i), fmt.Sprintf("seed-%d", i)); err != nil {
			tb.Fatal(err)
		}
	}
	return m
}

// seedHour stores, for each of the first n keys, one stats row per minute
// of the hour that ends with the current minute: the dashboard's chart
// span and the default report, every key busy in every minute.
func seedHour(tb testing.TB, m *Main, n int) {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Minute)
	rows := make([]stats.Row, 0, n*60)
	for minute := 0; minute < 60; minute++ {
		for i := 1; i <= n; i++ {
			rows = append(rows, stats.Row{Minute: now.Add(-time.Duration(minute) * time.Minute), Key: manyKey(i),
				Rule: "100/1s+1000/day[00:00 UTC]", Counts: stats.Counts{Attempts: 10, Admitted: 8, Limited: 2, PeakUtilization: 0.5}})
		}
	}
	if err := m.stats.store.Add(context.Background(), rows); err != nil {
		tb.Fatal(err)
	}
}

// fetch answers GET path from m (an admin route: m serves loopback
// without a token).
func fetch(tb testing.TB, m *Main, path string) (int, []byte) {
	tb.Helper()
	resp, err := http.Get("http://" + m.Addr() + path)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, body
}

// BenchmarkGetLimits10k times the admin pages at 10,000 keys through the
// real server (embedded default, loopback HTTP), one request at a time,
// side by side in one run: GET /limits, the dashboard's first and last
// pages, GET /channels/usage and the channel-limits report. Every window
// holds one admission and every key has a stats row in every minute of
// the last hour (600,000 rows). B/answer is the body's size.
//
//	go test ./cmd/payserver/ -run '^$' -bench BenchmarkGetLimits10k -benchtime 5x
func BenchmarkGetLimits10k(b *testing.B) {
	m := startManyKeys(b, manyKeys)
	seedHour(b, m, manyKeys)
	for _, c := range []struct{ name, path string }{
		{"limits", "/limits"},
		{"dashboard", "/dashboard"},
		{"dashboard-last", "/dashboard?page=200"},
		{"usage", "/channels/usage"},
		{"report-hourly", "/reports/channel-limits?granularity=hour"},
		{"report-minutes", "/reports/channel-limits"},
	} {
		b.Run(c.name, func(b *testing.B) {
			size := 0
			for b.Loop() {
				status, body := fetch(b, m, c.path)
				if status != http.StatusOK {
					b.Fatalf("GET %s = %d: %.300s", c.path, status, body)
				}
				size = len(body)
			}
			b.ReportMetric(float64(size), "B/answer")
		})
	}
}
