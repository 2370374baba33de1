package metrics_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"payserver/internal/limits"
	"payserver/internal/metrics"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

func mustConfig(t *testing.T, doc string) *ratelimit.Config {
	t.Helper()
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := parsed.Config
	return c
}

// gather returns the exposition text of the named metrics.
func gather(t *testing.T, m *metrics.Metrics, names ...string) string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() == n {
				for _, s := range mf.GetMetric() {
					b.WriteString(n)
					for _, l := range s.GetLabel() {
						b.WriteString(" " + l.GetName() + "=" + l.GetValue())
					}
					var v float64
					switch {
					case s.Gauge != nil:
						v = s.Gauge.GetValue()
					case s.Counter != nil:
						v = s.Counter.GetValue()
					}
					b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
				}
			}
		}
	}
	return b.String()
}

func TestUtilisationFollowsDecisionsAndKnownKeys(t *testing.T) {
	m := metrics.New()
	m.SetKeys(mustConfig(t, "limits:\n  ONLINE_PAY:ALIPAY: 100\n  ONLINE_PAY:WECHAT: 10\n"))
	alipay := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	wechat := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "WECHAT"}
	unknown := ratelimit.Key{BizType: "X", Channel: "Y"}
	m.Decided(ratelimit.Decision{Key: alipay, Allowed: true, Limit: 100, Count: 91, Source: ratelimit.SourceRedis}, time.Millisecond)
	m.Decided(ratelimit.Decision{Key: wechat, Allowed: false, Limit: 10, Count: 10, Source: ratelimit.SourceRedis}, time.Millisecond)
	m.Decided(ratelimit.Decision{Key: unknown, Allowed: true, Limit: 5, Count: 5, Source: ratelimit.SourceRedis}, time.Millisecond)
	m.Decided(ratelimit.Decision{Key: alipay, Allowed: true, Limit: ratelimit.Unlimited, Source: ratelimit.SourceUnlimited}, time.Millisecond)

	got := gather(t, m, "payserver_limiter_utilisation_ratio")
	want := "payserver_limiter_utilisation_ratio biz_type=ONLINE_PAY channel=ALIPAY 0.91\n" +
		"payserver_limiter_utilisation_ratio biz_type=ONLINE_PAY channel=WECHAT 1\n"
	if got != want {
		t.Fatalf("after decisions: got\n%s\nwant\n%s", got, want)
	}

	// A key dropped from the document loses its series; the other keeps it.
	m.SetKeys(mustConfig(t, "limits:\n  ONLINE_PAY:ALIPAY: 100\n"))
	got = gather(t, m, "payserver_limiter_utilisation_ratio")
	want = "payserver_limiter_utilisation_ratio biz_type=ONLINE_PAY channel=ALIPAY 0.91\n"
	if got != want {
		t.Fatalf("after key removal: got\n%s\nwant\n%s", got, want)
	}
}

