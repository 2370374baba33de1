package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"payserver/internal/limits"
)

// TestCheckLimitsQuotaDocument: check-limits shows calendar, amount and
// reserve windows and each schedule's state, and refuses what the live
// loader refuses, naming the key.
func TestCheckLimitsQuotaDocument(t *testing.T) {
	good := writeTemp(t, `zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 100, window: 1s}
    - {amount: 500000000, calendar: day}
  "*:UNIONPAY": [{limit: 200, window: 1s, reserve: {REFUND: 40}}]
schedules:
  - {key: "*:UNIONPAY", from: "2020-12-01T02:00:00+08:00", to: "2020-12-01T04:00:00+08:00", limits: 0}
  - {key: "*:UNIONPAY", from: "2099-12-01T02:00:00+08:00", to: "2099-12-01T04:00:00+08:00", limits: 0}
`)
	var out, errOut bytes.Buffer
	if code := run([]string{"check-limits", good}, envFrom(nil), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"zone Asia/Shanghai",
		"100/1s+amount 500000000 minor units/day[00:00 Asia/Shanghai]",
		"200/1s{REFUND:40}",
		"2020-12-01T02:00:00+08:00 .. 2020-12-01T04:00:00+08:00  0/1s  (past, ignored)",
		"2099-12-01T02:00:00+08:00 .. 2099-12-01T04:00:00+08:00  0/1s  (upcoming)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, tt := range []struct{ doc, want string }{
		{"zone: Nowhere/Town\nlimits:\n  A:B: 1\n", "unknown time zone"},
		{"limits:\n  A:B: [{limit: 1, calendar: day, cutoff: \"25:00\"}]\n", `key "A:B": window 1: cutoff`},
		{"limits:\n  A:B: [{amount: -3}]\n", `key "A:B": window 1: amount -3 is negative`},
		{"limits:\n  \"*:U\": [{limit: 5, reserve: {REFUND: 6}}]\n", `key "*:U": window 1: reserve`},
		{"limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-03T00:00:00Z\", limits: 0}\n  - {key: A:B, from: \"2026-01-02T00:00:00Z\", to: \"2026-01-04T00:00:00Z\", limits: 0}\n", `schedules of key "A:B" overlap`},
		{"limits:\n  A:B: [{limit: 1, calendar: day, cutof: \"23:00\"}]\n", `key "A:B": window 1: unknown field "cutof"`},
	} {
		out.Reset()
		errOut.Reset()
		if code := run([]string{"check-limits", writeTemp(t, tt.doc)}, envFrom(nil), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("check-limits %q: exit %d, %q; want 1 and %q", tt.doc, code, errOut.String(), tt.want)
		}
	}
}

func TestPrintLimitsActiveSchedule(t *testing.T) {
	doc, err := limits.Parse([]byte("limits:\n  A:B: 5\nschedules:\n  - {key: A:B, from: \"2026-12-01T00:00:00Z\", to: \"2026-12-02T00:00:00Z\", limits: -1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printLimits(&out, doc, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if !strings.Contains(out.String(), "unlimited  (ACTIVE now)") || !strings.Contains(out.String(), "5/1s") {
		t.Errorf("output:\n%s\nwant the base 5/1s and the active schedule", out.String())
	}
}

// TestCheckLimitsAt: --at shows the rules in force at an instant, the
// schedule applied and each calendar window's period, in text and JSON; at
// Santiago's midnight DST gap the day runs to 01:00 of the next date.
func TestCheckLimitsAt(t *testing.T) {
	doc := writeTemp(t, `limits:
  DEMO:WECHAT: [{limit: 3, calendar: day, zone: America/Santiago}, {limit: 10, window: 1m}]
  ONLINE_PAY:ALIPAY: 5
schedules:
  - {key: "ONLINE_PAY:ALIPAY", from: "2024-09-07T20:00:00-04:00", to: "2024-09-08T06:00:00-03:00", limits: 0}
`)
	var out, errOut bytes.Buffer
	if code := run([]string{"check-limits", doc, "--at", "2024-09-07T23:20:00-04:00", "--json"}, envFrom(nil), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		At   string `json:"at"`
		Keys []struct {
			Key      string `json:"key"`
			Schedule string `json:"schedule"`
			Windows  []struct {
				Calendar, Zone, Cutoff, PeriodStart, PeriodEnd, Window string
				Limit                                                  *int64
			} `json:"windows"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got.At != "2024-09-07T23:20:00-04:00" || len(got.Keys) != 2 {
		t.Fatalf("got %s", out.String())
	}
	demo, online := got.Keys[0], got.Keys[1]
	if demo.Key != "DEMO:WECHAT" || len(demo.Windows) != 2 {
		t.Fatalf("DEMO:WECHAT: %+v", demo)
	}
	day, sliding := demo.Windows[0], demo.Windows[1]
	if day.Calendar == "" { // the document orders windows its own way
		day, sliding = sliding, day
	}
	if day.Calendar != "day" || day.Zone != "America/Santiago" || day.Cutoff != "00:00" || *day.Limit != 3 ||
		day.PeriodStart != "2024-09-07T00:00:00-04:00" || day.PeriodEnd != "2024-09-08T01:00:00-03:00" {
		t.Errorf("day window: %+v, want the period 2024-09-07T00:00:00-04:00 .. 2024-09-08T01:00:00-03:00", day)
	}
	if sliding.Window != "1m" || sliding.PeriodStart != "" {
		t.Errorf("sliding window: %+v", sliding)
	}
	if online.Schedule == "" || len(online.Windows) != 1 || *online.Windows[0].Limit != 0 {
		t.Errorf("ONLINE_PAY:ALIPAY at the instant: %+v, want the schedule's limit 0", online)
	}
	out.Reset()
	if code := run([]string{"check-limits", doc, "--at", "2024-09-07T23:20:00-04:00"}, envFrom(nil), &out, &errOut); code != 0 || !strings.Contains(out.String(), "period 2024-09-07T00:00:00-04:00 .. 2024-09-08T01:00:00-03:00") {
		t.Errorf("text: exit %d:\n%s", code, out.String())
	}
	if code := run([]string{"check-limits", doc, "--at", "yesterday"}, envFrom(nil), &out, &errOut); code != 2 {
		t.Errorf("--at yesterday: exit %d, want 2", code)
	}
}
