package integration

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"payserver/internal/stats"
	"payserver/internal/testutil"
)

// keyTotals sums a report's rows per bizType:channel, keeping the last
// bucket's limit and every limit change.
type keyTotals struct {
	stats.Counts
	Limit   string
	Changes []string
}

func totalsByKey(rows []stats.ReportRow) map[string]keyTotals {
	out := map[string]keyTotals{}
	for _, r := range rows {
		k := r.BizType + ":" + r.Channel
		t := out[k]
		t.Add(stats.Counts{Attempts: r.Attempts, Admitted: r.Admitted, Limited: r.Limited, ShadowLimited: r.ShadowLimited,
			Degraded: r.Degraded, Released: r.Released, NearCacheRefusals: r.NearCacheRefusals, PeakUtilization: r.PeakUtilization})
		t.Limit = r.Limit
		t.Changes = append(t.Changes, r.LimitChanges...)
		out[k] = t
	}
	return out
}

func (s *server) report(t *testing.T, query url.Values) stats.Report {
	t.Helper()
	r := s.do(t, http.MethodGet, "/reports/channel-limits?"+query.Encode(), nil, nil)
	if r.Status != 200 {
		t.Fatalf("report: %d %s", r.Status, r.Body)
	}
	var body stats.Report
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// reportWindow is a minute-granularity query around [start, now].
func reportWindow(start time.Time) url.Values {
	return url.Values{
		"from": {start.Add(-2 * time.Minute).UTC().Format(time.RFC3339)},
		"to":   {time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)},
	}
}

// csvRows parses a CSV report back into rows, checking the header.
func csvRows(t *testing.T, body []byte) []stats.ReportRow {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v\n%s", err, body)
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(stats.Columns, ",") {
		t.Fatalf("CSV header %v, want %v", recs[0], stats.Columns)
	}
	var rows []stats.ReportRow
	for _, rec := range recs[1:] {
		n := func(i int) int64 {
			v, err := strconv.ParseInt(rec[i], 10, 64)
			if err != nil {
				t.Fatalf("CSV column %s: %q", stats.Columns[i], rec[i])
			}
			return v
		}
		f := func(i int) float64 {
			v, err := strconv.ParseFloat(rec[i], 64)
			if err != nil {
				t.Fatalf("CSV column %s: %q", stats.Columns[i], rec[i])
			}
			return v
		}
		changes := []string{}
		if rec[14] != "" {
			changes = strings.Split(rec[14], "; ")
		}
		bucket, err := time.Parse(time.RFC3339, rec[2])
		if err != nil {
			t.Fatalf("CSV bucket %q", rec[2])
		}
		rows = append(rows, stats.ReportRow{
			BizType: rec[0], Channel: rec[1], Bucket: bucket, Attempts: n(3), Admitted: n(4), Limited: n(5),
			ShadowLimited: n(6), Degraded: n(7), Released: n(8), NearCacheRefusals: n(9), LimitedRate: f(10),
			PeakUtilization: f(11), Limit: rec[12], LimitChanged: rec[13] == "true", LimitChanges: changes,
		})
	}
	return rows
}

