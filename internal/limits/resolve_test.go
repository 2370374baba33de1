package limits

import (
	"testing"

	"payserver/internal/ratelimit"
)

func TestResolveKeysInTheDocument(t *testing.T) {
	parsed, err := Parse([]byte(`limits:
  RESOLVE:ALIPAY: [{limit: 50, window: 1s}, {limit: 20000, calendar: day}]
  RESOLVE:WECHAT: 10
schedules:
  - {key: "RESOLVE:ALIPAY", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: [{limit: 5, window: 1s}]}
`))
	if err != nil {
		t.Fatalf("count windows on RESOLVE keys: %v", err)
	}
	cfg := parsed.Config
	if got := cfg.Rules[ratelimit.ResolveKey("ALIPAY")]; len(got.Windows) != 2 || got.Windows[1].Calendar.Unit != ratelimit.CalendarDay {
		t.Fatalf("RESOLVE:ALIPAY = %+v, want a sliding and a calendar count window", got)
	}
	testRefusals(t, []refusal{
		{"amount window", "limits:\n  RESOLVE:ALIPAY: [{limit: 50, window: 1s}, {amount: 100000, calendar: day}]\n", `key "RESOLVE:ALIPAY": window 2: amount window on RESOLVE:ALIPAY`},
		{"amount object", "limits:\n  RESOLVE:ALIPAY: {amount: 100000, window: 1m}\n", "amount window on RESOLVE:ALIPAY: a RESOLVE key counts the resolver's channel queries, which move no money"},
		{"amount in a schedule", `limits:
  RESOLVE:ALIPAY: 10
schedules:
  - {key: "RESOLVE:ALIPAY", from: "2026-12-01T02:00:00+08:00", to: "2026-12-01T04:00:00+08:00", limits: {amount: 5, window: 1s}}
`, `schedule 1 (key "RESOLVE:ALIPAY"): limits: amount window on RESOLVE:ALIPAY`},
		{"reserved for RESOLVE", "limits:\n  \"*:ALIPAY\": [{limit: 10, window: 1s, reserve: {RESOLVE: 2}}]\n", "reserve: RESOLVE is the resolver's reserved bizType: its queries count only on RESOLVE:ALIPAY"},
		{"routed as RESOLVE", "limits:\n  A:B: 1\nroutes:\n  RESOLVE: [ALIPAY]\n", "routes: RESOLVE is the resolver's reserved bizType"},
	})
}
