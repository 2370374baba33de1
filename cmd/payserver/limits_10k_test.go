package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
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
// side by side in one run: GET /limits whole and paged, the dashboard's
// first and last pages, GET /channels/usage and the channel-limits report. Every window
// holds one admission and every key has a stats row in every minute of
// the last hour (600,000 rows). B/answer is the body's size.
//
//	go test ./cmd/payserver/ -run '^$' -bench BenchmarkGetLimits10k -benchtime 5x
func BenchmarkGetLimits10k(b *testing.B) {
	m := startManyKeys(b, manyKeys)
	seedHour(b, m, manyKeys)
	for _, c := range []struct{ name, path string }{
		{"limits", "/limits"},
		{"limits-page100", "/limits?limit=100"},
		{"limits-page100-middle", "/limits?limit=100&after=BIZ5000:ALIPAY"},
		{"limits-page1000", "/limits?limit=1000"},
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

// limitsAnswer is what the tests read of GET /limits.
type limitsAnswer struct {
	Limits []struct {
		Key     string
		Rule    string
		Windows []struct{ Used *int64 }
	}
	Total int
	Next  *string
}

// TestGetLimitsPagesAt10k: at 10,000 keys GET /limits lists every key
// without paging parameters, and following next from a first page walks
// every key exactly once, in the same order, each with its rule and what
// its windows hold, for several page sizes.
func TestGetLimitsPagesAt10k(t *testing.T) {
	m := startManyKeys(t, manyKeys)
	read := func(path string) limitsAnswer {
		t.Helper()
		status, body := fetch(t, m, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d: %.300s", path, status, body)
		}
		var a limitsAnswer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	all := read("/limits")
	if len(all.Limits) != manyKeys || all.Total != manyKeys || all.Next != nil {
		t.Fatalf("unpaged: %d keys, total %d, next %v; want every one of %d, no next", len(all.Limits), all.Total, all.Next, manyKeys)
	}
	order := make([]string, len(all.Limits))
	seen := map[string]bool{}
	for i, l := range all.Limits {
		order[i] = l.Key
		seen[l.Key] = true
		if i > 0 && order[i-1] >= l.Key {
			t.Fatalf("unpaged: %s listed after %s", l.Key, order[i-1])
		}
		if l.Rule != "100/1s+1000/day[00:00 UTC]" || len(l.Windows) != 2 || l.Windows[1].Used == nil || *l.Windows[1].Used != 1 {
			t.Fatalf("unpaged: %s = %+v, want rule 100/1s+1000/day[00:00 UTC] with one admission in its day", l.Key, l)
		}
	}
	if len(seen) != manyKeys || !seen[manyKey(1).String()] || !seen[manyKey(manyKeys).String()] {
		t.Fatalf("unpaged: %d distinct keys, want every one of %d", len(seen), manyKeys)
	}
	for _, size := range []int{1000, 777} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var walked []string
			path := fmt.Sprintf("/limits?limit=%d", size)
			for pages := 1; ; pages++ {
				p := read(path)
				if p.Total != manyKeys || len(p.Limits) > size {
					t.Fatalf("%s: %d keys of total %d", path, len(p.Limits), p.Total)
				}
				for _, l := range p.Limits {
					if len(l.Windows) != 2 || l.Windows[1].Used == nil || *l.Windows[1].Used != 1 {
						t.Fatalf("%s: %s = %+v, want one admission in its day", path, l.Key, l)
					}
					walked = append(walked, l.Key)
				}
				if p.Next == nil {
					if want := (manyKeys + size - 1) / size; pages != want {
						t.Errorf("%d pages, want %d", pages, want)
					}
					break
				}
				if *p.Next != p.Limits[len(p.Limits)-1].Key {
					t.Fatalf("%s: next %q, want the page's last key", path, *p.Next)
				}
				path = fmt.Sprintf("/limits?limit=%d&after=%s", size, url.QueryEscape(*p.Next))
			}
			if !slices.Equal(walked, order) {
				t.Errorf("the pages walked %d keys, not the %d of the unpaged answer in its order", len(walked), len(order))
			}
		})
	}
}