func TestWatchDependenciesReportsEachCheck(t *testing.T) {
	m := metrics.New()
	m.WatchDependencies(map[string]func(context.Context) error{
		"database": func(context.Context) error { return errors.New("down") },
		"redis":    func(context.Context) error { return nil },
		// A check that hangs is reported down once the timeout passes.
		"limits": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
	})
	start := time.Now()
	got := gather(t, m, "payserver_dependency_up")
	if d := time.Since(start); d > metrics.DependencyCheckTimeout+500*time.Millisecond {
		t.Errorf("scrape took %v, want about the %v check timeout", d, metrics.DependencyCheckTimeout)
	}
	want := "payserver_dependency_up dependency=database 0\n" +
		"payserver_dependency_up dependency=limits 0\n" +
		"payserver_dependency_up dependency=redis 1\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWatchLimitsAndLimiter(t *testing.T) {
	tests := []struct {
		name  string
		state metrics.LimitsState
		share float64
		deg   bool
		want  string
	}{
		{"loaded, good, on Redis", metrics.LimitsState{Loaded: true}, 1, false,
			"payserver_limiter_degraded 0\npayserver_limiter_local_share 1\npayserver_limits_loaded 1\npayserver_limits_refused_in_force 0\n"},
		{"refused, local", metrics.LimitsState{Loaded: true, RefusedInForce: true}, 0.5, true,
			"payserver_limiter_degraded 1\npayserver_limiter_local_share 0.5\npayserver_limits_loaded 1\npayserver_limits_refused_in_force 1\n"},
		{"nothing loaded", metrics.LimitsState{}, 1, false,
			"payserver_limiter_degraded 0\npayserver_limiter_local_share 1\npayserver_limits_loaded 0\npayserver_limits_refused_in_force 0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.New()
			m.WatchLimits(func() metrics.LimitsState { return tt.state })
			m.WatchLimiter(func() float64 { return tt.share }, func() bool { return tt.deg })
			got := gather(t, m, "payserver_limiter_degraded", "payserver_limiter_local_share", "payserver_limits_loaded", "payserver_limits_refused_in_force")
			if got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// fakeOrders is an OrderStore that records nothing and fails on request.
type fakeOrders struct {
	pay.OrderStore
	fail  error
	stale int64
}

func (f fakeOrders) Create(context.Context, *pay.Order) error { return f.fail }
func (f fakeOrders) Finish(context.Context, *pay.Order) error { return f.fail }
func (f fakeOrders) MarkStaleUnknown(context.Context, time.Time) (int64, error) {
	return f.stale, f.fail
}

func TestInstrumentOrdersCountsRecordedOutcomes(t *testing.T) {
	m := metrics.New()
	ok := m.InstrumentOrders(fakeOrders{stale: 3})
	ctx := context.Background()
	_ = ok.Create(ctx, &pay.Order{})
	_ = ok.Finish(ctx, &pay.Order{Status: pay.StatusSucceeded})
	_ = ok.Finish(ctx, &pay.Order{Status: pay.StatusUnknown})
	_ = ok.Finish(ctx, &pay.Order{Status: "WEIRD"})
	_, _ = ok.MarkStaleUnknown(ctx, time.Now())

	failing := metrics.New()
	bad := failing.InstrumentOrders(fakeOrders{fail: errors.New("db down")})
	_ = bad.Finish(ctx, &pay.Order{Status: pay.StatusFailed})

	tests := []struct {
		m      *metrics.Metrics
		status string
		want   float64
	}{
		{m, "PROCESSING", 1},
		{m, "SUCCEEDED", 1},
		{m, "FAILED", 0},
		{m, "UNKNOWN", 4}, // one Finish + three stale
		{m, "other", 1},
		{failing, "FAILED", 0}, // a failed write recorded nothing
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			got := gatherValue(t, tt.m, tt.status)
			if got != tt.want {
				t.Fatalf("payserver_order_outcomes_total{status=%q} = %v, want %v", tt.status, got, tt.want)
			}
		})
	}
}

func gatherValue(t *testing.T, m *metrics.Metrics, status string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "payserver_order_outcomes_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if s.GetLabel()[0].GetValue() == status {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// slowOrders answers each call after its delay.
type slowOrders struct {
	pay.OrderStore
	delay time.Duration
}

func (s slowOrders) Get(context.Context, string) (*pay.Order, error) {
	time.Sleep(s.delay)
	return nil, pay.ErrOrderNotFound
}
func (s slowOrders) Create(context.Context, *pay.Order) error { time.Sleep(s.delay); return nil }
func (s slowOrders) Finish(context.Context, *pay.Order) error {
	time.Sleep(s.delay)
	return errors.New("db down")
}

func TestInstrumentOrdersTimesEachCall(t *testing.T) {
	m := metrics.New()
	const delay = 20 * time.Millisecond
	store := m.InstrumentOrders(slowOrders{delay: delay})
	ctx := context.Background()
	if _, err := store.Get(ctx, "r1"); !errors.Is(err, pay.ErrOrderNotFound) {
		t.Fatalf("Get: err = %v, want the store's ErrOrderNotFound", err)
	}
	_ = store.Create(ctx, &pay.Order{})
	_ = store.Create(ctx, &pay.Order{})
	_ = store.Finish(ctx, &pay.Order{Status: pay.StatusSucceeded}) // failed calls are timed too

	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetName() == "payserver_order_store_seconds" {
			for _, s := range mf.GetMetric() {
				if l := s.GetLabel()[0]; l.GetName() == "kind" { // as payserver_db_order_calls_total; bench-e2e reads it
					got[l.GetValue()] = s.GetHistogram()
				}
			}
		}
	}
	for op, want := range map[string]uint64{"get": 1, "create": 2, "finish": 1} {
		h := got[op]
		if h == nil {
			t.Fatalf("payserver_order_store_seconds{kind=%q} missing", op)
		}
		if h.GetSampleCount() != want {
			t.Errorf("op %s: count %d, want %d", op, h.GetSampleCount(), want)
		}
		if min := delay.Seconds() * float64(want); h.GetSampleSum() < min {
			t.Errorf("op %s: sum %.4fs, want at least %.4fs (the store's own delay)", op, h.GetSampleSum(), min)
		}
	}
}

// TestALostAnswerIsNoDegradedDecision: a check whose store answer was lost
// is counted as unavailable, never as a decision taken in process, under
// any policy: nothing was decided without the store.
func TestALostAnswerIsNoDegradedDecision(t *testing.T) {
	m := metrics.New()
	m.SetKeys(mustConfig(t, "limits:\n  ONLINE_PAY:ALIPAY: 100\n"))
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	m.Decided(ratelimit.Decision{Key: k, Unknown: true, Limit: 100, Source: ratelimit.SourceLocal}, time.Millisecond)
	if got := gather(t, m, "payserver_limiter_degraded_total"); got != "" {
		t.Fatalf("a lost answer counted as degraded:\n%s", got)
	}
	m.Decided(ratelimit.Decision{Key: k, Allowed: true, Limit: 100, Count: 1, Source: ratelimit.SourceLocal}, time.Millisecond)
	if got := gather(t, m, "payserver_limiter_degraded_total"); !strings.Contains(got, "source=local 1") {
		t.Fatalf("an in-process admission: %q, want it counted as degraded, source local", got)
	}
}
