package stats_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// quotaSource serves a config and, per key, the use of every window.
type quotaSource struct {
	cfg  *ratelimit.Config
	now  *time.Time
	used map[string]int64 // key → use of each calendar window
	fail bool
}

func (q *quotaSource) Config() *ratelimit.Config { return q.cfg }
func (q *quotaSource) UsageOf(_ context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	out := make([]ratelimit.KeyUsage, len(keys))
	for i, k := range keys {
		r := q.cfg.RuleAt(k, *q.now)
		out[i].Rule = r
		if q.fail {
			out[i].Err = errors.New("connection refused")
			continue
		}
		out[i].Counts = make([]int64, len(r.Windows))
		for j := range out[i].Counts {
			out[i].Counts[j] = q.used[k.String()]
		}
	}
	return out
}

func TestForecasterRunsOutAtTheCurrentRate(t *testing.T) {
	parsed, err := limits.Parse([]byte(`zone: Asia/Shanghai
limits:
  ONLINE_PAY:ALIPAY:
    - {limit: 100, window: 1s}
    - {amount: 500000000, calendar: day}
  REFUND:ALIPAY: [{limit: 1000, calendar: month}]
  SLOW:ALIPAY: [{limit: 1000000, calendar: day}]
  ONLY:SLIDING: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	sh, _ := time.LoadLocation("Asia/Shanghai")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, sh)
	src := &quotaSource{cfg: cfg, now: &now, used: map[string]int64{"ONLINE_PAY:ALIPAY": 200_000_000, "REFUND:ALIPAY": 1000, "SLOW:ALIPAY": 10}}
	f, err := stats.NewForecaster(stats.ForecasterOptions{Source: src, Now: func() time.Time { return now }, Lookback: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.Sample(context.Background())
	// 200,000,000 in the 12 hours since midnight: 300,000,000 left at that
	// average lasts 18 hours, past the day's end: no exhaustion yet.
	got := byKey(f.Forecasts())
	if fc := got["ONLINE_PAY:ALIPAY"]; fc.Used != 200_000_000 || !fc.ExhaustsAt.IsZero() || !fc.PeriodEnd.Equal(time.Date(2026, 11, 24, 0, 0, 0, 0, sh)) {
		t.Errorf("first read = %+v, want no exhaustion before the day ends at midnight Shanghai", fc)
	}
	if fc := got["REFUND:ALIPAY"]; !fc.ExhaustsAt.Equal(now) || fc.Utilization() != 1 {
		t.Errorf("a full month = %+v, want exhausted now", fc)
	}
	if _, ok := got["ONLY:SLIDING"]; ok {
		t.Error("a key without calendar windows has a forecast")
	}
	// Ten minutes later 30,000,000 more: 50,000/s over the lookback; the
	// 270,000,000 left last 5400 s: runs out at 13:40.
	now = now.Add(10 * time.Minute)
	src.used["ONLINE_PAY:ALIPAY"] = 230_000_000
	f.Sample(context.Background())
	fc := byKey(f.Forecasts())["ONLINE_PAY:ALIPAY"]
	if want := time.Date(2026, 11, 23, 13, 40, 0, 0, sh); !fc.ExhaustsAt.Equal(want) || fc.Rate != 50_000 {
		t.Errorf("forecast = rate %v exhausts %v, want 50000/s and %v", fc.Rate, fc.ExhaustsAt, want)
	}
	if fc := byKey(f.Forecasts())["SLOW:ALIPAY"]; !fc.ExhaustsAt.IsZero() {
		t.Errorf("a window that does not move = %+v, want no exhaustion", fc)
	}
	// A new day: the reads of the last one do not count.
	now = time.Date(2026, 11, 24, 0, 5, 0, 0, sh)
	src.used["ONLINE_PAY:ALIPAY"] = 3_000_000
	f.Sample(context.Background())
	fc = byKey(f.Forecasts())["ONLINE_PAY:ALIPAY"]
	if want := 10_000.0; fc.Rate != want || !fc.PeriodStart.Equal(time.Date(2026, 11, 24, 0, 0, 0, 0, sh)) {
		t.Errorf("new day = rate %v period %v, want the average since midnight %v/s", fc.Rate, fc.PeriodStart, want)
	}
	// A store that fails: the last forecasts stay, with their time.
	src.fail = true
	now = now.Add(time.Minute)
	f.Sample(context.Background())
	if fc := byKey(f.Forecasts())["ONLINE_PAY:ALIPAY"]; fc.Used != 3_000_000 || !fc.At.Equal(now.Add(-time.Minute)) {
		t.Errorf("forecast after a failed read = %+v, want the last one", fc)
	}
}

func TestForecastTinyRateDoesNotOverflow(t *testing.T) {
	parsed, err := limits.Parse([]byte("limits:\n  A:B: [{amount: 1000000000000000, calendar: month}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	now := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	src := &quotaSource{cfg: cfg, now: &now, used: map[string]int64{"A:B": 1}}
	f, _ := stats.NewForecaster(stats.ForecasterOptions{Source: src, Now: func() time.Time { return now }})
	f.Sample(context.Background())
	if fc := f.Forecasts()[0]; !fc.ExhaustsAt.IsZero() {
		t.Errorf("forecast = %+v, want no exhaustion", fc)
	}
}

func byKey(fs []stats.Forecast) map[string]stats.Forecast {
	m := map[string]stats.Forecast{}
	for _, f := range fs {
		m[f.Key.String()] = f
	}
	return m
}

// swapSource serves whatever config is stored, every window empty.
type swapSource struct {
	cfg atomic.Pointer[ratelimit.Config]
}

func (s *swapSource) Config() *ratelimit.Config { return s.cfg.Load() }
func (s *swapSource) UsageOf(_ context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	out := make([]ratelimit.KeyUsage, len(keys))
	for i, k := range keys {
		r := s.cfg.Load().RuleAt(k, time.Now())
		out[i] = ratelimit.KeyUsage{Rule: r, Counts: make([]int64, len(r.Windows))}
	}
	return out
}

// TestForecasterRunFollowsNewLimits: a new limits snapshot is read within a
// second or two, not at the next 30s interval.
func TestForecasterRunFollowsNewLimits(t *testing.T) {
	src := &swapSource{}
	src.cfg.Store(mustConfig(t, "limits:\n  A:B: 1\n"))
	f, _ := stats.NewForecaster(stats.ForecasterOptions{Source: src, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond)
	src.cfg.Store(mustConfig(t, "limits:\n  A:B: [{limit: 5, calendar: day}]\n"))
	deadline := time.Now().Add(3 * time.Second)
	for len(f.Forecasts()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no forecast 3s after a snapshot with a calendar window")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForecastOnADaylightSavingDay: on Berlin's 23-hour day the period
// ends at local midnight, 23 hours after it began, and the average rate
// counts the hours that day had.
func TestForecastOnADaylightSavingDay(t *testing.T) {
	cfg := mustConfig(t, "zone: Europe/Berlin\nlimits:\n  A:B: [{limit: 22000, calendar: day}]\n")
	berlin, _ := time.LoadLocation("Europe/Berlin")
	now := time.Date(2026, 3, 29, 12, 0, 0, 0, berlin) // 11 hours into the day: 02:00 did not happen
	src := &quotaSource{cfg: cfg, now: &now, used: map[string]int64{"A:B": 11000}}
	f, _ := stats.NewForecaster(stats.ForecasterOptions{Source: src, Now: func() time.Time { return now }})
	f.Sample(context.Background())
	fc := f.Forecasts()[0]
	if got := fc.PeriodEnd.Sub(fc.PeriodStart); got != 23*time.Hour {
		t.Errorf("period = %v..%v (%v), want 23h", fc.PeriodStart, fc.PeriodEnd, got)
	}
	// 1000 an hour; 11000 left last 11 hours: 23:00 local, before midnight.
	if want := time.Date(2026, 3, 29, 23, 0, 0, 0, berlin); !fc.ExhaustsAt.Equal(want) {
		t.Errorf("exhausts at %v, want %v", fc.ExhaustsAt, want)
	}
}
