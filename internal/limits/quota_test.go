package limits

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// issueDocument is the example document of the quota issue, word for word.
const issueDocument = `window: 1s
zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 100, window: 1s}
    - {amount: 500000000, calendar: day}
    - {limit: 300000, calendar: day, cutoff: "23:00"}
    - {amount: 100000, window: 60s}
  "*:UNIONPAY":
    - {limit: 200, window: 1s, reserve: {REFUND: 40}}
schedules:
  - {key: "*:UNIONPAY", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: 0}
  - {key: "ONLINE_PAY:ALIPAY", from: "2026-11-11T00:00:00+08:00", to: "2026-11-12T00:00:00+08:00", limits: [{limit: 300, window: 1s}]}
`

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	z, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func TestParseIssueExample(t *testing.T) {
	parsed, err := Parse([]byte(issueDocument))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	cfg := parsed.Config
	sh := mustZone(t, "Asia/Shanghai")
	if cfg.Zone.String() != "Asia/Shanghai" {
		t.Fatalf("zone = %v, want Asia/Shanghai", cfg.Zone)
	}
	alipay := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	got := cfg.Rules[alipay]
	want := []ratelimit.Window{
		{Limit: 100, Size: time.Second},
		{Limit: 100000, Size: time.Minute, Amount: true},
		{Limit: 300000, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: sh, Cutoff: 23 * time.Hour}},
		{Limit: 500000000, Amount: true, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: sh}},
	}
	if len(got.Windows) != len(want) {
		t.Fatalf("windows = %+v, want %+v", got.Windows, want)
	}
	for i := range want {
		if got.Windows[i].ID() != want[i].ID() || got.Windows[i].Limit != want[i].Limit {
			t.Errorf("window %d = %s limit %d, want %s limit %d", i, got.Windows[i].ID(), got.Windows[i].Limit, want[i].ID(), want[i].Limit)
		}
	}
	if got.Reserve != nil {
		t.Errorf("reserve of a bizType key = %v, want nil", got.Reserve)
	}
	union := cfg.Rules[ratelimit.ChannelWide("UNIONPAY")]
	if len(union.Windows) != 1 || union.Windows[0].Limit != 200 {
		t.Fatalf("*:UNIONPAY = %+v, want one window of 200", union)
	}
	if !reflect.DeepEqual(union.Reserve, []map[string]int64{{"REFUND": 40}}) {
		t.Fatalf("*:UNIONPAY reserve = %v, want [{REFUND: 40}]", union.Reserve)
	}
	if got, want := union.LimitFor(0, "ONLINE_PAY"), int64(160); got != want {
		t.Errorf("LimitFor(ONLINE_PAY) = %d, want %d", got, want)
	}
	if got, want := union.LimitFor(0, "REFUND"), int64(200); got != want {
		t.Errorf("LimitFor(REFUND) = %d, want %d", got, want)
	}
	if len(cfg.Schedules) != 2 {
		t.Fatalf("schedules = %d, want 2", len(cfg.Schedules))
	}
	// Sorted by key: "*:UNIONPAY" < "ONLINE_PAY:ALIPAY".
	closed := cfg.Schedules[0]
	if closed.Key != ratelimit.ChannelWide("UNIONPAY") || !closed.Rule.IsClosed() || closed.Rule.Windows[0].Size != time.Second {
		t.Fatalf("schedule 0 = %+v, want *:UNIONPAY closed with the default window", closed)
	}
	maint := time.Date(2026, 12, 1, 3, 0, 0, 0, sh)
	if r := cfg.RuleAt(ratelimit.ChannelWide("UNIONPAY"), maint); !r.IsClosed() {
		t.Errorf("*:UNIONPAY at 03:00 = %+v, want closed", r)
	}
	if r := cfg.RuleAt(ratelimit.ChannelWide("UNIONPAY"), maint.Add(time.Hour)); r.IsClosed() || r.Windows[0].Limit != 200 {
		t.Errorf("*:UNIONPAY at 04:00 (to is exclusive) = %+v, want the base rule", r)
	}
	singles := time.Date(2026, 11, 11, 12, 0, 0, 0, sh)
	if r := cfg.RuleAt(alipay, singles); len(r.Windows) != 1 || r.Windows[0].Limit != 300 {
		t.Errorf("ALIPAY on 11.11 = %+v, want 300/1s", r)
	}
	if next := cfg.NextChange(alipay, singles); !next.Equal(time.Date(2026, 11, 12, 0, 0, 0, 0, sh)) {
		t.Errorf("NextChange = %v, want the schedule's end", next)
	}
}

