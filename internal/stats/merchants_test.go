package stats_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// memMerchants is a stats.MerchantStore that adds rows in memory, fails
// while fail is set, and answers MerchantBuckets with buckets.
type memMerchants struct {
	mu      sync.Mutex
	rows    map[string]stats.MerchantCounts
	writes  int
	fail    atomic.Bool
	buckets []stats.MerchantBucket
}

func newMemMerchants() *memMerchants { return &memMerchants{rows: map[string]stats.MerchantCounts{}} }

func (s *memMerchants) AddMerchants(_ context.Context, rows []stats.MerchantRow) error {
	if s.fail.Load() {
		return errors.New("database is down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	for _, r := range rows {
		id := r.Minute.Format("15:04") + " " + r.Key.String() + " " + r.Merchant
		c := s.rows[id]
		c.Add(r.MerchantCounts)
		s.rows[id] = c
	}
	return nil
}

func (s *memMerchants) MerchantBuckets(context.Context, stats.Query) ([]stats.MerchantBucket, error) {
	return s.buckets, nil
}

func (s *memMerchants) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, c := range s.rows {
		out = append(out, fmt.Sprintf("%s %d/%d", id, c.Admitted, c.Refused))
	}
	sort.Strings(out)
	return out
}

// newMerchantAggregator returns an Aggregator of testLimits on clock now
// that writes merchant rows to the store it returns.
func newMerchantAggregator(t *testing.T, now func() time.Time) (*stats.Aggregator, *memMerchants) {
	t.Helper()
	merchants := newMemMerchants()
	cfg := mustConfig(t, testLimits)
	agg, err := stats.NewAggregator(stats.AggregatorOptions{Store: newMemStore(), Merchants: merchants,
		Config: func() *ratelimit.Config { return cfg }, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return agg, merchants
}

// TestAggregatorCountsMerchants: each decision counts under its key,
// minute and request's merchant ("-" without one); a minute is written
// once it has ended (Drain writes the minute in progress), at most
// TopMerchants per key and minute with the rest under "other"; a failed
// write keeps the counts for the next flush.
func TestAggregatorCountsMerchants(t *testing.T) {
	now := t0
	agg, merchants := newMerchantAggregator(t, func() time.Time { return now })
	pay := key("PAY", "ALIPAY")
	decide := func(k ratelimit.Key, merchant string, allowed bool) {
		agg.Decided(ratelimit.Decision{Key: k, Allowed: allowed, RequestMerchant: merchant, Limit: 10}, 0)
	}
	// TopMerchants+2 merchants: M00 with the most, then M01..M21 with one
	// each; the last two by ID go to other with what other already holds.
	for i := 0; i < 3; i++ {
		decide(pay, "M00", i > 0)
	}
	for i := 1; i <= stats.TopMerchants+1; i++ {
		decide(pay, fmt.Sprintf("M%02d", i), true)
	}
	decide(pay, "", false)
	decide(key("PAY", "PAYPAL"), "M00", false) // unnamed channel: other:other
	agg.Decided(ratelimit.Decision{Key: pay, Conflict: true, RequestMerchant: "M00"}, 0)
	if err := agg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := merchants.lines(); len(got) != 0 {
		t.Fatalf("the minute in progress was written: %v", got)
	}
	now = now.Add(time.Minute)
	decide(pay, "M00", true) // 10:01, written by Drain
	merchants.fail.Store(true)
	if err := agg.Flush(context.Background()); err == nil {
		t.Fatal("flush with a failing merchant store succeeded")
	}
	merchants.fail.Store(false)
	if err := agg.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	// With 21 single-attempt merchants and "-" (one refusal) for 19
	// places, the ties go by ID: "-" first, then M01..M18.
	var want []string
	want = append(want, "10:00 PAY:ALIPAY - 0/1", "10:00 PAY:ALIPAY M00 2/1")
	for i := 1; i < stats.TopMerchants-1; i++ {
		want = append(want, fmt.Sprintf("10:00 PAY:ALIPAY M%02d 1/0", i))
	}
	want = append(want, "10:00 PAY:ALIPAY other 3/0", "10:00 other:other M00 0/1", "10:01 PAY:ALIPAY M00 1/0")
	sort.Strings(want)
	if got := merchants.lines(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("merchants =\n%v\nwant\n%v", got, want)
	}
}

// TestAggregatorBoundsMerchantsTracked: past MaxMerchantsTracked merchants
// of one key and minute, new merchants are counted under other at once.
func TestAggregatorBoundsMerchantsTracked(t *testing.T) {
	now := t0
	agg, merchants := newMerchantAggregator(t, func() time.Time { return now })
	pay := key("PAY", "ALIPAY")
	for i := 0; i < stats.MaxMerchantsTracked+50; i++ {
		agg.Decided(ratelimit.Decision{Key: pay, Allowed: true, RequestMerchant: fmt.Sprint("M", i), Limit: 10}, 0)
	}
	// A late merchant with the most attempts is not told apart any more.
	for i := 0; i < 5; i++ {
		agg.Decided(ratelimit.Decision{Key: pay, Allowed: true, RequestMerchant: "LATE", Limit: 10}, 0)
	}
	if err := agg.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := merchants.lines()
	if len(got) != stats.TopMerchants+1 {
		t.Fatalf("%d rows, want %d: %v", len(got), stats.TopMerchants+1, got)
	}
	var sum int64
	merchants.mu.Lock()
	for _, c := range merchants.rows {
		sum += c.Attempts()
	}
	merchants.mu.Unlock()
	if want := int64(stats.MaxMerchantsTracked + 55); sum != want {
		t.Errorf("attempts summed = %d, want %d", sum, want)
	}
}

func TestReporterMerchantsKeepsTopN(t *testing.T) {
	at := t0
	pay, shop := key("PAY", "ALIPAY"), key("SHOP", "ALIPAY")
	b := func(k ratelimit.Key, m string, admitted, refused int64) stats.MerchantBucket {
		return stats.MerchantBucket{Start: at, Key: k, Merchant: m, MerchantCounts: stats.MerchantCounts{Admitted: admitted, Refused: refused}}
	}
	var buckets []stats.MerchantBucket
	for i := 0; i < stats.TopMerchants+3; i++ {
		buckets = append(buckets, b(pay, fmt.Sprintf("M%02d", i), int64(100-i), 1))
	}
	buckets = append(buckets, b(pay, stats.Other, 7, 7), b(shop, "-", 1, 0))
	store := newMemMerchants()
	store.buckets = buckets
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: nopReader{}, Merchants: store})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Merchants(context.Background(), stats.Query{From: at, To: at.Add(time.Hour), Granularity: stats.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GroupBy != stats.GroupByMerchant || len(rep.Rows) != stats.TopMerchants+2 {
		t.Fatalf("groupBy %q, %d rows, want merchant and %d", rep.GroupBy, len(rep.Rows), stats.TopMerchants+2)
	}
	first, other := rep.Rows[0], rep.Rows[stats.TopMerchants]
	if first.Merchant != "M00" || first.Attempts != 101 {
		t.Errorf("first row = %+v, want M00 with 101 attempts", first)
	}
	// M20..M22 (80+79+78 admitted, 3 refused) join the stored other (7/7).
	if want := (stats.MerchantReportRow{BizType: "PAY", Channel: "ALIPAY", Merchant: stats.Other, Bucket: at,
		Attempts: 254, Admitted: 244, Refused: 10}); other != want {
		t.Errorf("other = %+v, want %+v", other, want)
	}
	if last := rep.Rows[len(rep.Rows)-1]; last.BizType != "SHOP" || last.Merchant != "-" {
		t.Errorf("last row = %+v, want SHOP's -", last)
	}
	rep, err = r.Merchants(context.Background(), stats.Query{From: at, To: at.Add(time.Hour), Granularity: stats.Hour, MaxRows: 10})
	if err == nil {
		t.Errorf("a report over MaxRows stored rows answered %d rows", len(rep.Rows))
	}
}

func TestParseQueryGroupBy(t *testing.T) {
	tests := []struct {
		value string
		want  stats.GroupBy
		bad   bool
	}{
		{"", stats.GroupByKey, false},
		{"key", stats.GroupByKey, false},
		{"merchant", stats.GroupByMerchant, false},
		{"currency", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			q, err := stats.ParseQuery(map[string][]string{"groupBy": {tt.value}}, t0)
			if (err != nil) != tt.bad {
				t.Fatalf("err = %v, want bad %v", err, tt.bad)
			}
			if q.GroupBy != tt.want {
				t.Errorf("groupBy = %q, want %q", q.GroupBy, tt.want)
			}
		})
	}
}

// TestMerchantReportIncludesTheMinuteInProgress: the merchant report adds
// what this instance has counted and not written, its minute in progress
// included, to the stored rows; once that minute has ended and been
// written it is counted once, from the store.
func TestMerchantReportIncludesTheMinuteInProgress(t *testing.T) {
	now := t0.Add(30 * time.Second)
	agg, merchants := newMerchantAggregator(t, func() time.Time { return now })
	pay := key("PAY", "ALIPAY")
	for i := range 3 {
		agg.Decided(ratelimit.Decision{Key: pay, Allowed: i < 2, RequestMerchant: "M1", Limit: 10}, 0)
	}
	agg.Decided(ratelimit.Decision{Key: key("PAY", "WECHAT"), Allowed: true, RequestMerchant: "M2", Limit: 10}, 0)
	// The store answers with what was written, as a database would.
	stored := &writtenMerchants{memMerchants: merchants}
	r, err := stats.NewReporter(stats.ReporterOptions{Reader: &fakeReader{}, Merchants: stored, Flusher: agg, InProgress: agg})
	if err != nil {
		t.Fatal(err)
	}
	q := stats.Query{From: t0.Add(-time.Hour), To: t0.Add(time.Hour), Granularity: stats.Hour, Channel: "ALIPAY"}
	report := func() string {
		t.Helper()
		rep, err := r.Merchants(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, row := range rep.Rows {
			out = append(out, fmt.Sprintf("%s %s:%s %s %d/%d", row.Bucket.Format("15:04"), row.BizType, row.Channel, row.Merchant, row.Admitted, row.Refused))
		}
		return fmt.Sprint(out)
	}
	want := "[10:00 PAY:ALIPAY M1 2/1]"
	if got := report(); got != want {
		t.Fatalf("the minute in progress: %s, want %s", got, want)
	}
	now = now.Add(time.Minute)
	agg.Decided(ratelimit.Decision{Key: pay, Allowed: true, RequestMerchant: "M1", Limit: 10}, 0)
	// The report's flush writes the ended minute; the new one is in memory.
	if got, want := report(), "[10:00 PAY:ALIPAY M1 3/1]"; got != want {
		t.Fatalf("a written minute and one in progress: %s, want %s", got, want)
	}
	if len(merchants.lines()) == 0 {
		t.Fatal("the ended minute was not written")
	}
}

// writtenMerchants answers MerchantBuckets with the rows written so far,
// each minute in the hour bucket it falls in.
type writtenMerchants struct{ *memMerchants }

func (w *writtenMerchants) MerchantBuckets(_ context.Context, q stats.Query) ([]stats.MerchantBucket, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []stats.MerchantBucket
	for id, c := range w.rows {
		var hhmm, k, merchant string
		if _, err := fmt.Sscan(id, &hhmm, &k, &merchant); err != nil {
			return nil, err
		}
		at, err := time.Parse("15:04", hhmm)
		if err != nil {
			return nil, err
		}
		start := time.Date(t0.Year(), t0.Month(), t0.Day(), at.Hour(), 0, 0, 0, time.UTC)
		parsed, err := ratelimit.ParseKey(k)
		if err != nil {
			return nil, err
		}
		if q.Channel != "" && parsed.Channel != q.Channel {
			continue
		}
		out = append(out, stats.MerchantBucket{Start: start, Key: parsed, Merchant: merchant, MerchantCounts: c})
	}
	return out, nil
}
