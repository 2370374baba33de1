package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// TestQuotaMetrics: each calendar window exports its use and cap, and its
// time to exhaustion only when it runs out before its period ends.
func TestQuotaMetrics(t *testing.T) {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, sh)
	day := ratelimit.Window{Limit: 500, Amount: true, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: sh}}
	month := ratelimit.Window{Limit: 9, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarMonth, Zone: time.UTC}}
	fs := []stats.Forecast{
		{Key: ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}, Window: day, Limit: 500, Used: 200, ExhaustsAt: now.Add(100 * time.Minute)},
		{Key: ratelimit.ChannelWide("UNIONPAY"), Window: month, Limit: 9, Used: 1},
	}
	m := New()
	m.Registry.MustRegister(newQuotaCollector(func() []stats.Forecast { return fs }, func() time.Time { return now }))
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "payserver_quota_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var key string
			for _, l := range mt.GetLabel() {
				if l.GetName() == "key" {
					key = l.GetValue()
				}
			}
			got = append(got, fmt.Sprintf("%s{%s} %v", mf.GetName(), key, mt.GetGauge().GetValue()))
		}
	}
	want := []string{
		"payserver_quota_exhaustion_seconds{ONLINE_PAY:ALIPAY} 6000",
		"payserver_quota_limit{*:UNIONPAY} 9",
		"payserver_quota_limit{ONLINE_PAY:ALIPAY} 500",
		"payserver_quota_used{*:UNIONPAY} 1",
		"payserver_quota_used{ONLINE_PAY:ALIPAY} 200",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("metrics =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
