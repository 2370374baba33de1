package console

import (
	"context"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// channelWideCharts redraws the chart of each channel-wide key of charts
// ("*:UNIONPAY") from the hour's rows of every bizType on its channel, as
// its windows count them (the stats are kept per bizType, so the key has
// no rows of its own), with the key's own rule in force at now. It
// returns the first error reading the rows; a chart whose rows could not
// be read is left as it was.
func (d *dashboard) channelWideCharts(ctx context.Context, charts []hourChart, hour stats.Query, cfg *ratelimit.Config,
	changes []stats.KeyChange, now time.Time) error {
	var firstErr error
	for i, ch := range charts {
		key, err := ratelimit.ParseKey(ch.Key)
		if err != nil || !key.IsChannelWide() {
			continue
		}
		q := hour
		q.BizType, q.Channel, q.Keys = "", key.Channel, nil
		rep, err := d.r.opts.Reports.Report(ctx, q)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		var own []stats.KeyChange
		for _, c := range changes {
			if c.Key == key {
				own = append(own, c)
			}
		}
		var onChannel []stats.ReportRow
		for _, r := range rep.Rows {
			if r.BizType != ratelimit.ResolveBizType { // the resolver's calls never count in *:CHANNEL
				onChannel = append(onChannel, r)
			}
		}
		redrawn := newHourChart(ch.Key, rowsAsKey(onChannel), own, hour.From)
		redrawn.Scope = "every bizType on " + key.Channel
		if cfg != nil {
			redrawn.Rule = ruleWindows(configcenter.DescribeRule(cfg.RuleAt(key, now), true))
		}
		charts[i] = redrawn
	}
	for i, ch := range charts {
		if key, err := ratelimit.ParseKey(ch.Key); err == nil && key.IsResolve() {
			charts[i].Scope = resolverScope
		}
	}
	return firstErr
}

// resolverScope explains a RESOLVE:CHANNEL chart where it appears.
const resolverScope = "the resolver's own queries and closes of unknown outcomes on this channel: not payments, never counted in *:CHANNEL"

// resolverRows reads the hour's rows of the resolver's calls
// (RESOLVE:CHANNEL, counted under their own name), when the filter lets
// them in, so that the dashboard shows and names them.
func (d *dashboard) resolverRows(ctx context.Context, hour stats.Query) ([]stats.ReportRow, error) {
	if hour.BizType != "" && hour.BizType != ratelimit.ResolveBizType {
		return nil, nil
	}
	hour.BizType = ratelimit.ResolveBizType
	rep, err := d.r.opts.Reports.Report(ctx, hour)
	return rep.Rows, err
}

// rowsAsKey returns rows relabelled as one key's, so that newHourChart adds
// them up minute by minute.
func rowsAsKey(rows []stats.ReportRow) []stats.ReportRow {
	out := make([]stats.ReportRow, len(rows))
	for i, r := range rows {
		r.BizType = "*"
		r.LimitChanged, r.LimitChanges = false, nil // the bizTypes' own changes are not the key's
		out[i] = r
	}
	return out
}
