package configcenter

import (
	"context"
	"strings"
	"testing"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
)

func mustParse(t *testing.T, doc string) *limits.Document {
	t.Helper()
	d, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

func TestDescribeRule(t *testing.T) {
	tests := []struct{ name, doc, key, want string }{
		{"sliding counts as before", "limits:\n  A:B: [{limit: 20, window: 1s}, {limit: 600, window: 1m}]\n", "A:B", "20/1s+600/1m"},
		{"shadow", "limits:\n  A:B: {limit: 5, window: 500ms, shadow: true}\n", "A:B", "5/500ms (shadow)"},
		{"unlimited", "limits:\n  A:B: -1\n", "A:B", "unlimited"},
		{"closed", "limits:\n  A:B: 0\n", "A:B", "0/1s"},
		{"the issue's ALIPAY", "zone: Asia/Shanghai\nlimits:\n  A:B:\n    - {limit: 100, window: 1s}\n    - {amount: 500000000, calendar: day}\n    - {limit: 300000, calendar: day, cutoff: \"23:00\"}\n    - {amount: 100000, window: 60s}\n",
			"A:B", "100/1s+amount 100000 minor units/1m+300000/day[23:00 Asia/Shanghai]+amount 500000000 minor units/day[00:00 Asia/Shanghai]"},
		{"currency and month", "limits:\n  A:B: [{amount: 7, calendar: month, currency: USD, zone: America/New_York}]\n", "A:B", "amount 0.07 USD/month[00:00 America/New_York]"},
		{"CNY in major units", "limits:\n  A:B: [{amount: 500000000, calendar: day, currency: CNY, zone: Asia/Shanghai}]\n", "A:B", "amount 5000000.00 CNY/day[00:00 Asia/Shanghai]"},
		{"JPY has no minor digits", "limits:\n  A:B: [{amount: 1000000, window: 1h, currency: JPY}]\n", "A:B", "amount 1000000 JPY/1h"},
		{"BHD has three", "limits:\n  A:B: [{amount: 1500, window: 1m, currency: BHD}]\n", "A:B", "amount 1.500 BHD/1m"},
		{"amount reserve in major units", "limits:\n  \"*:U\": [{amount: 100000, window: 1m, currency: CNY, reserve: {REFUND: 4000}}]\n", "*:U", "amount 1000.00 CNY/1m{REFUND:40.00}"},
		{"reserve", "limits:\n  \"*:U\": [{limit: 200, window: 1s, reserve: {REFUND: 40, CANCEL: 5}}, {limit: 9000, window: 1m}]\n", "*:U", "200/1s{CANCEL:5,REFUND:40}+9000/1m"},
		{"merchant limits", "limits:\n  A:B: [{limit: 100, window: 1s, perMerchant: 10, merchants: {M_VIP: 40, BAD: 0, FREE: -1}}]\n", "A:B", "100/1s[perMerchant:10,BAD:0,FREE:-1,M_VIP:40]"},
		{"merchant IDs with separators are quoted", "limits:\n  A:B: [{limit: 100, merchants: {\"a,b\": 5, \"x]\": 3, \"y:-1\": 2, \" \": 1, perMerchant: 4}}]\n", "A:B",
			`100/1s[" ":1,"a,b":5,"perMerchant":4,"x]":3,"y:-1":2]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.doc).Config
			k, _ := ratelimit.ParseKey(tt.key)
			r, ok := cfg.Rules[k]
			if got := DescribeRule(r, ok); got != tt.want {
				t.Errorf("DescribeRule = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDiffSchedules(t *testing.T) {
	base := "limits:\n  A:B: 10\n"
	sched := func(lines ...string) string { return base + "schedules:\n" + strings.Join(lines, "\n") + "\n" }
	closeU := `  - {key: "*:U", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: 0}`
	tests := []struct {
		name     string
		old, cur string
		want     []string
	}{
		{"no schedules", base, base, nil},
		{"added", base, sched(closeU), []string{"schedule *:U 2026-12-01T02:00:00+08:00/2026-12-01T04:00:00+08:00: absent -> 0/1s"}},
		{"removed", sched(closeU), base, []string{"schedule *:U 2026-12-01T02:00:00+08:00/2026-12-01T04:00:00+08:00: 0/1s -> absent"}},
		{"same instants in another offset are the same schedule", sched(closeU),
			sched(`  - {key: "*:U", from: "2026-11-30T18:00:00Z", to: "2026-11-30T20:00:00Z", limits: 0}`), nil},
		{"limits changed", sched(closeU), sched(strings.Replace(closeU, "limits: 0", "limits: [{limit: 5, window: 1s}]", 1)),
			[]string{"schedule *:U 2026-12-01T02:00:00+08:00/2026-12-01T04:00:00+08:00: 0/1s -> 5/1s"}},
		{"moved", sched(closeU), sched(strings.Replace(closeU, "04:00:00", "05:00:00", 1)), []string{
			"schedule *:U 2026-12-01T02:00:00+08:00/2026-12-01T04:00:00+08:00: 0/1s -> absent",
			"schedule *:U 2026-12-01T02:00:00+08:00/2026-12-01T05:00:00+08:00: absent -> 0/1s",
		}},
		{"a key and a schedule change together", sched(closeU), strings.Replace(sched(closeU), "A:B: 10", "A:B: 11", 1) + "", []string{"A:B: 10/1s -> 11/1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(mustParse(t, tt.old), mustParse(t, tt.cur))
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Diff =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestManagerRecordsScheduleChange: a document that only adds a schedule is
// a change in the history, with the schedule as its diff, and a document
// refused for an overlap keeps the limits in force.
func TestManagerRecordsScheduleChange(t *testing.T) {
	ctx := context.Background()
	h := &recordingHistory{}
	a := &captureApplier{}
	m, _ := NewManager(chanSource{}, a, ManagerOptions{History: h})
	base := "limits:\n  A:B: 5\n"
	withSchedule := base + "schedules:\n  - {key: A:B, from: \"2026-12-01T00:00:00Z\", to: \"2026-12-02T00:00:00Z\", limits: 0}\n"
	overlapping := withSchedule + "  - {key: A:B, from: \"2026-12-01T12:00:00Z\", to: \"2026-12-03T00:00:00Z\", limits: 1}\n"
	for _, d := range []string{base, withSchedule, overlapping} {
		_ = m.Apply(ctx, Document{Source: "nacos", Content: []byte(d)})
	}
	if len(h.entries) != 3 {
		t.Fatalf("recorded %d entries, want 3: %+v", len(h.entries), h.entries)
	}
	if got, want := h.entries[1], "schedule A:B 2026-12-01T00:00:00Z/2026-12-02T00:00:00Z: absent -> 0/1s"; got.Kind != KindChange || strings.Join(got.Keys, "; ") != want {
		t.Errorf("entry 2 = %+v, want a change %q", got, want)
	}
	if got := h.entries[2]; got.Kind != KindRefused || !strings.Contains(got.Refusal, `schedules of key "A:B" overlap`) {
		t.Errorf("entry 3 = %+v, want refused for the overlap", got)
	}
	if len(a.cfg.Schedules) != 1 {
		t.Errorf("schedules in force = %+v, want the last good one", a.cfg.Schedules)
	}
}
