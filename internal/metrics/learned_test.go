package metrics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/ratelimit"
)

// flakyReader is a Limiter whose reads fail while down is set.
type flakyReader struct {
	*ratelimit.Limiter
	down atomic.Bool
}

func (f *flakyReader) LearnedOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyLearned {
	if f.down.Load() {
		out := make([]ratelimit.KeyLearned, len(keys))
		for i := range out {
			out[i].Err = errors.New("redis: connection refused")
		}
		return out
	}
	return f.Limiter.LearnedOf(ctx, keys)
}

// seriesLines gathers the series whose name starts with prefix as
// "name{label values} value", sorted.
func seriesLines(t *testing.T, m *Metrics, prefix string) []string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var lv []string
			for _, l := range mt.GetLabel() {
				lv = append(lv, l.GetValue())
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			out = append(out, fmt.Sprintf("%s{%s} %v", mf.GetName(), strings.Join(lv, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

// TestLearnedLimitMetrics: a throttled window exports its configured and
// learned limit and their ratio; a window without a learned limit only
// the configured limit and a ratio of 1; calendar windows and keys whose
// adaptive setting is off none; a failed read keeps the last values; a
// reset removes the learned series; a key leaving the document its
// series.
func TestLearnedLimitMetrics(t *testing.T) {
	clock := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	l, err := ratelimit.New(ratelimit.NewLocalStore(now), ratelimit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	pay := ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}
	refund := ratelimit.Key{BizType: "REFUND", Channel: "ALIPAY"}
	off := ratelimit.Key{BizType: "OFF", Channel: "ALIPAY"}
	day := ratelimit.Window{Limit: 1000, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}}
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{
		pay:    {Windows: []ratelimit.Window{{Limit: 100, Size: time.Second}, day}},
		refund: {Windows: []ratelimit.Window{{Limit: 10, Size: time.Minute}}},
		off:    {Windows: []ratelimit.Window{{Limit: 10, Size: time.Second}}, Adaptive: ratelimit.Adaptive{Off: true}},
	}}
	l.SetConfig(cfg)
	ctx := context.Background()
	var holds []ratelimit.Hold
	for i := 0; i < 100; i++ {
		d, err := l.Allow(ctx, pay, fmt.Sprint(i))
		if err != nil || !d.Allowed {
			t.Fatalf("admission %d: %+v %v", i, d, err)
		}
		holds = append(holds, d.Hold)
	}
	if err := l.Throttled(ctx, holds[0], 0); err != nil {
		t.Fatal(err)
	}

	m := New()
	r := &flakyReader{Limiter: l}
	lm := newLearnedLimits(r, now, nil)
	m.Registry.MustRegister(lm)
	if got := seriesLines(t, m, "payserver_limit_"); len(got) != 0 {
		t.Fatalf("before the first pass: %q, want no series", got)
	}
	want := func(lines ...string) {
		t.Helper()
		if got := seriesLines(t, m, "payserver_limit_"); strings.Join(got, "\n") != strings.Join(lines, "\n") {
			t.Errorf("metrics =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
		}
	}
	lm.Refresh(ctx)
	throttled := []string{
		"payserver_limit_configured{PAY:ALIPAY,count/1s} 100",
		"payserver_limit_configured{REFUND:ALIPAY,count/1m} 10",
		"payserver_limit_learned_ratio{PAY:ALIPAY,count/1s} 0.7",
		"payserver_limit_learned_ratio{REFUND:ALIPAY,count/1m} 1",
		"payserver_limit_learned{PAY:ALIPAY,count/1s} 70",
	}
	want(throttled...)

	r.down.Store(true)
	lm.Refresh(ctx)
	want(throttled...)
	r.down.Store(false)

	if err := l.ResetLearned(ctx, pay); err != nil {
		t.Fatal(err)
	}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{pay: cfg.Rules[pay], off: cfg.Rules[off]}})
	lm.Refresh(ctx)
	want("payserver_limit_configured{PAY:ALIPAY,count/1s} 100", "payserver_limit_learned_ratio{PAY:ALIPAY,count/1s} 1")
}

// TestThrottleMetrics: the configured channels start at 0, and a channel
// outside them is counted as other.
func TestThrottleMetrics(t *testing.T) {
	m := New()
	th := m.NewThrottles([]string{"ALIPAY", "WECHAT"})
	th.Throttled("ALIPAY")
	th.Throttled("ALIPAY")
	th.Throttled("NOPE")
	got := strings.Join(seriesLines(t, m, "payserver_channel_throttles_total"), "\n")
	want := "payserver_channel_throttles_total{ALIPAY} 2\npayserver_channel_throttles_total{WECHAT} 0\npayserver_channel_throttles_total{other} 1"
	if got != want {
		t.Errorf("throttles =\n%s\nwant\n%s", got, want)
	}
}
