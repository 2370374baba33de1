package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/api"
	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

type nopPay struct{}

func (nopPay) Pay(context.Context, pay.PayRequest) (*pay.Order, error) {
	return nil, errors.New("unused")
}
func (nopPay) Get(context.Context, string) (*pay.Order, error) { return nil, errors.New("unused") }

type fakeReports struct {
	rep       stats.Report
	merchants []stats.MerchantReportRow
	amounts   []stats.AmountBucket
	changes   []stats.KeyChange
	err       error
	got       []stats.Query
	// reported are the queries of Report alone.
	reported []stats.Query
}

func (f *fakeReports) Changes(_ context.Context, q stats.Query) ([]stats.KeyChange, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []stats.KeyChange
	for _, c := range f.changes {
		if !c.Bucket.Before(q.From) && c.Bucket.Before(q.To) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeReports) Amounts(_ context.Context, q stats.Query) (stats.AmountReport, error) {
	f.got = append(f.got, q)
	if f.err != nil {
		return stats.AmountReport{}, f.err
	}
	return stats.AmountReport{From: q.From, To: q.To, Granularity: q.Granularity, Rows: f.amounts}, nil
}

// Merchants answers the rows of f.merchants that q selects: its bizType,
// channel and keys.
func (f *fakeReports) Merchants(_ context.Context, q stats.Query) (stats.MerchantReport, error) {
	f.got = append(f.got, q)
	if f.err != nil {
		return stats.MerchantReport{}, f.err
	}
	r := stats.MerchantReport{From: q.From, To: q.To, Granularity: q.Granularity, GroupBy: stats.GroupByMerchant, Rows: []stats.MerchantReportRow{}}
	for _, row := range f.merchants {
		key := ratelimit.Key{BizType: row.BizType, Channel: row.Channel}
		if (q.BizType == "" || q.BizType == row.BizType) && (q.Channel == "" || q.Channel == row.Channel) &&
			(len(q.Keys) == 0 || slices.Contains(q.Keys, key)) {
			r.Rows = append(r.Rows, row)
		}
	}
	return r, nil
}

// Report answers the rows of f.rep that q selects, as the stats store
// does: its bizType, channel and keys.
func (f *fakeReports) Stream(ctx context.Context, q stats.Query, w stats.ReportWriter) error {
	rep, err := f.Report(ctx, q)
	if err != nil {
		return err
	}
	return stats.WriteReport(w, rep)
}

func (f *fakeReports) Report(_ context.Context, q stats.Query) (stats.Report, error) {
	f.got = append(f.got, q)
	f.reported = append(f.reported, q)
	if f.err != nil {
		return stats.Report{}, f.err
	}
	r := stats.Report{From: q.From, To: q.To, Granularity: q.Granularity}
	for _, row := range f.rep.Rows {
		key := ratelimit.Key{BizType: row.BizType, Channel: row.Channel}
		if (q.BizType == "" || q.BizType == row.BizType) && (q.Channel == "" || q.Channel == row.Channel) &&
			(len(q.Keys) == 0 || slices.Contains(q.Keys, key)) {
			r.Rows = append(r.Rows, row)
		}
	}
	return r, nil
}

// fakeUsage serves a fixed config, each window 3/4 full; bizType DOWN
// fails to read.
type fakeUsage struct {
	cfg *ratelimit.Config
	// now, when set, is the instant of the rule in force; default the
	// wall clock.
	now time.Time
}

func (f fakeUsage) Config() *ratelimit.Config { return f.cfg }
func (f fakeUsage) Usage(_ context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	r := f.cfg.RuleAt(k, time.Now())
	if !f.now.IsZero() {
		r = f.cfg.RuleAt(k, f.now)
	}
	if k.BizType == "DOWN" {
		return r, nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	counts := make([]int64, len(r.Windows))
	for i, w := range r.Windows {
		counts[i] = w.Limit * 3 / 4
	}
	return r, counts, nil
}

func (f fakeUsage) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	return usageOfEach(ctx, keys, f.Usage)
}

// usageOfEach answers UsageOf key by key from usage, a fake's Usage.
func usageOfEach(ctx context.Context, keys []ratelimit.Key, usage func(context.Context, ratelimit.Key) (ratelimit.Rule, []int64, error)) []ratelimit.KeyUsage {
	out := make([]ratelimit.KeyUsage, len(keys))
	for i, k := range keys {
		out[i].Rule, out[i].Counts, out[i].Err = usage(ctx, k)
	}
	return out
}

type fakeLimitsView struct {
	cfg    *ratelimit.Config
	routes limits.Routes
	st     configcenter.Status
	// now, when set, is the instant Usage reads the rule in force at.
	now time.Time
}

func (f fakeLimitsView) Config() *ratelimit.Config   { return f.cfg }
func (f fakeLimitsView) Status() configcenter.Status { return f.st }
func (f fakeLimitsView) Degraded() bool              { return true }
func (f fakeLimitsView) Routes() limits.Routes       { return f.routes }
func (f fakeLimitsView) Usage(ctx context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	return fakeUsage{cfg: f.cfg, now: f.now}.Usage(ctx, k)
}
func (f fakeLimitsView) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	return usageOfEach(ctx, keys, f.Usage)
}

