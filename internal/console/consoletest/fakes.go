package consoletest

import (
	"context"
	"errors"
	"slices"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/limits"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// NopPay is a pay service the test never calls.
type NopPay struct{}

func (NopPay) Pay(context.Context, pay.PayRequest) (*pay.Order, error) {
	return nil, errors.New("unused")
}

func (NopPay) Get(context.Context, string) (*pay.Order, error) { return nil, errors.New("unused") }

// Reports is the console's report service: it answers the rows it is
// given, keeps the queries it got, and fails with Err when it is set.
type Reports struct {
	Rep          stats.Report
	MerchantRows []stats.MerchantReportRow
	AmountRows   []stats.AmountBucket
	KeyChanges   []stats.KeyChange
	Err          error
	Got          []stats.Query
	// Reported are the queries of Report alone.
	Reported []stats.Query
}

func (f *Reports) Changes(_ context.Context, q stats.Query) ([]stats.KeyChange, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	var out []stats.KeyChange
	for _, c := range f.KeyChanges {
		if !c.Bucket.Before(q.From) && c.Bucket.Before(q.To) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *Reports) Amounts(_ context.Context, q stats.Query) (stats.AmountReport, error) {
	f.Got = append(f.Got, q)
	if f.Err != nil {
		return stats.AmountReport{}, f.Err
	}
	return stats.AmountReport{From: q.From, To: q.To, Granularity: q.Granularity, Rows: f.AmountRows}, nil
}

// Merchants answers the rows of f.MerchantRows that q selects: its bizType,
// channel and keys.
func (f *Reports) Merchants(_ context.Context, q stats.Query) (stats.MerchantReport, error) {
	f.Got = append(f.Got, q)
	if f.Err != nil {
		return stats.MerchantReport{}, f.Err
	}
	r := stats.MerchantReport{From: q.From, To: q.To, Granularity: q.Granularity, GroupBy: stats.GroupByMerchant, Rows: []stats.MerchantReportRow{}}
	for _, row := range f.MerchantRows {
		key := ratelimit.Key{BizType: row.BizType, Channel: row.Channel}
		if (q.BizType == "" || q.BizType == row.BizType) && (q.Channel == "" || q.Channel == row.Channel) &&
			(len(q.Keys) == 0 || slices.Contains(q.Keys, key)) {
			r.Rows = append(r.Rows, row)
		}
	}
	return r, nil
}

// Report answers the rows of f.Rep that q selects, as the stats store
// does: its bizType, channel and keys.
func (f *Reports) Stream(ctx context.Context, q stats.Query, w stats.ReportWriter) error {
	rep, err := f.Report(ctx, q)
	if err != nil {
		return err
	}
	return stats.WriteReport(w, rep)
}

func (f *Reports) Report(_ context.Context, q stats.Query) (stats.Report, error) {
	f.Got = append(f.Got, q)
	f.Reported = append(f.Reported, q)
	if f.Err != nil {
		return stats.Report{}, f.Err
	}
	r := stats.Report{From: q.From, To: q.To, Granularity: q.Granularity}
	for _, row := range f.Rep.Rows {
		key := ratelimit.Key{BizType: row.BizType, Channel: row.Channel}
		if (q.BizType == "" || q.BizType == row.BizType) && (q.Channel == "" || q.Channel == row.Channel) &&
			(len(q.Keys) == 0 || slices.Contains(q.Keys, key)) {
			r.Rows = append(r.Rows, row)
		}
	}
	return r, nil
}

// Usage serves a fixed config, each window 3/4 full; bizType DOWN
// fails to read.
type Usage struct {
	Cfg *ratelimit.Config
	// Now, when set, is the instant of the rule in force; default the
	// wall clock.
	Now time.Time
}

func (f Usage) Config() *ratelimit.Config { return f.Cfg }

func (f Usage) Usage(_ context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	r := f.Cfg.RuleAt(k, time.Now())
	if !f.Now.IsZero() {
		r = f.Cfg.RuleAt(k, f.Now)
	}
	if k.BizType == "DOWN" {
		return r, nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	counts := make([]int64, len(r.Windows))
	for i, w := range r.Windows {
		counts[i] = w.Limit * 3 / 4
	}
	return r, counts, nil
}

func (f Usage) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	return UsageOfEach(ctx, keys, f.Usage)
}

// UsageOfEach answers UsageOf key by key from usage, a fake's Usage.
func UsageOfEach(ctx context.Context, keys []ratelimit.Key, usage func(context.Context, ratelimit.Key) (ratelimit.Rule, []int64, error)) []ratelimit.KeyUsage {
	out := make([]ratelimit.KeyUsage, len(keys))
	for i, k := range keys {
		out[i].Rule, out[i].Counts, out[i].Err = usage(ctx, k)
	}
	return out
}

// LimitsView is the limits in force: Cfg, LimitRoutes and St, degraded.
type LimitsView struct {
	Cfg         *ratelimit.Config
	LimitRoutes limits.Routes
	St          configcenter.Status
	// Now, when set, is the instant Usage reads the rule in force at.
	Now time.Time
}

func (f LimitsView) Config() *ratelimit.Config { return f.Cfg }

func (f LimitsView) Status() configcenter.Status { return f.St }

func (f LimitsView) Degraded() bool { return true }

func (f LimitsView) Routes() limits.Routes { return f.LimitRoutes }

func (f LimitsView) Usage(ctx context.Context, k ratelimit.Key) (ratelimit.Rule, []int64, error) {
	return Usage{Cfg: f.Cfg, Now: f.Now}.Usage(ctx, k)
}

func (f LimitsView) UsageOf(ctx context.Context, keys []ratelimit.Key) []ratelimit.KeyUsage {
	return UsageOfEach(ctx, keys, f.Usage)
}

// Now is the instant the tests' servers take as now.
var Now = time.Date(2026, 3, 1, 10, 30, 20, 0, time.UTC)