// runReportCLI runs `payserver report` against the database of env.
func runReportCLI(t *testing.T, dsn string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(binary, append([]string{"report"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PAYSERVER_MYSQL_DSN=" + dsn,
		"PAYSERVER_DATA_DIR=" + filepath.Join(dir, "data"), "PAYSERVER_CONFIG=" + filepath.Join(dir, "none.yaml"), "PAYSERVER_LOG_LEVEL=warn"}
	mustWrite(t, filepath.Join(dir, "none.yaml"), "")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("payserver report %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestReportCountsAddUpAcrossInstances sends a known traffic mix through two
// instances sharing one database and Redis, and checks that the report (JSON,
// CSV and the CLI) counts exactly what was sent.
func TestReportCountsAddUpAcrossInstances(t *testing.T) {
	biz := testutil.UniqueName("REP")
	shadow := testutil.UniqueName("SHD")
	unknown := testutil.UniqueName("UNK")
	limits := fmt.Sprintf(`limits:
  %[1]s:ALIPAY: {limit: 5, window: 1h}
  %[1]s:WECHAT: -1
  %[2]s:ALIPAY: {limit: 3, window: 1h, shadow: true}
`, biz, shadow)
	dsn := testutil.MustFreshMySQL(t)
	// Only explicit flushes write: the report's own, and shutdown.
	env := map[string]string{"PAYSERVER_LIMITER_TIMEOUT": "2s"}
	config := "stats: {flushInterval: 1h}\n" + channelsConfig
	a := startServer(t, serverOptions{Limits: limits, DSN: dsn, Env: env, Config: config})
	b := startServer(t, serverOptions{Limits: limits, DSN: dsn, Env: env, Config: config})
	servers := []*server{a, b}
	start := time.Now()

	send := func(i int, requestID, bizType, ch string, want int) {
		t.Helper()
		if r := servers[i%2].pay(t, payBody(requestID, bizType, ch)); r.Status != want {
			t.Fatalf("%s %s:%s via instance %d: %d %s, want %d", requestID, bizType, ch, i%2, r.Status, r.Body, want)
		}
	}
	// Sequential, alternating instances: 5 admitted, then 7 limited.
	for i := 0; i < 12; i++ {
		want := 200
		if i >= 5 {
			want = 429
		}
		send(i, fmt.Sprintf("lim-%d", i), biz, "ALIPAY", want)
	}
	// Shadow: 3 admitted, 2 more "would have been refused" but admitted.
	for i := 0; i < 5; i++ {
		send(i, fmt.Sprintf("shd-%d", i), shadow, "ALIPAY", 200)
	}
	// A configured unlimited key, and unconfigured ones: ALIPAY is named in
	// the document (counted as other:ALIPAY), UNIONPAY is not (other:other).
	for i := 0; i < 3; i++ {
		send(i, fmt.Sprintf("unl-%d", i), biz, "WECHAT", 200)
	}
	send(0, "unk-1", unknown, "ALIPAY", 200)
	send(1, "unk-2", unknown, "ALIPAY", 200)
	send(0, "unk-3", unknown, "UNIONPAY", 200)
	// Neither a replay nor a bad request reaches the limiter: not counted.
	send(1, "lim-0", biz, "ALIPAY", 200)
	if r := a.pay(t, map[string]any{"requestId": "bad", "bizType": biz}); r.Status != 400 {
		t.Fatalf("bad request: %d", r.Status)
	}

	// Each report flushes the answering instance first: ask b, then a.
	q := reportWindow(start)
	b.report(t, q)
	rep := a.report(t, q)
	if rep.Granularity != stats.Minute || rep.From.IsZero() || !rep.To.After(rep.From) {
		t.Fatalf("report header %+v", rep)
	}
	from, to := rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339)
	got := totalsByKey(rep.Rows)
	nearCache := int64(a.metric(t, "payserver_limiter_decisions_total", `biz_type="`+biz+`"`, `source="near_cache"`) +
		b.metric(t, "payserver_limiter_decisions_total", `biz_type="`+biz+`"`, `source="near_cache"`))
	if nearCache == 0 {
		t.Fatal("no near-cache refusal: sequential refusals on one instance should come from its near-cache")
	}
	want := map[string]keyTotals{
		biz + ":ALIPAY":    {Counts: stats.Counts{Attempts: 12, Admitted: 5, Limited: 7, NearCacheRefusals: nearCache, PeakUtilization: 1}, Limit: "5/1h"},
		shadow + ":ALIPAY": {Counts: stats.Counts{Attempts: 5, Admitted: 5, ShadowLimited: 2, PeakUtilization: 1}, Limit: "3/1h (shadow)"},
		biz + ":WECHAT":    {Counts: stats.Counts{Attempts: 3, Admitted: 3}, Limit: "unlimited"},
		"other:ALIPAY":     {Counts: stats.Counts{Attempts: 2, Admitted: 2}, Limit: "unlimited"},
		"other:other":      {Counts: stats.Counts{Attempts: 1, Admitted: 1}, Limit: "unlimited"},
	}
	if len(got) != len(want) {
		t.Errorf("report has keys %v, want %v", keysOf(got), keysOf(want))
	}
	for k, w := range want {
		g := got[k]
		g.Changes = nil // checked in TestReportMarksLimitChanges
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", k, g, w)
		}
	}
	for _, r := range rep.Rows {
		if r.Attempts != r.Admitted+r.Limited {
			t.Errorf("row %+v: attempts != admitted + limited", r)
		}
		if r.BizType == biz && r.Channel == "ALIPAY" && r.Attempts > 0 &&
			r.LimitedRate != float64(int64(float64(r.Limited)/float64(r.Attempts)*10000+0.5))/10000 {
			t.Errorf("row %+v: limitedRate", r)
		}
	}

	t.Run("csv has the same rows", func(t *testing.T) {
		cq := url.Values{"from": {from}, "to": {to}, "format": {"csv"}}
		r := a.do(t, http.MethodGet, "/reports/channel-limits?"+cq.Encode(), nil, nil)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("csv: %d %s", r.Status, r.Header.Get("Content-Type"))
		}
		rows := csvRows(t, r.Body)
		jsonRows, _ := json.Marshal(rep.Rows)
		csvJSON, _ := json.Marshal(rows)
		if !bytes.Equal(jsonRows, csvJSON) {
			t.Fatalf("CSV rows differ from JSON rows:\njson %s\ncsv  %s", jsonRows, csvJSON)
		}
		t.Run("the CLI prints the same CSV", func(t *testing.T) {
			out := runReportCLI(t, dsn, "--from", from, "--to", to, "--format", "csv")
			if !bytes.Equal(out, r.Body) {
				t.Fatalf("payserver report --format csv:\n%s\nHTTP:\n%s", out, r.Body)
			}
			table := string(runReportCLI(t, dsn, "--from", from, "--to", to, "--bizType", biz))
			if !strings.Contains(table, "BUCKET") || !strings.Contains(table, biz) || strings.Contains(table, shadow) {
				t.Fatalf("table output:\n%s", table)
			}
		})
	})

	t.Run("filters and coarser buckets keep the totals", func(t *testing.T) {
		for _, g := range []string{"hour", "day"} {
			fq := url.Values{"from": {from}, "to": {to}, "granularity": {g}, "bizType": {biz}, "channel": {"ALIPAY"}}
			rows := a.report(t, fq).Rows
			for _, r := range rows {
				if r.BizType != biz || r.Channel != "ALIPAY" {
					t.Fatalf("%s report filtered on %s:ALIPAY has row %+v", g, biz, r)
				}
			}
			if tot := totalsByKey(rows)[biz+":ALIPAY"]; tot.Attempts != 12 || tot.Limited != 7 {
				t.Errorf("%s totals %+v", g, tot)
			}
		}
	})

	t.Run("bad parameters are refused with the field named", func(t *testing.T) {
		for query, field := range map[string]string{
			"from=2026-01-01T00:00:00Z&to=2026-01-03T00:00:00Z":                  "to",
			"from=2026-01-01T00:00:00Z&to=2026-01-01T01:00:00Z&granularity=week": "granularity",
			"from=2026-01-01T08:00:00+08:00":                                     "from", // an unencoded + is a space
			"from=1h":                                                            "from",
			"from=2026-01-01T00:00:00Z&to=2026-01-01T01:00:00Z&channel=alipay":   "channel",
		} {
			r := a.do(t, http.MethodGet, "/reports/channel-limits?"+query, nil, nil)
			if r.Status != 400 || !strings.Contains(string(r.Body), `"field":"`+field+`"`) {
				t.Errorf("%s: %d %s, want 400 naming %s", query, r.Status, r.Body, field)
			}
		}
	})

	t.Run("live usage shows the full windows", func(t *testing.T) {
		r := a.do(t, http.MethodGet, "/channels/usage", nil, nil)
		if r.Status != 200 {
			t.Fatalf("usage: %d %s", r.Status, r.Body)
		}
		var body struct {
			Keys []struct {
				Key         string   `json:"key"`
				Utilization *float64 `json:"utilization"`
				Unlimited   bool     `json:"unlimited"`
				Shadow      bool     `json:"shadow"`
				Windows     []struct {
					Count *int64 `json:"count"`
					Limit int64  `json:"limit"`
				} `json:"windows"`
			} `json:"keys"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, k := range body.Keys {
			switch k.Key {
			case biz + ":ALIPAY", shadow + ":ALIPAY":
				seen++
				if k.Utilization == nil || *k.Utilization != 1 || *k.Windows[0].Count != k.Windows[0].Limit {
					t.Errorf("%s: utilisation %v, windows %+v; want a full window", k.Key, k.Utilization, k.Windows)
				}
				if k.Shadow != (k.Key == shadow+":ALIPAY") {
					t.Errorf("%s: shadow %v", k.Key, k.Shadow)
				}
			case biz + ":WECHAT":
				seen++
				if !k.Unlimited || k.Utilization == nil || *k.Utilization != 0 {
					t.Errorf("%s: %+v", k.Key, k)
				}
			}
		}
		if seen != 3 {
			t.Errorf("usage shows %d of the 3 configured keys: %s", seen, r.Body)
		}
	})

	t.Run("metrics carry the channel labels", func(t *testing.T) {
		limited := a.metric(t, "payserver_limiter_decisions_total", `biz_type="`+biz+`"`, `channel="ALIPAY"`, `result="limited"`) +
			b.metric(t, "payserver_limiter_decisions_total", `biz_type="`+biz+`"`, `channel="ALIPAY"`, `result="limited"`)
		shadowed := a.metric(t, "payserver_limiter_decisions_total", `biz_type="`+shadow+`"`, `result="shadow_limited"`) +
			b.metric(t, "payserver_limiter_decisions_total", `biz_type="`+shadow+`"`, `result="shadow_limited"`)
		other := a.metric(t, "payserver_limiter_decisions_total", `biz_type="other"`, `channel="other"`) +
			b.metric(t, "payserver_limiter_decisions_total", `biz_type="other"`, `channel="other"`)
		if limited != 7 || shadowed != 2 || other != 3 {
			t.Errorf("decision metrics: limited %v (want 7), shadow_limited %v (want 2), other %v (want 3)", limited, shadowed, other)
		}
		if a.metric(t, "payserver_stats_flushes_total") < 1 || a.metric(t, "payserver_stats_flush_failures_total") != 0 {
			t.Error("stats flush metrics missing or failing")
		}
		if got := a.metric(t, "payserver_http_requests_total", `route="/reports/channel-limits"`, `status="200"`); got < 2 {
			t.Errorf("report requests counted %v", got)
		}
	})
}

// TestReportShutdownFlushesPendingCounts proves that the counts of an
// instance that never flushed (its interval is an hour) reach the database
// when it gets SIGTERM.
func TestReportShutdownFlushesPendingCounts(t *testing.T) {
	biz := testutil.UniqueName("SIG")
	limits := fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 2, window: 1h}\n", biz)
	dsn := testutil.MustFreshMySQL(t)
	config := "stats: {flushInterval: 1h}\n"
	a := startServer(t, serverOptions{Limits: limits, DSN: dsn, Config: config})
	reader := startServer(t, serverOptions{Limits: limits, DSN: dsn, Config: config})
	start := time.Now()
	for i, want := range []int{200, 200, 429, 429, 429} {
		if r := a.pay(t, payBody(fmt.Sprintf("sig-%d", i), biz, "ALIPAY")); r.Status != want {
			t.Fatalf("request %d: %d, want %d", i, r.Status, want)
		}
	}
	q := reportWindow(start)
	q.Set("bizType", biz)
	if rows := reader.report(t, q).Rows; len(rows) != 0 {
		t.Fatalf("counts reached the database before shutdown: %+v (the flush interval is 1h)", rows)
	}
	a.stop()
	if !strings.Contains(a.logs(), "payserver stopped") {
		t.Fatalf("instance did not stop gracefully:\n%s", a.logs())
	}
	got := totalsByKey(reader.report(t, q).Rows)[biz+":ALIPAY"]
	if got.Attempts != 5 || got.Admitted != 2 || got.Limited != 3 || got.Limit != "2/1h" {
		t.Fatalf("after SIGTERM the report has %+v, want 5 attempts, 2 admitted, 3 limited", got)
	}
	// The CLI reads the same database.
	table := string(runReportCLI(t, dsn, "--from", q.Get("from"), "--to", q.Get("to"), "--bizType", biz, "--granularity", "hour"))
	if !strings.Contains(table, biz) {
		t.Fatalf("CLI table lacks %s:\n%s", biz, table)
	}
}

// TestReportMarksLimitChanges edits the limits file while traffic flows and
// checks that the report shows the new limit and marks the change.
func TestReportMarksLimitChanges(t *testing.T) {
	biz := testutil.UniqueName("CHG")
	s := startServer(t, serverOptions{Limits: fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 100, window: 1m}\n", biz)})
	start := time.Now()
	if r := s.pay(t, payBody("chg-1", biz, "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay: %d", r.Status)
	}
	mustWrite(t, s.env["PAYSERVER_LIMITS_FILE"], fmt.Sprintf("limits:\n  %s:ALIPAY: {limit: 200, window: 1m}\n", biz))
	waitFor(t, "the new limit to apply", 5*time.Second, func() bool {
		return strings.Contains(string(s.do(t, http.MethodGet, "/limits", nil, nil).Body), `"rule":"200/1m"`)
	})
	if r := s.pay(t, payBody("chg-2", biz, "ALIPAY")); r.Status != 200 {
		t.Fatalf("pay: %d", r.Status)
	}
	q := reportWindow(start)
	q.Set("granularity", "hour")
	rep := s.report(t, q)
	got := totalsByKey(rep.Rows)[biz+":ALIPAY"]
	if got.Attempts != 2 || got.Limit != "200/1m" {
		t.Fatalf("totals %+v, want 2 attempts under 200/1m", got)
	}
	changed := false
	for _, r := range rep.Rows {
		for _, c := range r.LimitChanges {
			if c == "100/1m -> 200/1m" && r.LimitChanged {
				changed = true
			}
		}
	}
	if !changed {
		t.Fatalf("no row marks the change 100/1m -> 200/1m: %+v", rep.Rows)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
