package stats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/limits"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
	"payserver/internal/testutil"
)

// memStore is a stats.Store that adds rows in memory, like the additive
// upsert, and fails while fail is set.
type memStore struct {
	mu    sync.Mutex
	rows  map[string]stats.Row
	calls [][]stats.Row
	fail  atomic.Bool
}

func newMemStore() *memStore { return &memStore{rows: map[string]stats.Row{}} }

func (s *memStore) Add(_ context.Context, rows []stats.Row) error {
	if s.fail.Load() {
		return errors.New("database is down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, rows)
	for _, r := range rows {
		id := r.Minute.Format(time.RFC3339) + " " + r.Key.String()
		cur := s.rows[id]
		cur.Minute, cur.Key, cur.Rule = r.Minute, r.Key, r.Rule
		cur.Counts.Add(r.Counts)
		s.rows[id] = cur
	}
	return nil
}

func (s *memStore) total() stats.Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c stats.Counts
	for _, r := range s.rows {
		c.Add(r.Counts)
	}
	return c
}

const testLimits = `window: 1s
limits:
  PAY:ALIPAY: 10
  PAY:WECHAT: -1
  PAY:UNIONPAY: 0
  SHOP:ALIPAY: {limit: 4, window: 1m, shadow: true}
`

func mustConfig(t *testing.T, doc string) *ratelimit.Config {
	t.Helper()
	parsed, err := limits.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := parsed.Config
	return cfg
}

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

type harness struct {
	agg   *stats.Aggregator
	store *memStore
	clock *testutil.Clock
	cfg   atomic.Pointer[ratelimit.Config]
}

func newHarness(t *testing.T, doc string, maxPending int) *harness {
	t.Helper()
	h := &harness{store: newMemStore(), clock: testutil.NewClock(t0.Add(5 * time.Second))}
	if doc != "" {
		h.cfg.Store(mustConfig(t, doc))
	}
	agg, err := stats.NewAggregator(stats.AggregatorOptions{
		Store: h.store, Config: h.cfg.Load, Now: h.clock.Now, MaxPending: maxPending,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.agg = agg
	return h
}

func key(biz, ch string) ratelimit.Key { return ratelimit.Key{BizType: biz, Channel: ch} }

func TestAggregatorCountsDecisions(t *testing.T) {
	pay := key("PAY", "ALIPAY")
	tests := []struct {
		name     string
		decision ratelimit.Decision
		wantKey  ratelimit.Key
		wantRule string
		want     stats.Counts
	}{
		{"admitted by redis", ratelimit.Decision{Key: pay, Allowed: true, Limit: 10, Count: 3, Source: ratelimit.SourceRedis},
			pay, "10/1s", stats.Counts{Attempts: 1, Admitted: 1, PeakUtilization: 0.3}},
		{"limited by redis", ratelimit.Decision{Key: pay, Limit: 10, Count: 10, Source: ratelimit.SourceRedis},
			pay, "10/1s", stats.Counts{Attempts: 1, Limited: 1, PeakUtilization: 1}},
		{"limited from the near-cache", ratelimit.Decision{Key: pay, Limit: 10, Count: 10, Source: ratelimit.SourceNearCache},
			pay, "10/1s", stats.Counts{Attempts: 1, Limited: 1, NearCacheRefusals: 1, PeakUtilization: 1}},
		{"shadow refusal is admitted", ratelimit.Decision{Key: key("SHOP", "ALIPAY"), Allowed: true, Shadow: true, Limit: 4, Count: 4, Source: ratelimit.SourceRedis},
			key("SHOP", "ALIPAY"), "4/1m (shadow)", stats.Counts{Attempts: 1, Admitted: 1, ShadowLimited: 1, PeakUtilization: 1}},
		{"admitted by local windows is degraded", ratelimit.Decision{Key: pay, Allowed: true, Limit: 5, Count: 1, Source: ratelimit.SourceLocal},
			pay, "10/1s", stats.Counts{Attempts: 1, Admitted: 1, Degraded: 1, PeakUtilization: 0.2}},
		{"refused by local windows is limited, not degraded", ratelimit.Decision{Key: pay, Limit: 5, Count: 5, Source: ratelimit.SourceLocal},
			pay, "10/1s", stats.Counts{Attempts: 1, Limited: 1, PeakUtilization: 1}},
		{"fail-open is degraded", ratelimit.Decision{Key: pay, Allowed: true, Limit: 10, Source: ratelimit.SourceFailOpen},
			pay, "10/1s", stats.Counts{Attempts: 1, Admitted: 1, Degraded: 1}},
		{"closed key has no utilisation", ratelimit.Decision{Key: key("PAY", "UNIONPAY"), Limit: 0, Source: ratelimit.SourceClosed},
			key("PAY", "UNIONPAY"), "0/1s", stats.Counts{Attempts: 1, Limited: 1}},
		{"configured unlimited key keeps its name", ratelimit.Decision{Key: key("PAY", "WECHAT"), Allowed: true, Limit: ratelimit.Unlimited, Remaining: ratelimit.Unlimited, Source: ratelimit.SourceUnlimited},
			key("PAY", "WECHAT"), "unlimited", stats.Counts{Attempts: 1, Admitted: 1}},
		{"unconfigured key with a known channel", ratelimit.Decision{Key: key("ANYTHING_AT_ALL", "WECHAT"), Allowed: true, Limit: ratelimit.Unlimited, Source: ratelimit.SourceUnlimited},
			key(stats.Other, "WECHAT"), "unlimited", stats.Counts{Attempts: 1, Admitted: 1}},
		{"unconfigured key with an unknown channel", ratelimit.Decision{Key: key("X", "NOWHERE"), Allowed: true, Limit: ratelimit.Unlimited, Source: ratelimit.SourceUnlimited},
			key(stats.Other, stats.Other), "unlimited", stats.Counts{Attempts: 1, Admitted: 1}},
		{"the resolver's calls keep their name", ratelimit.Decision{Key: ratelimit.ResolveKey("WECHAT"), Allowed: true, Limit: ratelimit.Unlimited, Source: ratelimit.SourceUnlimited},
			ratelimit.ResolveKey("WECHAT"), "unlimited", stats.Counts{Attempts: 1, Admitted: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, testLimits, 0)
			h.agg.Decided(tt.decision, time.Millisecond)
			got := h.agg.Pending()
			if len(got) != 1 {
				t.Fatalf("got %d rows %+v, want 1", len(got), got)
			}
			r := got[0]
			if r.Key != tt.wantKey || r.Rule != tt.wantRule || !r.Minute.Equal(t0) {
				t.Errorf("got row %v %q at %v, want %v %q at %v", r.Key, r.Rule, r.Minute, tt.wantKey, tt.wantRule, t0)
			}
			if r.Counts != tt.want {
				t.Errorf("got counts %+v\nwant        %+v", r.Counts, tt.want)
			}
		})
	}
}

func TestAggregatorMinutesReleasesAndConfigChanges(t *testing.T) {
	h := newHarness(t, testLimits, 0)
	pay := key("PAY", "ALIPAY")
	admit := ratelimit.Decision{Key: pay, Allowed: true, Limit: 10, Count: 2, Source: ratelimit.SourceRedis}
	h.agg.Decided(admit, 0)
	h.agg.Released(pay)
	h.clock.Advance(54*time.Second + 999*time.Millisecond) // 10:00:59.999: same minute
	h.agg.Decided(ratelimit.Decision{Key: pay, Allowed: true, Limit: 10, Count: 7, Source: ratelimit.SourceRedis}, 0)
	h.clock.Advance(time.Millisecond) // 10:01:00: next minute
	h.cfg.Store(mustConfig(t, "window: 1s\nlimits:\n  PAY:ALIPAY: 20\n"))
	h.agg.Decided(admit, 0)
	h.cfg.Store(nil) // no limits at all: everything is unconfigured
	h.agg.Decided(admit, 0)

	got := h.agg.Pending()
	want := []stats.Row{
		{Minute: t0, Key: pay, Rule: "10/1s", Counts: stats.Counts{Attempts: 2, Admitted: 2, Released: 1, PeakUtilization: 0.7}},
		{Minute: t0.Add(time.Minute), Key: pay, Rule: "20/1s", Counts: stats.Counts{Attempts: 1, Admitted: 1, PeakUtilization: 0.2}},
		{Minute: t0.Add(time.Minute), Key: key(stats.Other, stats.Other), Rule: "unlimited", Counts: stats.Counts{Attempts: 1, Admitted: 1, PeakUtilization: 0.2}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows %+v, want %d", len(got), got, len(want))
	}
	// Sorted by minute then key: "PAY" < "other" in byte order.
	for i := range want {
		if !got[i].Minute.Equal(want[i].Minute) || got[i].Key != want[i].Key || got[i].Rule != want[i].Rule || got[i].Counts != want[i].Counts {
			t.Errorf("row %d: got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestAggregatorFlush(t *testing.T) {
	pay := key("PAY", "ALIPAY")
	limited := ratelimit.Decision{Key: pay, Limit: 10, Count: 10, Source: ratelimit.SourceRedis}
	ctx := context.Background()

	t.Run("writes sorted rows and empties the buffer", func(t *testing.T) {
		h := newHarness(t, testLimits, 0)
		h.agg.Decided(ratelimit.Decision{Key: key("SHOP", "ALIPAY"), Allowed: true, Source: ratelimit.SourceRedis, Limit: 4, Count: 1}, 0)
		h.agg.Decided(limited, 0)
		if err := h.agg.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if len(h.store.calls) != 1 || len(h.store.calls[0]) != 2 || h.store.calls[0][0].Key != pay {
			t.Fatalf("store got %+v, want one call with PAY:ALIPAY first", h.store.calls)
		}
		if p := h.agg.Pending(); len(p) != 0 {
			t.Fatalf("pending after flush: %+v", p)
		}
		if err := h.agg.Flush(ctx); err != nil || len(h.store.calls) != 1 {
			t.Fatalf("an empty flush called the store: err %v, calls %d", err, len(h.store.calls))
		}
		st := h.agg.Stats()
		if st.Flushes != 1 || st.RowsWritten != 2 || st.FlushFailures != 0 || st.Pending != 0 {
			t.Errorf("stats %+v", st)
		}
	})

	t.Run("a failed flush keeps the counts and adds later ones", func(t *testing.T) {
		h := newHarness(t, testLimits, 0)
		h.agg.Decided(limited, 0)
		h.store.fail.Store(true)
		if err := h.agg.Flush(ctx); err == nil {
			t.Fatal("flush to a failing store returned nil")
		}
		h.agg.Decided(limited, 0)
		h.store.fail.Store(false)
		if err := h.agg.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.store.total(); got.Attempts != 2 || got.Limited != 2 {
			t.Fatalf("stored %+v, want 2 limited attempts", got)
		}
		if st := h.agg.Stats(); st.FlushFailures != 1 || st.Flushes != 1 {
			t.Errorf("stats %+v", st)
		}
	})

	t.Run("past MaxPending rows new rows are dropped and counted", func(t *testing.T) {
		h := newHarness(t, testLimits, 2)
		h.store.fail.Store(true)
		h.agg.Decided(limited, 0)                                                                         // row 1
		h.agg.Decided(ratelimit.Decision{Key: key("PAY", "WECHAT"), Allowed: true, Limit: -1}, 0)         // row 2
		h.agg.Decided(ratelimit.Decision{Key: key("SHOP", "ALIPAY"), Allowed: true, Limit: 4}, 0)         // dropped
		h.agg.Released(key("SHOP", "ALIPAY"))                                                             // dropped
		h.agg.Decided(limited, 0)                                                                         // existing row: counted
		_ = h.agg.Flush(ctx)                                                                              // fails: 2 rows back
		h.agg.Decided(ratelimit.Decision{Key: key("PAY", "UNIONPAY"), Source: ratelimit.SourceClosed}, 0) // dropped
		st := h.agg.Stats()
		if st.DroppedEvents != 3 || st.Pending != 2 {
			t.Fatalf("stats %+v, want 3 dropped events and 2 rows held", st)
		}
		h.store.fail.Store(false)
		if err := h.agg.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.store.total(); got.Attempts != 3 || got.Limited != 2 {
			t.Fatalf("stored %+v, want 3 attempts, 2 limited", got)
		}
	})

	t.Run("drain retries until the store answers", func(t *testing.T) {
		h := newHarness(t, testLimits, 0)
		h.agg.Decided(limited, 0)
		h.store.fail.Store(true)
		time.AfterFunc(120*time.Millisecond, func() { h.store.fail.Store(false) })
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := h.agg.Drain(dctx); err != nil {
			t.Fatal(err)
		}
		if got := h.store.total(); got.Attempts != 1 {
			t.Fatalf("stored %+v", got)
		}
	})

	t.Run("drain gives up when its context ends", func(t *testing.T) {
		h := newHarness(t, testLimits, 0)
		h.agg.Decided(limited, 0)
		h.store.fail.Store(true)
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := h.agg.Drain(dctx); err == nil {
			t.Fatal("drain to a failing store returned nil")
		}
		if p := h.agg.Pending(); len(p) != 1 {
			t.Fatalf("pending %+v, want the row kept", p)
		}
	})
}

// TestAggregatorConcurrentFlushLosesNothing flushes while many goroutines
// count: every event must end up stored exactly once. A flush that copied
// the map and then cleared it (instead of swapping it under the lock) would
// lose the events that arrive in between.
func TestAggregatorConcurrentFlushLosesNothing(t *testing.T) {
	h := newHarness(t, testLimits, 0)
	const workers, each = 16, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var flusher sync.WaitGroup
	flusher.Add(1)
	go func() {
		defer flusher.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h.store.fail.Store(i%3 == 0) // every third flush fails
			_ = h.agg.Flush(context.Background())
			h.clock.Advance(20 * time.Second)
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			k := key("PAY", "ALIPAY")
			if w%2 == 1 {
				k = key("SHOP", "ALIPAY")
			}
			for i := 0; i < each; i++ {
				h.agg.Decided(ratelimit.Decision{Key: k, Allowed: i%4 != 0, Limit: 10, Count: 5, Source: ratelimit.SourceRedis}, 0)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	flusher.Wait()
	h.store.fail.Store(false)
	if err := h.agg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := h.store.total()
	if got.Attempts != workers*each || got.Admitted != workers*each*3/4 || got.Limited != workers*each/4 {
		t.Fatalf("stored %+v, want %d attempts (%d admitted, %d limited)", got, workers*each, workers*each*3/4, workers*each/4)
	}
}

func TestNewAggregatorRefusesNilDependencies(t *testing.T) {
	if _, err := stats.NewAggregator(stats.AggregatorOptions{Config: func() *ratelimit.Config { return nil }}); err == nil {
		t.Error("nil store accepted")
	}
	if _, err := stats.NewAggregator(stats.AggregatorOptions{Store: newMemStore()}); err == nil {
		t.Error("nil config func accepted")
	}
}

func BenchmarkAggregatorDecided(b *testing.B) {
	parsed, err := limits.Parse([]byte(testLimits))
	if err != nil {
		b.Fatal(err)
	}
	cfg := parsed.Config
	agg, err := stats.NewAggregator(stats.AggregatorOptions{Store: newMemStore(), Config: func() *ratelimit.Config { return cfg }})
	if err != nil {
		b.Fatal(err)
	}
	d := ratelimit.Decision{Key: key("PAY", "ALIPAY"), Allowed: true, Limit: 10, Count: 5, Source: ratelimit.SourceRedis}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			agg.Decided(d, 0)
		}
	})
}

// TestAggregatorRuleFollowsSchedules: the rule recorded with a minute is
// the one in force then, a schedule's during it and the key's own after,
// without a new snapshot; a key only a schedule names is counted under its
// own name.
func TestAggregatorRuleFollowsSchedules(t *testing.T) {
	now := t0
	cfg := mustConfig(t, `limits:
  PAY:ALIPAY: 10
schedules:
  - {key: "PAY:ALIPAY", from: "2026-03-01T10:01:00Z", to: "2026-03-01T10:02:00Z", limits: 0}
  - {key: "ONLY:WECHAT", from: "2026-03-01T10:00:00Z", to: "2026-03-01T11:00:00Z", limits: 5}
`)
	store := newMemStore()
	agg, err := stats.NewAggregator(stats.AggregatorOptions{Store: store, Config: func() *ratelimit.Config { return cfg }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	pay := ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}
	for _, at := range []time.Duration{0, 90 * time.Second, 150 * time.Second} {
		now = t0.Add(at)
		agg.Decided(ratelimit.Decision{Key: pay, Allowed: true}, 0)
	}
	agg.Decided(ratelimit.Decision{Key: ratelimit.Key{BizType: "ONLY", Channel: "WECHAT"}, Allowed: true}, 0)
	var got []string
	for _, r := range agg.Pending() {
		got = append(got, r.Minute.Format("15:04")+" "+r.Key.String()+" "+r.Rule)
	}
	want := []string{"10:00 PAY:ALIPAY 10/1s", "10:01 PAY:ALIPAY 0/1s", "10:02 ONLY:WECHAT 5/1s", "10:02 PAY:ALIPAY 10/1s"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows = %q, want %q", got, want)
	}
}
