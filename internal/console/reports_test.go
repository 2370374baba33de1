package console_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"payserver/internal/configcenter"
	"payserver/internal/console"
	"payserver/internal/console/consoletest"
	"payserver/internal/httpapi"
	"payserver/internal/limits"
	"payserver/internal/stats"
)

func newTestServer(t *testing.T, token string) *consoletest.Server {
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
		{BizType: "PAY", Channel: "ALIPAY", Bucket: consoletest.Now.Truncate(time.Minute).Add(-2 * time.Minute), Attempts: 12, Admitted: 9, Limited: 3,
			LimitedRate: 0.25, PeakUtilization: 1, Limit: "100/1s", LimitChanged: true, LimitChanges: []string{"50/1s -> 100/1s"}},
		{BizType: "other", Channel: "WECHAT", Bucket: consoletest.Now.Truncate(time.Minute), Attempts: 4, Admitted: 4, Limit: "unlimited", LimitChanges: []string{}},
	}
	fr := &consoletest.Reports{Rep: stats.Report{Rows: rows}}
	lv := consoletest.LimitsView{Cfg: cfg, St: configcenter.Status{Loaded: true, Source: "file", Name: "/etc/limits.yaml", MD5: "0123456789abcdef0123456789abcdef",
		LoadedAt: consoletest.Now.Add(-time.Hour), Applied: 2, Refusals: 1, LastRefusal: `limits: key "a<b>" is bad`,
		LastRefusalAt: consoletest.Now.Add(-2 * time.Hour), LastRefusalSuperseded: true}}
	routes, err := console.New(console.Options{Reports: fr, Usage: consoletest.Usage{Cfg: cfg}, Limits: lv,
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return consoletest.Now }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Pay: consoletest.NopPay{}, Logger: slog.New(slog.DiscardHandler), AdminToken: token,
		Console: routes})
	if err != nil {
		t.Fatal(err)
	}
	s := consoletest.ServeHandler(t, h)
	s.Reports = fr
	return s
}

const window = "from=2026-03-01T10:00:00Z&to=2026-03-01T11:00:00Z"

func TestReportRoute(t *testing.T) {
	s := newTestServer(t, "tok")
	t.Run("json", func(t *testing.T) {
		a := s.Get(t, "/reports/channel-limits?"+window+"&bizType=PAY", "tok")
		if a.Status != 200 {
			t.Fatalf("status %d: %s", a.Status, a.Body)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(a.Body), &rep); err != nil {
			t.Fatal(err)
		}
		if rep["from"] != "2026-03-01T10:00:00Z" || rep["granularity"] != "minute" || len(rep["rows"].([]any)) != 1 { // PAY:ALIPAY; not other:WECHAT
			t.Errorf("body %s", a.Body)
		}
		if q := s.Reports.Got[len(s.Reports.Got)-1]; q.BizType != "PAY" || q.Format != stats.FormatJSON {
			t.Errorf("report service got %+v", q)
		}
	})
	t.Run("csv", func(t *testing.T) {
		a := s.Get(t, "/reports/channel-limits?"+window+"&format=csv&granularity=hour", "tok")
		if a.Status != 200 || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("status %d, type %q", a.Status, a.Header.Get("Content-Type"))
		}
		lines := strings.Split(strings.TrimSpace(a.Body), "\n")
		if len(lines) != 3 || lines[0] != strings.Join(stats.Columns, ",") {
			t.Fatalf("csv:\n%s", a.Body)
		}
		if cd := a.Header.Get("Content-Disposition"); !strings.Contains(cd, "channel-limits-20260301T1000Z-hour.csv") {
			t.Errorf("Content-Disposition %q", cd)
		}
	})
	t.Run("bad parameters name every field", func(t *testing.T) {
		a := s.Get(t, "/reports/channel-limits?from=2026-03-01T10:00:00Z&to=2026-03-03T10:00:00Z&format=xml", "tok")
		if a.Status != 400 || !strings.Contains(a.Body, `"field":"to"`) || !strings.Contains(a.Body, `"field":"format"`) ||
			!strings.Contains(a.Body, "at most 24h") {
			t.Fatalf("status %d: %s", a.Status, a.Body)
		}
	})
	t.Run("database down", func(t *testing.T) {
		s.Reports.Err = errors.New("dial tcp: connection refused")
		defer func() { s.Reports.Err = nil }()
		a := s.Get(t, "/reports/channel-limits?"+window, "tok")
		if a.Status != 503 || !strings.Contains(a.Body, `"dependency":"database"`) {
			t.Fatalf("status %d: %s", a.Status, a.Body)
		}
	})
	t.Run("admin token required", func(t *testing.T) {
		for _, p := range []string{"/reports/channel-limits?" + window, "/channels/usage", "/dashboard"} {
			if a := s.Get(t, p, ""); a.Status != 401 {
				t.Errorf("%s without token: %d", p, a.Status)
			}
			if a := s.Get(t, p, "wrong"); a.Status != 401 {
				t.Errorf("%s with a wrong token: %d", p, a.Status)
			}
		}
	})
}