func TestParseQuotaRules(t *testing.T) {
	sh := "Asia/Shanghai"
	tests := []struct {
		name string
		doc  string
		key  ratelimit.Key
		// want lists each window as ID=limit, in order.
		want string
		// reserve is the rule's Reserve, printed; "" for none.
		reserve string
	}{
		{"bare entry keeps the default window", "window: 2s\nlimits:\n  A:B: [{limit: 5}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "2000=5", ""},
		{"amount sliding, any currency", "limits:\n  A:B: [{amount: 100000, window: 60s}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "a60000=100000", ""},
		{"amount with currency", "limits:\n  A:B: [{amount: 7, window: 1m, currency: CNY}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "a60000.CNY=7", ""},
		{"amount bare uses the default window", "limits:\n  A:B: {amount: 9}\n", ratelimit.Key{BizType: "A", Channel: "B"}, "a1000=9", ""},
		{"amount zero refuses every amount", "limits:\n  A:B: [{amount: 0, calendar: day}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "aday.0000.UTC=0", ""},
		{"amount at the bound", "limits:\n  A:B: [{amount: 1000000000000000, calendar: month}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "amonth.0000.UTC=1000000000000000", ""},
		{"calendar day in UTC by default", "limits:\n  A:B: [{limit: 3, calendar: day}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "day.0000.UTC=3", ""},
		{"calendar in the document zone", "zone: " + sh + "\nlimits:\n  A:B: [{limit: 3, calendar: month}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "month.0000.Asia/Shanghai=3", ""},
		{"entry zone beats document zone", "zone: UTC\nlimits:\n  A:B: [{limit: 3, calendar: day, zone: Europe/Berlin, cutoff: \"06:30\"}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "day.0630.Europe/Berlin=3", ""},
		{"two cutoffs are two windows", "limits:\n  A:B: [{limit: 3, calendar: day, cutoff: \"23:00\"}, {limit: 4, calendar: day}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "day.0000.UTC=4 day.2300.UTC=3", ""},
		{"count and amount of one span are two windows", "limits:\n  A:B: [{amount: 9, window: 1s}, {limit: 2, window: 1s}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "1000=2 a1000=9", ""},
		{"two currencies are two windows", "limits:\n  A:B: [{amount: 9, window: 1s, currency: USD}, {amount: 8, window: 1s, currency: CNY}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "a1000.CNY=8 a1000.USD=9", ""},
		{"sorted: sliding, then day, then month", "limits:\n  A:B: [{limit: 9, calendar: month}, {amount: 5, calendar: day}, {limit: 4, calendar: day}, {limit: 2, window: 1m}, {limit: 1, window: 1s}]\n",
			ratelimit.Key{BizType: "A", Channel: "B"}, "1000=1 60000=2 day.0000.UTC=4 aday.0000.UTC=5 month.0000.UTC=9", ""},
		{"channel-wide key", "limits:\n  \"*:UNIONPAY\": 200\n", ratelimit.ChannelWide("UNIONPAY"), "1000=200", ""},
		{"reserve per window follows the sort", "limits:\n  \"*:U\": [{limit: 900, window: 1m, reserve: {REFUND: 100}}, {limit: 20, window: 1s, reserve: {REFUND: 5, CANCEL: 5}}]\n",
			ratelimit.ChannelWide("U"), "1000=20 60000=900", "[map[CANCEL:5 REFUND:5] map[REFUND:100]]"},
		{"reserve on one window only", "limits:\n  \"*:U\": [{limit: 900, window: 1m}, {limit: 20, window: 1s, reserve: {REFUND: 20}}]\n",
			ratelimit.ChannelWide("U"), "1000=20 60000=900", "[map[REFUND:20] map[]]"},
		{"reserve of an amount window", "limits:\n  \"*:U\": [{amount: 1000, calendar: day, reserve: {REFUND: 1000}}]\n", ratelimit.ChannelWide("U"), "aday.0000.UTC=1000", "[map[REFUND:1000]]"},
		{"single object with reserve and shadow", "limits:\n  \"*:U\": {limit: 10, window: 1s, reserve: {REFUND: 0}, shadow: true}\n", ratelimit.ChannelWide("U"), "1000=10", "[map[REFUND:0]]"},
		{"json document", `{"zone":"Asia/Tokyo","limits":{"A:B":[{"amount":5,"calendar":"day","cutoff":"09:00","currency":"JPY"}]}}`, ratelimit.Key{BizType: "A", Channel: "B"}, "aday.0900.Asia/Tokyo.JPY=5", ""},
		{"unlimited entry dropped beside calendar", "limits:\n  A:B: [{limit: -1, calendar: day}, {limit: 1, window: 1s}]\n", ratelimit.Key{BizType: "A", Channel: "B"}, "1000=1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parsed, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			cfg := parsed.Config
			r, ok := cfg.Rules[tt.key]
			if !ok {
				t.Fatalf("key %s missing", tt.key)
			}
			var parts []string
			for _, w := range r.Windows {
				parts = append(parts, w.ID()+"="+fmt.Sprint(w.Limit))
			}
			if got := strings.Join(parts, " "); got != tt.want {
				t.Errorf("windows = %s, want %s", got, tt.want)
			}
			got := ""
			if r.Reserve != nil {
				got = fmt.Sprint(r.Reserve)
			}
			if got != tt.reserve {
				t.Errorf("reserve = %s, want %s", got, tt.reserve)
			}
		})
	}
}

func TestParseSchedules(t *testing.T) {
	doc := `zone: Asia/Shanghai
limits:
  A:B: 10
schedules:
  - {key: "A:B", from: "2026-12-02T00:00:00Z", to: "2026-12-03T00:00:00Z", limits: -1}
  - {key: "A:B", from: "2020-01-01T00:00:00Z", to: "2020-01-02T00:00:00Z", limits: 5}
  - {key: "C:D", from: "2026-12-01T00:00:00Z", to: "2026-12-02T00:00:00Z", limits: {amount: 5, calendar: day}}
  - {key: "A:B", from: "2026-12-01T00:00:00Z", to: "2026-12-02T00:00:00Z", limits: [{limit: 1, window: 1m}, {limit: 0}]}
`
	parsed, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	cfg := parsed.Config
	var got []string
	for _, s := range cfg.Schedules {
		got = append(got, s.Key.String()+"@"+s.From.UTC().Format("2006-01-02"))
	}
	want := "A:B@2020-01-01 A:B@2026-12-01 A:B@2026-12-02 C:D@2026-12-01"
	if strings.Join(got, " ") != want {
		t.Fatalf("schedules = %v, want sorted by key then from: %s", got, want)
	}
	ab := ratelimit.Key{BizType: "A", Channel: "B"}
	// Back to back: the end of one is the start of the next.
	if r := cfg.RuleAt(ab, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)); !r.IsUnlimited() {
		t.Errorf("at the second schedule's from = %+v, want unlimited", r)
	}
	if r := cfg.RuleAt(ab, time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)); !r.IsClosed() {
		t.Errorf("in the first schedule = %+v, want closed by {limit: 0}", r)
	}
	if r := cfg.RuleAt(ab, time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)); len(r.Windows) != 1 || r.Windows[0].Limit != 10 {
		t.Errorf("after the schedules = %+v, want the base 10/1s", r)
	}
	// A schedule of a key that limits does not name: unlimited outside it.
	cd := ratelimit.Key{BizType: "C", Channel: "D"}
	if r := cfg.RuleAt(cd, time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)); len(r.Windows) != 1 || r.Windows[0].Calendar.Zone.String() != "Asia/Shanghai" {
		t.Errorf("C:D in its schedule = %+v, want a calendar day in the document zone", r)
	}
	if r := cfg.RuleAt(cd, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)); !r.IsUnlimited() {
		t.Errorf("C:D outside its schedule = %+v, want unlimited", r)
	}
}

func TestParseQuotaRefusals(t *testing.T) {
	tests := []refusal{
		{"unknown zone", "zone: Mars/Olympus\nlimits:\n  A:B: 1\n", `zone: unknown time zone "Mars/Olympus"`},
		{"local zone", "zone: Local\nlimits:\n  A:B: 1\n", "depends on the host"},
		{"numeric zone", "zone: 8\nlimits:\n  A:B: 1\n", "IANA"},
		{"zone without limits", "zone: UTC\n", `no "limits"`},
		{"schedules without limits", "schedules: []\n", `no "limits"`},
		{"unknown entry zone names the key", "limits:\n  A:B: [{limit: 1, calendar: day, zone: Asia/Shanghia}]\n", `key "A:B": window 1: zone: unknown time zone "Asia/Shanghia"`},
		{"bad calendar", "limits:\n  A:B: [{limit: 1, calendar: week}]\n", `key "A:B": window 1: calendar week: want day or month`},
		{"cutoff without quotes is not HH:MM", "limits:\n  A:B: [{limit: 1, calendar: day, cutoff: 2300}]\n", `key "A:B": window 1: cutoff: 2300`},
		{"cutoff 24:00", "limits:\n  A:B: [{limit: 1, calendar: day, cutoff: \"24:00\"}]\n", `cutoff: "24:00": want "HH:MM"`},
		{"cutoff one digit", "limits:\n  A:B: [{limit: 1, calendar: day, cutoff: \"7:00\"}]\n", `cutoff: "7:00"`},
		{"cutoff with seconds", "limits:\n  A:B: [{limit: 1, calendar: day, cutoff: \"07:00:00\"}]\n", `cutoff: "07:00:00"`},
		{"cutoff on a sliding window", "limits:\n  A:B: [{limit: 1, window: 1s, cutoff: \"07:00\"}]\n", `key "A:B": window 1: cutoff is for calendar windows only`},
		{"zone on a sliding window", "limits:\n  A:B: [{limit: 1, zone: UTC}]\n", "zone is for calendar windows only"},
		{"window and calendar", "limits:\n  A:B: [{limit: 1, window: 1s, calendar: day}]\n", "both window and calendar"},
		{"limit and amount", "limits:\n  A:B: [{limit: 1, amount: 5}]\n", `key "A:B": window 1: both limit and amount`},
		{"neither limit nor amount", "limits:\n  A:B: [{calendar: day}]\n", "limit is missing"},
		{"negative amount", "limits:\n  A:B: [{amount: -5, calendar: day}]\n", `key "A:B": window 1: amount -5 is negative`},
		{"minus one amount", "limits:\n  A:B: {amount: -1}\n", "amount -1 is negative"},
		{"amount too large", "limits:\n  A:B: [{amount: 1000000000000001}]\n", "amount 1000000000000001 is too large"},
		{"fractional amount", "limits:\n  A:B: [{amount: 10.5}]\n", "amount 10.5: want a whole number"},
		{"string amount", "limits:\n  A:B: [{amount: \"10\"}]\n", "not a string"},
		{"currency on a count window", "limits:\n  A:B: [{limit: 1, currency: CNY}]\n", "currency is for amount windows only"},
		{"lower-case currency", "limits:\n  A:B: [{amount: 1, currency: cny}]\n", `currency "cny" is not an active ISO 4217 currency`},
		{"long currency", "limits:\n  A:B: [{amount: 1, currency: CNYX}]\n", "ISO 4217"},
		{"currency typo", "limits:\n  A:B: [{amount: 1, currency: CYN}]\n", `key "A:B": window 1: currency "CYN" is not an active ISO 4217 currency`},
		{"no-currency code", "limits:\n  A:B: [{amount: 1, currency: XXX}]\n", `currency "XXX"`},
		{"numeric currency", "limits:\n  A:B: [{amount: 1, currency: 156}]\n", "currency 156: want an ISO 4217 code"},
		{"reserve on a bizType key", "limits:\n  A:B: [{limit: 10, reserve: {REFUND: 1}}]\n", `key "A:B": window 1: reserve is for channel-wide keys only (write it under "*:B")`},
		{"reserve does not fit", "limits:\n  \"*:U\": [{limit: 200, window: 1s, reserve: {REFUND: 150, CANCEL: 60}}]\n", `key "*:U": window 1: reserve: the reservations sum to more than the window's limit 200`},
		{"one reservation above the limit", "limits:\n  \"*:U\": [{limit: 20, reserve: {REFUND: 21}}]\n", "reserve REFUND 21 is too large; at most 20"},
		{"reserve on an unlimited window", "limits:\n  \"*:U\": [{limit: -1, reserve: {REFUND: 1}}]\n", "reserve on an unlimited window"},
		{"reserve bad bizType", "limits:\n  \"*:U\": [{limit: 20, reserve: {refund: 1}}]\n", `reserve: bizType "refund" must contain only`},
		{"reserve star", "limits:\n  \"*:U\": [{limit: 20, reserve: {\"*\": 1}}]\n", `bizType "*"`},
		{"reserve negative", "limits:\n  \"*:U\": [{limit: 20, reserve: {REFUND: -1}}]\n", "reserve REFUND: -1 is negative"},
		{"reserve not a map", "limits:\n  \"*:U\": [{limit: 20, reserve: 5}]\n", "reserve: want a map"},
		{"empty reserve", "limits:\n  \"*:U\": [{limit: 20, reserve: {}}]\n", "reserve: want a map"},
		{"same calendar window twice", "limits:\n  A:B: [{limit: 1, calendar: day}, {limit: 2, calendar: day, zone: UTC, cutoff: \"00:00\"}]\n", `key "A:B": two windows of day from 00:00 in UTC`},
		{"same amount window twice", "limits:\n  A:B: [{amount: 1, window: 1s}, {amount: 2, window: 1000ms}]\n", "two windows of amount 1s"},
		{"too many windows", "limits:\n  A:B: [" + strings.Repeat("{limit: 1},", MaxWindowsPerKey) + "{limit: 2}]\n", "at most 8"},
		{"unknown entry field", "limits:\n  A:B: [{amount: 1, curency: CNY}]\n", `key "A:B": window 1: unknown field "curency"`},
		{"shadow inside a window list", "limits:\n  A:B: [{limit: 1, shadow: true}]\n", `unknown field "shadow"`},
		{"bad channel-wide key", "limits:\n  \"*:u\": 1\n", `key "*:u": channel`},
		{"schedules not a list", "limits:\n  A:B: 1\nschedules: {key: A:B}\n", "schedules: want a list"},
		{"schedule unknown field", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: 0, note: x}\n", `schedule 1 (key "A:B"): unknown field "note"`},
		{"schedule without key", "limits:\n  A:B: 1\nschedules:\n  - {from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: 0}\n", "schedule 1: key is missing"},
		{"schedule bad key", "limits:\n  A:B: 1\nschedules:\n  - {key: \"a:b\", from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: 0}\n", `schedule 1 (key "a:b"): key "a:b": bizType`},
		{"schedule without limits", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\"}\n", "limits is missing"},
		{"schedule without offset", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00\", to: \"2026-01-02T00:00:00Z\", limits: 0}\n", `schedule 1 (key "A:B"): from "2026-01-01T00:00:00": want an RFC 3339 time`},
		{"schedule numeric time", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: 5, to: \"2026-01-02T00:00:00Z\", limits: 0}\n", "from 5: want an RFC 3339 time in quotes"},
		{"schedule missing to", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", limits: 0}\n", "to is missing"},
		{"schedule from after to", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-02T00:00:00Z\", to: \"2026-01-01T00:00:00Z\", limits: 0}\n", "is not before to"},
		{"schedule empty span", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-01T08:00:00+08:00\", limits: 0}\n", "is not before to"},
		{"schedule bad limits names the schedule", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: [{amount: -1}]}\n", `schedule 1 (key "A:B"): limits: window 1: amount -1 is negative`},
		{"schedule reserve on a bizType key", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: {limit: 5, reserve: {X: 1}}}\n", "reserve is for channel-wide keys only"},
		{"schedule not a map", "limits:\n  A:B: 1\nschedules: [5]\n", "schedule 1: want {key, from, to, limits}"},
		{"overlapping schedules", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-03T00:00:00Z\", limits: 0}\n  - {key: A:B, from: \"2026-01-02T00:00:00Z\", to: \"2026-01-04T00:00:00Z\", limits: 5}\n",
			`schedules of key "A:B" overlap: 2026-01-01T00:00:00Z..2026-01-03T00:00:00Z and 2026-01-02T00:00:00Z..2026-01-04T00:00:00Z`},
		{"overlap across offsets", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-01T02:00:00Z\", limits: 0}\n  - {key: A:B, from: \"2026-01-01T09:00:00+08:00\", to: \"2026-01-01T12:00:00+08:00\", limits: 5}\n", "overlap"},
		{"same schedule twice", "limits:\n  A:B: 1\nschedules:\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: 0}\n  - {key: A:B, from: \"2026-01-01T00:00:00Z\", to: \"2026-01-02T00:00:00Z\", limits: 0}\n", "overlap"},
		{"too many schedules", "limits:\n  A:B: 1\nschedules: [" + strings.Repeat("5,", MaxSchedules) + "5]\n", "at most 1000"},
	}
	testRefusals(t, tests)
}

func TestParseOldMeaningKept(t *testing.T) {
	// Every document of the old format keeps its meaning: the same windows,
	// no calendar, no amount, no reserve, no schedules, zone UTC.
	for _, doc := range []string{
		"window: 1s\nlimits:\n  ONLINE_PAY:ALIPAY: 100\n  ONLINE_PAY:WECHAT: -1\n",
		"limits:\n  REFUND:ALIPAY:\n    - {limit: 20, window: 1s}\n    - {limit: 600, window: 1m}\n",
		`{"A:B": 1, "C:D": -1}`,
		"limits:\n  A:B: {shadow: true, windows: [{limit: 1, window: 1d}]}\n",
	} {
		parsed, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%q): %v", doc, err)
		}
		cfg := parsed.Config
		if cfg.Zone != time.UTC || cfg.Schedules != nil {
			t.Errorf("%q: zone %v schedules %v, want UTC and none", doc, cfg.Zone, cfg.Schedules)
		}
		for k, r := range cfg.Rules {
			if r.Reserve != nil {
				t.Errorf("%q: key %s has reserve %v", doc, k, r.Reserve)
			}
			for _, w := range r.Windows {
				if w.Amount || w.IsCalendar() || w.Currency != "" {
					t.Errorf("%q: key %s window %+v is not a sliding count window", doc, k, w)
				}
			}
		}
	}
}