var now = time.Date(2026, 3, 1, 10, 30, 20, 0, time.UTC)

type testServer struct {
	srv     *httptest.Server
	reports *fakeReports
	v       *api.Validator
}

func newTestServer(t *testing.T, token string) *testServer {
	t.Helper()
	gin.SetMode(gin.TestMode)
	parsed, err := limits.Parse([]byte(`window: 1s
limits:
  PAY:ALIPAY: 100
  PAY:WECHAT: -1
  PAY:UNIONPAY: 0
  SHOP:ALIPAY: {limit: 8, window: 1m, shadow: true}
  DOWN:ALIPAY: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	rows := []stats.ReportRow{
		{BizType: "PAY", Channel: "ALIPAY", Bucket: now.Truncate(time.Minute).Add(-2 * time.Minute), Attempts: 12, Admitted: 9, Limited: 3,
			LimitedRate: 0.25, PeakUtilization: 1, Limit: "100/1s", LimitChanged: true, LimitChanges: []string{"50/1s -> 100/1s"}},
		{BizType: "other", Channel: "WECHAT", Bucket: now.Truncate(time.Minute), Attempts: 4, Admitted: 4, Limit: "unlimited", LimitChanges: []string{}},
	}
	fr := &fakeReports{rep: stats.Report{Rows: rows}}
	lv := fakeLimitsView{cfg: cfg, st: configcenter.Status{Loaded: true, Source: "file", Name: "/etc/limits.yaml", MD5: "0123456789abcdef0123456789abcdef",
		LoadedAt: now.Add(-time.Hour), Applied: 2, Refusals: 1, LastRefusal: `limits: key "a<b>" is bad`,
		LastRefusalAt: now.Add(-2 * time.Hour), LastRefusalSuperseded: true}}
	routes, err := console.New(console.Options{Reports: fr, Usage: fakeUsage{cfg: cfg}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Pay: nopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: token,
		Console: routes})
	if err != nil {
		t.Fatal(err)
	}
	v, err := api.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{srv: httptest.NewServer(h), reports: fr, v: v}
	t.Cleanup(s.srv.Close)
	return s
}

type answer struct {
	status int
	header http.Header
	body   string
}

// get calls path and checks the answer against api/openapi.yaml.
func (s *testServer) get(t *testing.T, path, token string) answer {
	t.Helper()
	return s.do(t, http.MethodGet, path, token, "")
}

// do sends method to path, with body as JSON when it is not empty, and
// checks the answer against api/openapi.yaml.
func (s *testServer) do(t *testing.T, method, path, token, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := s.v.CheckResponse(req, resp.StatusCode, resp.Header, b); err != nil {
		t.Errorf("%s %s breaks api/openapi.yaml: %v\n%s", method, path, err, b)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

const window = "from=2026-03-01T10:00:00Z&to=2026-03-01T11:00:00Z"

func TestReportRoute(t *testing.T) {
	s := newTestServer(t, "tok")
	t.Run("json", func(t *testing.T) {
		a := s.get(t, "/reports/channel-limits?"+window+"&bizType=PAY", "tok")
		if a.status != 200 {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(a.body), &rep); err != nil {
			t.Fatal(err)
		}
		if rep["from"] != "2026-03-01T10:00:00Z" || rep["granularity"] != "minute" || len(rep["rows"].([]any)) != 1 { // PAY:ALIPAY; not other:WECHAT
			t.Errorf("body %s", a.body)
		}
		if q := s.reports.got[len(s.reports.got)-1]; q.BizType != "PAY" || q.Format != stats.FormatJSON {
			t.Errorf("report service got %+v", q)
		}
	})
	t.Run("csv", func(t *testing.T) {
		a := s.get(t, "/reports/channel-limits?"+window+"&format=csv&granularity=hour", "tok")
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/csv") {
			t.Fatalf("status %d, type %q", a.status, a.header.Get("Content-Type"))
		}
		lines := strings.Split(strings.TrimSpace(a.body), "\n")
		if len(lines) != 3 || lines[0] != strings.Join(stats.Columns, ",") {
			t.Fatalf("csv:\n%s", a.body)
		}
		if cd := a.header.Get("Content-Disposition"); !strings.Contains(cd, "channel-limits-20260301T1000Z-hour.csv") {
			t.Errorf("Content-Disposition %q", cd)
		}
	})
	t.Run("bad parameters name every field", func(t *testing.T) {
		a := s.get(t, "/reports/channel-limits?from=2026-03-01T10:00:00Z&to=2026-03-03T10:00:00Z&format=xml", "tok")
		if a.status != 400 || !strings.Contains(a.body, `"field":"to"`) || !strings.Contains(a.body, `"field":"format"`) ||
			!strings.Contains(a.body, "at most 24h") {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
	})
	t.Run("database down", func(t *testing.T) {
		s.reports.err = errors.New("dial tcp: connection refused")
		defer func() { s.reports.err = nil }()
		a := s.get(t, "/reports/channel-limits?"+window, "tok")
		if a.status != 503 || !strings.Contains(a.body, `"dependency":"database"`) {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
	})
	t.Run("admin token required", func(t *testing.T) {
		for _, p := range []string{"/reports/channel-limits?" + window, "/channels/usage", "/dashboard"} {
			if a := s.get(t, p, ""); a.status != 401 {
				t.Errorf("%s without token: %d", p, a.status)
			}
			if a := s.get(t, p, "wrong"); a.status != 401 {
				t.Errorf("%s with a wrong token: %d", p, a.status)
			}
		}
	})
}

func TestUsageRoute(t *testing.T) {
	s := newTestServer(t, "")
	a := s.get(t, "/channels/usage", "")
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	var body struct {
		LimiterDegraded bool `json:"limiterDegraded"`
		Keys            []struct {
			Key         string   `json:"key"`
			Rule        string   `json:"rule"`
			Unlimited   bool     `json:"unlimited"`
			Shadow      bool     `json:"shadow"`
			Closed      bool     `json:"closed"`
			Utilization *float64 `json:"utilization"`
			Error       string   `json:"error"`
			Windows     []struct {
				Count *int64 `json:"count"`
			} `json:"windows"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range body.Keys {
		u := "null"
		if k.Utilization != nil {
			u = strconv.FormatFloat(*k.Utilization, 'f', -1, 64)
		}
		got[k.Key] = k.Rule + " util=" + u
		if k.Error != "" {
			got[k.Key] += " error"
		}
		if k.Shadow {
			got[k.Key] += " shadow"
		}
		if k.Closed {
			got[k.Key] += " closed"
		}
		if k.Unlimited {
			got[k.Key] += " unlimited"
		}
	}
	want := map[string]string{
		"DOWN:ALIPAY":  "5/1s util=null error",
		"PAY:ALIPAY":   "100/1s util=0.75",
		"PAY:UNIONPAY": "0/1s util=1 closed",
		"PAY:WECHAT":   "unlimited util=0 unlimited",
		"SHOP:ALIPAY":  "8/1m (shadow) util=0.75 shadow",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if len(body.Keys) != len(want) || body.Keys[0].Key != "DOWN:ALIPAY" || !body.LimiterDegraded {
		t.Errorf("keys not sorted or degraded flag lost: %s", a.body)
	}
}

func TestDashboardRoute(t *testing.T) {
	s := newTestServer(t, "")
	a := s.get(t, "/dashboard", "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d type %q: %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	page := a.body
	// The history query covers the last hour in whole minutes.
	q := s.reports.got[len(s.reports.got)-1]
	if !q.From.Equal(time.Date(2026, 3, 1, 9, 31, 0, 0, time.UTC)) || !q.To.Equal(time.Date(2026, 3, 1, 10, 31, 0, 0, time.UTC)) || q.Granularity != stats.Minute {
		t.Errorf("history query %+v", q)
	}
	for _, key := range []string{"PAY:ALIPAY", "PAY:WECHAT", "PAY:UNIONPAY", "SHOP:ALIPAY", "DOWN:ALIPAY"} {
		if !strings.Contains(page, `<svg class="usage-bar" data-key="`+key+`"`) {
			t.Errorf("no utilisation bar for %s", key)
		}
		if !strings.Contains(page, `<svg class="history-chart" data-key="`+key+`"`) {
			t.Errorf("no history chart for %s", key)
		}
	}
	if !strings.Contains(page, `data-key="other:WECHAT"`) {
		t.Error("no history chart for the other:WECHAT bucket")
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="10">`,
		`0123456789abcdef0123456789abcdef`, // the version
		`file /etc/limits.yaml`,
		`id="degraded"`,
		`75 / 100 in 1s`, `>75%<`,
		`9 admitted · 3 limited (25.0%)`,
		`limit changed`,
		`a&lt;b&gt;`, // refusal text is escaped
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "a<b>") || regexp.MustCompile(`(src|href)="https?:`).MatchString(page) {
		t.Error("the page has a script, an unescaped value or an external resource")
	}
	if n := strings.Count(page, `class="admitted"`); n != 2 {
		t.Errorf("%d admitted bars, want 2 (one minute each for PAY:ALIPAY and other:WECHAT)", n)
	}
	if n := strings.Count(page, `class="limited"`); n != 1 {
		t.Errorf("%d limited bars, want 1", n)
	}
	t.Run("a failing stats database leaves a message, not an error", func(t *testing.T) {
		s.reports.err = errors.New("db down")
		defer func() { s.reports.err = nil }()
		a := s.get(t, "/dashboard", "")
		if a.status != 200 || !strings.Contains(a.body, "stats database is unavailable") {
			t.Fatalf("status %d", a.status)
		}
	})
}

func TestAmountReportRoute(t *testing.T) {
	s := newTestServer(t, "tok")
	s.reports.amounts = []stats.AmountBucket{
		{Start: now.Truncate(time.Hour), Channel: "ALIPAY", Currency: "CNY", Admitted: 3, AdmittedAmount: 3005, Refused: 1, RefusedAmount: 500000000},
		{Start: now.Truncate(time.Hour), Channel: "other", Currency: "other", Refused: 1, RefusedAmount: 9},
	}
	a := s.get(t, "/reports/channel-amounts?"+window+"&granularity=hour&channel=ALIPAY", "tok")
	if a.status != 200 || !strings.Contains(a.body, `"admittedAmount":3005`) || !strings.Contains(a.body, `"refusedAmount":500000000`) {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if q := s.reports.got[len(s.reports.got)-1]; q.Channel != "ALIPAY" || q.Granularity != stats.Hour {
		t.Errorf("report service got %+v", q)
	}
	if !strings.Contains(a.body, `"admittedAmountMajor":"30.05"`) || !strings.Contains(a.body, `"refusedAmountMajor":"5000000.00"`) {
		t.Errorf("JSON lacks the amounts in major units: %s", a.body)
	}
	if c := s.get(t, "/reports/channel-amounts?"+window+"&granularity=hour&format=csv", "tok"); c.status != 200 ||
		!strings.Contains(c.body, ",ALIPAY,CNY,3,3005,30.05,1,500000000,5000000.00\n") {
		t.Errorf("CSV: status %d\n%s\nwant both minor and major units", c.status, c.body)
	}
	for _, bad := range []struct{ q, field string }{{"&bizType=PAY", "bizType"}, {"&format=xml", "format"}, {"&channel=a%20b", "channel"}} {
		a := s.get(t, "/reports/channel-amounts?"+window+bad.q, "tok")
		if a.status != 400 || !strings.Contains(a.body, `"field":"`+bad.field+`"`) {
			t.Errorf("%s: status %d %s; want 400 naming %s", bad.q, a.status, a.body, bad.field)
		}
	}
}

// TestReportRouteByMerchant: groupBy=merchant answers the merchant rows,
// as JSON and CSV, true to api/openapi.yaml; another groupBy is 400.
func TestReportRouteByMerchant(t *testing.T) {
	s := newTestServer(t, "tok")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s.reports.merchants = []stats.MerchantReportRow{
		{BizType: "PAY", Channel: "ALIPAY", Merchant: "M_1", Bucket: at, Attempts: 5, Admitted: 3, Refused: 2},
		{BizType: "PAY", Channel: "ALIPAY", Merchant: stats.Other, Bucket: at, Attempts: 1, Admitted: 1},
	}
	tests := []struct {
		query, wantType, want string
		status                int
	}{
		{"&groupBy=merchant", "application/json", `"merchant":"M_1","bucket":"2026-03-01T10:00:00Z","attempts":5,"admitted":3,"refused":2`, 200},
		{"&groupBy=merchant&format=csv", "text/csv", "bizType,channel,merchant,bucket,attempts,admitted,refused\nPAY,ALIPAY,M_1,2026-03-01T10:00:00Z,5,3,2\nPAY,ALIPAY,other,", 200},
		{"&groupBy=key", "application/json", `"limitChanged"`, 200},
		{"&groupBy=currency", "application/json", `"field":"groupBy"`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			a := s.get(t, "/reports/channel-limits?"+window+tt.query, "tok")
			if a.status != tt.status || !strings.HasPrefix(a.header.Get("Content-Type"), tt.wantType) || !strings.Contains(a.body, tt.want) {
				t.Errorf("status %d, type %q, body\n%s\nwant %d, %s, %q", a.status, a.header.Get("Content-Type"), a.body, tt.status, tt.wantType, tt.want)
			}
		})
	}
	if q := s.reports.got[len(s.reports.got)-1]; q.GroupBy != stats.GroupByKey {
		t.Errorf("groupBy=key reached the service as %q", q.GroupBy)
	}
}
