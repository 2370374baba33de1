package witness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustParse(tb testing.TB, raw string) *Document {
	tb.Helper()
	d, err := ParseDocument([]byte(raw))
	if err != nil {
		tb.Fatalf("ParseDocument: %v\n%s", err, raw)
	}
	return d
}

// The shipped file is the documented format in full: it must parse, with
// the windows its comments describe.
func TestParseShippedLimits(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "configs", "channel-limits.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := mustParse(t, string(raw))
	alipay := d.Keys["ONLINE_PAY:ALIPAY"]
	if got := len(alipay.Windows); got != 3 {
		t.Fatalf("ONLINE_PAY:ALIPAY has %d windows, want 3", got)
	}
	wantIDs := []string{"count/1s", "amount/day[00:00 Asia/Shanghai] CNY", "count/day[00:00 Asia/Shanghai]"}
	for i, w := range alipay.Windows {
		if got := w.ID.String(); got != wantIDs[i] {
			t.Errorf("window %d = %s, want %s", i+1, got, wantIDs[i])
		}
	}
	if got := len(d.Keys["ONLINE_PAY:WECHAT"].Windows); got != 0 {
		t.Errorf("ONLINE_PAY:WECHAT (-1) has %d windows, want 0 (unlimited)", got)
	}
	if w := d.Keys["ONLINE_PAY:UNIONPAY"].Windows; len(w) != 1 || w[0].Limit != 50 || w[0].ID.SpanUs != 1e6 {
		t.Errorf("ONLINE_PAY:UNIONPAY = %+v, want 50 in the default 1s window", w)
	}
	if w := d.Keys["*:UNIONPAY"].Windows; len(w) != 1 || w[0].Reserve["REFUND"] != 40 {
		t.Errorf("*:UNIONPAY = %+v, want 200/1s with 40 kept for REFUND", w)
	}
	if len(d.Schedules) != 1 || len(d.Schedules[0].Rule.Windows) != 1 || d.Schedules[0].Rule.Windows[0].Limit != 0 {
		t.Errorf("schedules = %+v, want one closing *:UNIONPAY", d.Schedules)
	}
	if got := d.Routes["ONLINE_PAY"]; strings.Join(got, ",") != "ALIPAY,UNIONPAY,WECHAT" {
		t.Errorf("routes = %v", got)
	}
}

func TestParseDocumentForms(t *testing.T) {
	d := mustParse(t, `{"window":"1m","zone":"America/Santiago","limits":{"A:B":7,"A:C":{"limit":3,"window":"10ms","shadow":true},"A:D":0,
		"A:E":[{"amount":100,"window":"2h","currency":"USD"},{"limit":5,"calendar":"month","cutoff":"02:30","zone":"UTC"}]}}`)
	if w := d.Keys["A:B"].Windows[0]; w.Limit != 7 || w.ID.SpanUs != 60e6 {
		t.Errorf("A:B = %+v, want 7 per the default 1m", w)
	}
	if r := d.Keys["A:C"]; !r.Shadow || r.Windows[0].ID.SpanUs != 10e3 {
		t.Errorf("A:C = %+v, want a shadow 10ms window", r)
	}
	if w := d.Keys["A:D"].Windows; len(w) != 1 || w[0].Limit != 0 {
		t.Errorf("A:D = %+v, want closed", w)
	}
	e := d.Keys["A:E"].Windows
	if e[0].ID.String() != "amount/2h0m0s USD" || e[1].ID.String() != "count/month[02:30 UTC]" {
		t.Errorf("A:E = %s, %s", e[0].ID, e[1].ID)
	}
}

func TestParseDocumentRefuses(t *testing.T) {
	tests := map[string]string{
		"unknown top field":        "limits: {A:B: 1}\nlimts: {}",
		"unknown window field":     "limits: {A:B: [{limit: 1, curency: CNY}]}",
		"bad key":                  "limits: {ab:B: 1}",
		"fraction":                 "limits: {A:B: 1.5}",
		"limit and amount":         "limits: {A:B: [{limit: 1, amount: 2}]}",
		"window and calendar":      "limits: {A:B: [{limit: 1, window: 1s, calendar: day}]}",
		"bad cutoff":               "limits: {A:B: [{limit: 1, calendar: day, cutoff: \"24:00\"}]}",
		"Local zone":               "zone: Local\nlimits: {A:B: 1}",
		"reserve on own key":       "limits: {A:B: [{limit: 5, reserve: {R: 1}}]}",
		"reservations over limit":  "limits: {\"*:B\": [{limit: 5, reserve: {R: 3, S: 3}}]}",
		"window twice":             "limits: {A:B: [{limit: 1, window: 1s}, {limit: 2, window: 1000ms}]}",
		"schedule without its end": "schedules: [{key: A:B, from: \"2026-01-01T00:00:00Z\", limits: 0}]",
		"zone on a sliding window": "limits: {A:B: [{limit: 1, window: 1s, zone: UTC}]}",
		"negative other than -1":   "limits: {A:B: -2}",
		"window with a bad unit":   "window: 1w\nlimits: {A:B: 1}",
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseDocument([]byte(raw)); err == nil {
				t.Errorf("ParseDocument accepted:\n%s", raw)
			}
		})
	}
}

func TestRuleAtFollowsSchedules(t *testing.T) {
	d := mustParse(t, `
limits: {A:B: 10}
schedules:
  - {key: "A:B", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: [{limit: 300, window: 1s}]}
`)
	from := mustTime(t, "2026-11-30T18:00:00Z").UnixMicro()
	to := mustTime(t, "2026-11-30T20:00:00Z").UnixMicro()
	for _, tt := range []struct {
		at   int64
		want int64
	}{{from - 1, 10}, {from, 300}, {to - 1, 300}, {to, 10}} {
		if r, _ := d.ruleAt("A:B", tt.at); r.Windows[0].Limit != tt.want {
			t.Errorf("ruleAt(%d) limit = %d, want %d", tt.at, r.Windows[0].Limit, tt.want)
		}
	}
}
