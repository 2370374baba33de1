package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"payserver/internal/testutil"
)

// metricNameRE finds payserver metric names in a PromQL expression. A full
// PromQL parser (prometheus/promql/parser) would pull the Prometheus server
// module into go.mod; every metric payserver exports starts with
// "payserver_", and the rules and dashboard only ever use such names as
// metric selectors (never inside label values or strings), so identifiers
// with that prefix are exactly the metric names an expression uses.
// Functions, label names and keywords never start with it.
var metricNameRE = regexp.MustCompile(`\bpayserver_[a-zA-Z0-9_:]*`)

// metricNames returns the payserver_* metric names expr uses.
func metricNames(expr string) []string { return metricNameRE.FindAllString(expr, -1) }

// ruleExprs returns alert name → expression from a Prometheus rules file.
func ruleExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out["rule "+r.Alert+r.Record] = r.Expr
		}
	}
	return out
}

// dashboardExprs returns "panel title #refId" → expression for every
// Grafana target (rows' nested panels included) and templating query.
func dashboardExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: panel: %v", path, err)
			}
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel %q #%s", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out["variable $"+v.Name] = v.Definition
		}
	}
	return out
}

// exportedNames returns the metric names in a Prometheus text exposition:
// sample names (histograms' _bucket/_sum/_count included) and # TYPE names.
func exportedNames(body []byte) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			names[strings.Fields(rest)[0]] = true
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

func TestMetricNameExtraction(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{`max by (instance) (payserver_limiter_degraded) == 1 or sum(rate(payserver_limiter_degraded_total[2m])) > 0`,
			"payserver_limiter_degraded payserver_limiter_degraded_total"},
		{`histogram_quantile(0.99, sum by (le) (rate(payserver_limiter_check_seconds_bucket{instance=~"$instance"}[$__rate_interval])))`,
			"payserver_limiter_check_seconds_bucket"},
		{`time() - max(payserver_nacos_last_contact_timestamp_seconds) > 300`, "payserver_nacos_last_contact_timestamp_seconds"},
		{`up{job="x"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := strings.Join(metricNames(tt.expr), " "); got != tt.want {
				t.Fatalf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

// TestAlertAndDashboardMetricsExist: every payserver_* metric that
// deploy/prometheus/alerts.yml and deploy/grafana/payserver.json use is
// exported by a running payserver. The instance reads its limits from the
// real Nacos (so the Nacos gauges exist) and reaches the real Redis through
// a proxy the test cuts, so that the decision, degraded and Redis-error
// series exist too; it admits, limits, and records orders.
func TestAlertAndDashboardMetricsExist(t *testing.T) {
	exprs := ruleExprs(t, "../deploy/prometheus/alerts.yml")
	if len(exprs) < 7 {
		t.Fatalf("alerts.yml has %d rules, want at least 7", len(exprs))
	}
	for k, v := range dashboardExprs(t, "../deploy/grafana/payserver.json") {
		exprs[k] = v
	}
	for where, e := range exprs {
		if len(metricNames(e)) == 0 {
			t.Errorf("%s uses no payserver_* metric: %q", where, e)
		}
	}

	nacos := testutil.Env(t, "PAYSERVER_TEST_NACOS_ADDR")
	dataID := testutil.UniqueName("metrics-exist")
	biz := testutil.UniqueName("MX")
	// biz:ALIPAY fills up (admitted, then limited); biz:WECHAT never does,
	// so with Redis cut its checks go to the local windows rather than
	// being answered by the near-cache's memory of a full window.
	// biz:UNIONPAY's day is closed (limit 0): its calendar window has run
	// out, so the quota forecast series exist.
	good := fmt.Sprintf("window: 1m\nroutes:\n  %[1]s: [ALIPAY, WECHAT]\nlimits:\n  %[1]s:ALIPAY: 2\n  %[1]s:WECHAT: 100000\n  %[1]s:UNIONPAY: [{limit: 0, calendar: day}]\n", biz)
	nacosPublish(t, nacos, dataID, good)
	t.Cleanup(func() { nacosDelete(t, nacos, dataID) })
	redis := startProxy(t, testutil.RedisAddr(t))
	s := startServer(t, serverOptions{Env: map[string]string{
		"PAYSERVER_NACOS_ADDR": nacos, "PAYSERVER_NACOS_DATA_ID": dataID,
		"PAYSERVER_REDIS_ADDR": redis.addr, "PAYSERVER_LIMITER_POLICY": "local",
	}})
	waitFor(t, "limits from Nacos", 10*time.Second, func() bool { return limitsRule(t, s, biz+":ALIPAY") != "" })
	waitFor(t, "a quota forecast", 10*time.Second, func() bool {
		return exportedNames(s.do(t, http.MethodGet, "/metrics", nil, nil).Body)["payserver_quota_exhaustion_seconds"]
	})
	for i := 0; i < 3; i++ { // 2 admitted, 1 limited, through Redis
		s.pay(t, payBody(testutil.UniqueName("mx"), biz, "ALIPAY"))
	}
	// A routed payment falls back from the full ALIPAY to WECHAT.
	if r := s.pay(t, routedBody(testutil.UniqueName("mx"), biz)); r.Status != 200 {
		t.Fatalf("routed payment: %d %s", r.Status, r.Body)
	}
	redis.Down()
	waitFor(t, "a decision without Redis", 10*time.Second, func() bool {
		s.pay(t, payBody(testutil.UniqueName("mx"), biz, "WECHAT"))
		return s.metric(t, "payserver_limiter_degraded_total") > 0
	})
	waitFor(t, "Nacos contact recorded", 10*time.Second, func() bool {
		return s.metric(t, "payserver_nacos_last_contact_timestamp_seconds") > 0
	})
	// A refused document raises payserver_limits_refused_in_force; the
	// good one published again (the MD5 already in force) lowers it.
	for _, step := range []struct {
		content string
		want    float64
	}{{"limits:\n  not a key: 1\n", 1}, {good, 0}} {
		nacosPublish(t, nacos, dataID, step.content)
		waitFor(t, fmt.Sprintf("payserver_limits_refused_in_force = %v", step.want), 10*time.Second, func() bool {
			return s.metric(t, "payserver_limits_refused_in_force") == step.want
		})
	}

	r := s.do(t, http.MethodGet, "/metrics", nil, nil)
	if r.Status != 200 {
		t.Fatalf("/metrics answered %d", r.Status)
	}
	exported := exportedNames(r.Body)
	missing := map[string][]string{}
	used := map[string]bool{}
	for where, e := range exprs {
		for _, name := range metricNames(e) {
			used[name] = true
			if !exported[name] {
				missing[name] = append(missing[name], where)
			}
		}
	}
	if len(missing) > 0 {
		var lines []string
		for name, where := range missing {
			sort.Strings(where)
			lines = append(lines, fmt.Sprintf("%s (used by %s)", name, strings.Join(where, "; ")))
		}
		sort.Strings(lines)
		t.Fatalf("metrics used by the rules or the dashboard but not exported by payserver:\n  %s", strings.Join(lines, "\n  "))
	}
	t.Logf("%d payserver_* metrics used by %d rule and dashboard expressions, all exported", len(used), len(exprs))
}