func TestUsageRoute(t *testing.T) {
	s := newTestServer(t, "")
	a := s.Get(t, "/channels/usage", "")
	if a.Status != 200 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
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
	if err := json.Unmarshal([]byte(a.Body), &body); err != nil {
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
		t.Errorf("keys not sorted or degraded flag lost: %s", a.Body)
	}
}

func TestDashboardRoute(t *testing.T) {
	s := newTestServer(t, "")
	a := s.Get(t, "/dashboard", "")
	if a.Status != 200 || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("status %d type %q: %s", a.Status, a.Header.Get("Content-Type"), a.Body)
	}
	page := a.Body
	// The history query covers the last hour in whole minutes.
	q := s.Reports.Got[len(s.Reports.Got)-1]
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
		s.Reports.Err = errors.New("db down")
		defer func() { s.Reports.Err = nil }()
		a := s.Get(t, "/dashboard", "")
		if a.Status != 200 || !strings.Contains(a.Body, "stats database is unavailable") {
			t.Fatalf("status %d", a.Status)
		}
	})
}

func TestAmountReportRoute(t *testing.T) {
	s := newTestServer(t, "tok")
	s.Reports.AmountRows = []stats.AmountBucket{
		{Start: consoletest.Now.Truncate(time.Hour), Channel: "ALIPAY", Currency: "CNY", Admitted: 3, AdmittedAmount: 3005, Refused: 1, RefusedAmount: 500000000},
		{Start: consoletest.Now.Truncate(time.Hour), Channel: "other", Currency: "other", Refused: 1, RefusedAmount: 9},
	}
	a := s.Get(t, "/reports/channel-amounts?"+window+"&granularity=hour&channel=ALIPAY", "tok")
	if a.Status != 200 || !strings.Contains(a.Body, `"admittedAmount":3005`) || !strings.Contains(a.Body, `"refusedAmount":500000000`) {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	if q := s.Reports.Got[len(s.Reports.Got)-1]; q.Channel != "ALIPAY" || q.Granularity != stats.Hour {
		t.Errorf("report service got %+v", q)
	}
	if !strings.Contains(a.Body, `"admittedAmountMajor":"30.05"`) || !strings.Contains(a.Body, `"refusedAmountMajor":"5000000.00"`) {
		t.Errorf("JSON lacks the amounts in major units: %s", a.Body)
	}
	if c := s.Get(t, "/reports/channel-amounts?"+window+"&granularity=hour&format=csv", "tok"); c.Status != 200 ||
		!strings.Contains(c.Body, ",ALIPAY,CNY,3,3005,30.05,1,500000000,5000000.00\n") {
		t.Errorf("CSV: status %d\n%s\nwant both minor and major units", c.Status, c.Body)
	}
	for _, bad := range []struct{ q, field string }{{"&bizType=PAY", "bizType"}, {"&format=xml", "format"}, {"&channel=a%20b", "channel"}} {
		a := s.Get(t, "/reports/channel-amounts?"+window+bad.q, "tok")
		if a.Status != 400 || !strings.Contains(a.Body, `"field":"`+bad.field+`"`) {
			t.Errorf("%s: status %d %s; want 400 naming %s", bad.q, a.Status, a.Body, bad.field)
		}
	}
}

// TestReportRouteByMerchant: groupBy=merchant answers the merchant rows,
// as JSON and CSV, true to api/openapi.yaml; another groupBy is 400.
func TestReportRouteByMerchant(t *testing.T) {
	s := newTestServer(t, "tok")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s.Reports.MerchantRows = []stats.MerchantReportRow{
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
			a := s.Get(t, "/reports/channel-limits?"+window+tt.query, "tok")
			if a.Status != tt.status || !strings.HasPrefix(a.Header.Get("Content-Type"), tt.wantType) || !strings.Contains(a.Body, tt.want) {
				t.Errorf("status %d, type %q, body\n%s\nwant %d, %s, %q", a.Status, a.Header.Get("Content-Type"), a.Body, tt.status, tt.wantType, tt.want)
			}
		})
	}
	if q := s.Reports.Got[len(s.Reports.Got)-1]; q.GroupBy != stats.GroupByKey {
		t.Errorf("groupBy=key reached the service as %q", q.GroupBy)
	}
}
