package console

import (
	"context"

	"payserver/internal/ratelimit"
	"payserver/internal/stats"
)

// dashboardMerchants is how many merchants the dashboard lists per key,
// by use and by refusals.
const dashboardMerchants = 5

// merchantLine is one key's top merchants over the chart's hour.
type merchantLine struct {
	Key string
	// ByUse are the merchants with the most attempts, ByRefusals those
	// with the most refusals (none without refusals); each at most
	// dashboardMerchants, "other" being the merchants past the stored top.
	ByUse, ByRefusals []stats.MerchantCount
}

// merchants reads the hour's merchant counts of the keys of page and
// returns each key's top merchants, in page order; keys without counts
// are left out. The second answer says why they are missing.
func (d *dashboard) merchants(ctx context.Context, hour stats.Query, page []string) ([]merchantLine, string) {
	var keys []ratelimit.Key
	for _, k := range page {
		if key, err := ratelimit.ParseKey(k); err == nil {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, ""
	}
	hour.Keys = keys
	rep, err := d.r.opts.Reports.Merchants(ctx, hour)
	if err != nil {
		d.r.log.Warn("dashboard: could not read the last hour's merchants", "err", err)
		return nil, "The stats database is unavailable; the top merchants are missing."
	}
	sums := map[string]map[string]*stats.MerchantCounts{}
	for _, r := range rep.Rows {
		k := ratelimit.Key{BizType: r.BizType, Channel: r.Channel}.String()
		if sums[k] == nil {
			sums[k] = map[string]*stats.MerchantCounts{}
		}
		c := sums[k][r.Merchant]
		if c == nil {
			c = &stats.MerchantCounts{}
			sums[k][r.Merchant] = c
		}
		c.Add(stats.MerchantCounts{Admitted: r.Admitted, Refused: r.Refused})
	}
	var out []merchantLine
	for _, k := range page {
		if sums[k] == nil {
			continue
		}
		var all []stats.MerchantCount
		for m, c := range sums[k] {
			all = append(all, stats.MerchantCount{Merchant: m, MerchantCounts: *c})
		}
		line := merchantLine{Key: k}
		stats.SortMerchants(all, stats.MerchantCounts.Attempts)
		line.ByUse = append(line.ByUse, all[:min(len(all), dashboardMerchants)]...)
		stats.SortMerchants(all, func(c stats.MerchantCounts) int64 { return c.Refused })
		for _, c := range all[:min(len(all), dashboardMerchants)] {
			if c.Refused > 0 {
				line.ByRefusals = append(line.ByRefusals, c)
			}
		}
		out = append(out, line)
	}
	return out, ""
}