// TestDashboardPagesAt10k: at 10,000 keys following the dashboard's next
// links shows every key of the document exactly once, in order, with its
// utilisation bar, limits row and chart (its hour of stats drawn), and
// the "other" bucket after them; a filter is kept across pages.
func TestDashboardPagesAt10k(t *testing.T) {
	m := startManyKeys(t, manyKeys)
	minute := time.Now().UTC().Truncate(time.Minute)
	other := ratelimit.Key{BizType: stats.Other, Channel: "ALIPAY"}
	var rows []stats.Row
	for _, k := range []ratelimit.Key{manyKey(1), manyKey(manyKeys - 1), other} {
		rows = append(rows, stats.Row{Minute: minute, Key: k, Rule: "100/1s+1000/day[00:00 UTC]", Counts: stats.Counts{Attempts: 10, Admitted: 8, Limited: 2}})
	}
	if err := m.stats.store.Add(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	page := func(path string) string {
		t.Helper()
		status, body := fetch(t, m, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d: %.300s", path, status, body)
		}
		return string(body)
	}
	bars := regexp.MustCompile(`<svg class="usage-bar" data-key="([^"]+)"`)
	charts := regexp.MustCompile(`<svg class="history-chart" data-key="([^"]+)"`)
	next := regexp.MustCompile(`<a href="([^"]+)">next →</a>`)
	var barKeys, chartKeys []string
	path := "/dashboard?pageSize=200"
	for pages := 1; ; pages++ {
		body := page(path)
		first := len(chartKeys) + 1
		for _, b := range bars.FindAllStringSubmatch(body, -1) {
			barKeys = append(barKeys, b[1])
			if !strings.Contains(body, `<td class="key">`+b[1]+`</td>
      <td class="key">100/1s&#43;1000/day[00:00 UTC]</td>`) {
				t.Fatalf("%s: no limits row for %s", path, b[1])
			}
		}
		for _, c := range charts.FindAllStringSubmatch(body, -1) {
			chartKeys = append(chartKeys, c[1])
		}
		if want := fmt.Sprintf("keys %d–%d of %d", first, len(chartKeys), manyKeys+1); !strings.Contains(body, want) {
			t.Fatalf("%s does not say %q", path, want)
		}
		for _, k := range []ratelimit.Key{manyKey(1), manyKey(manyKeys - 1), other} {
			chart := regexp.MustCompile(`(?s)<span class="key">` + regexp.QuoteMeta(k.String()) + `</span>.*?</svg>`).FindString(body)
			// 8 seeded admissions (and the key's seed admission, counted in
			// the same minute) and 2 seeded refusals.
			if chart != "" && !strings.Contains(chart, " admitted · 2 limited") {
				t.Errorf("%s: the chart of %s does not draw its hour:\n%.500s", path, k, chart)
			}
		}
		link := next.FindStringSubmatch(body)
		if link == nil {
			if want := (manyKeys + 1 + 199) / 200; pages != want {
				t.Errorf("%d pages, want %d", pages, want)
			}
			break
		}
		path = html.UnescapeString(link[1])
	}
	want := make([]string, manyKeys)
	for i := range want {
		want[i] = manyKey(i + 1).String()
	}
	slices.Sort(want)
	if !slices.Equal(barKeys, want) {
		t.Errorf("the pages show %d utilisation bars, not each of the %d keys once in order", len(barKeys), manyKeys)
	}
	if !slices.Equal(chartKeys, append(want, other.String())) {
		t.Errorf("the pages show %d charts, not each key once in order then %s", len(chartKeys), other)
	}

	filtered := page("/dashboard?channel=ALIPAY&pageSize=100&page=3")
	for _, want := range []string{"keys 201–300 of 10001", `href="/dashboard?channel=ALIPAY&amp;page=2&amp;pageSize=100"`,
		`href="/dashboard?channel=ALIPAY&amp;page=4&amp;pageSize=100"`} {
		if !strings.Contains(filtered, want) {
			t.Errorf("channel=ALIPAY page 3 lacks %q", want)
		}
	}
	if one := page("/dashboard?bizType=BIZ0042"); !strings.Contains(one, "keys 1–1 of 1") || len(bars.FindAllString(one, -1)) != 1 {
		t.Error("bizType=BIZ0042 does not show its one key")
	}
}
