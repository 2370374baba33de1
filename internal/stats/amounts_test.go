package stats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// memAmounts is a stats.AmountStore that adds rows in memory and fails
// while fail is set.
type memAmounts struct {
	mu   sync.Mutex
	rows map[string]stats.AmountCounts
	fail atomic.Bool
}

func (s *memAmounts) AddAmounts(_ context.Context, rows []stats.AmountRow) error {
	if s.fail.Load() {
		return errors.New("database is down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		id := r.Minute.Format("15:04") + " " + r.Channel + " " + r.Currency
		c := s.rows[id]
		c.Add(r.AmountCounts)
		s.rows[id] = c
	}
	return nil
}

func (s *memAmounts) AmountBuckets(context.Context, stats.Query) ([]stats.AmountBucket, error) {
	return nil, nil
}

func (s *memAmounts) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, c := range s.rows {
		out = append(out, fmt.Sprintf("%s %+v", id, c))
	}
	sort.Strings(out)
	return out
}

// TestAggregatorCountsAmountsPerChannel: decisions on requests with an
// amount add to their channel and currency, admitted or refused; other
// channels and odd currencies are counted under "other"; a failed flush
// keeps the amounts for the next.
func TestAggregatorCountsAmountsPerChannel(t *testing.T) {
	now := t0
	amounts := &memAmounts{rows: map[string]stats.AmountCounts{}}
	cfg := mustConfig(t, testLimits+"  \"*:UNIONPAY\": 5\n")
	agg, err := stats.NewAggregator(stats.AggregatorOptions{Store: newMemStore(), Amounts: amounts,
		Config: func() *ratelimit.Config { return cfg }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	pay := ratelimit.Key{BizType: "PAY", Channel: "ALIPAY"}
	decide := func(k ratelimit.Key, allowed bool, amount int64, currency string) {
		agg.Decided(ratelimit.Decision{Key: k, Allowed: allowed, RequestAmount: amount, Currency: currency, Limit: 10}, 0)
	}
	decide(pay, true, 1000, "CNY")
	decide(pay, true, 2000, "CNY")
	decide(pay, false, 500_000_000, "CNY")
	decide(pay, true, 0, "")                                                      // no amount: not an amount row
	decide(ratelimit.Key{BizType: "REFUND", Channel: "UNIONPAY"}, true, 7, "USD") // channel named by *:UNIONPAY
	decide(ratelimit.Key{BizType: "PAY", Channel: "PAYPAL"}, false, 9, "usd")     // unnamed channel, odd currency
	amounts.fail.Store(true)
	if err := agg.Flush(context.Background()); err == nil {
		t.Fatal("flush with a failing amount store succeeded")
	}
	amounts.fail.Store(false)
	decide(pay, true, 5, "CNY")
	// A duplicate of an admitted requestId is not counted again.
	agg.Decided(ratelimit.Decision{Key: pay, Allowed: true, Duplicate: true, RequestAmount: 5, Currency: "CNY", Limit: 10}, 0)
	if err := agg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"10:00 ALIPAY CNY {Admitted:3 AdmittedAmount:3005 Refused:1 RefusedAmount:500000000}",
		"10:00 UNIONPAY USD {Admitted:1 AdmittedAmount:7 Refused:0 RefusedAmount:0}",
		"10:00 other other {Admitted:0 AdmittedAmount:0 Refused:1 RefusedAmount:9}",
	}
	if got := amounts.lines(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("amounts =\n%v\nwant\n%v", got, want)
	}
}

func TestReporterAmountsRefusesBizType(t *testing.T) {
	r, _ := stats.NewReporter(stats.ReporterOptions{Reader: nopReader{}, Amounts: &memAmounts{}})
	if _, err := r.Amounts(context.Background(), stats.Query{BizType: "PAY", Granularity: stats.Hour}); !errors.Is(err, stats.ErrAmountsByBizType) {
		t.Errorf("err = %v, want ErrAmountsByBizType", err)
	}
	rep, err := r.Amounts(context.Background(), stats.Query{Granularity: stats.Hour})
	if err != nil || rep.Rows == nil {
		t.Errorf("report = %+v, %v; want empty rows", rep, err)
	}
}

type nopReader struct{}

func (nopReader) Buckets(context.Context, stats.Query) ([]stats.Bucket, error) { return nil, nil }
func (nopReader) EachBucket(context.Context, stats.Query, func(stats.Bucket) error) error {
	return nil
}
func (nopReader) MoreBucketsThan(context.Context, stats.Query, int) (bool, error) { return false, nil }

// TestAmountBucketMajor: JSON and CSV carry each amount in minor units and
// in major units of its currency (CNY 2 digits, JPY 0, BHD 3); currency
// "other" has no major unit.
func TestAmountBucketMajor(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	rep := stats.AmountReport{Rows: []stats.AmountBucket{
		{Start: at, Channel: "ALIPAY", Currency: "CNY", Admitted: 2, AdmittedAmount: 1274570, Refused: 1, RefusedAmount: 500000000},
		{Start: at, Channel: "ALIPAY", Currency: "JPY", Admitted: 1, AdmittedAmount: 1000000},
		{Start: at, Channel: "ALIPAY", Currency: "BHD", Admitted: 1, AdmittedAmount: 1500},
		{Start: at, Channel: "other", Currency: "other", Refused: 1, RefusedAmount: 9},
	}}
	wantJSON := []string{
		`"admittedAmount":1274570,"refused":1,"refusedAmount":500000000,"admittedAmountMajor":"12745.70","refusedAmountMajor":"5000000.00"}`,
		`"admittedAmount":1000000,"refused":0,"refusedAmount":0,"admittedAmountMajor":"1000000","refusedAmountMajor":"0"}`,
		`"admittedAmount":1500,"refused":0,"refusedAmount":0,"admittedAmountMajor":"1.500","refusedAmountMajor":"0.000"}`,
		`"currency":"other","admitted":0,"admittedAmount":0,"refused":1,"refusedAmount":9}`,
	}
	for i, row := range rep.Rows {
		raw, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(raw), wantJSON[i]) {
			t.Errorf("row %d JSON = %s, want it to end %s", i, raw, wantJSON[i])
		}
	}
	var b strings.Builder
	if err := stats.WriteAmountsCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	want := `bucket,channel,currency,admitted,admittedAmount,admittedAmountMajor,refused,refusedAmount,refusedAmountMajor
2026-11-29T10:00:00Z,ALIPAY,CNY,2,1274570,12745.70,1,500000000,5000000.00
2026-11-29T10:00:00Z,ALIPAY,JPY,1,1000000,1000000,0,0,0
2026-11-29T10:00:00Z,ALIPAY,BHD,1,1500,1.500,0,0,0.000
2026-11-29T10:00:00Z,other,other,0,0,,1,9,
`
	if b.String() != want {
		t.Errorf("CSV =\n%s\nwant\n%s", b.String(), want)
	}
}
