package stats

import (
	"context"
	"errors"
	"sort"
	"time"

	"payserver/internal/ratelimit"
)

// TopMerchants is how many merchants are kept per key and minute when the
// counts are written, and per key and bucket in a report: those with the
// most attempts (admitted + refused), ties by merchant ID. The rest are
// summed under the merchant Other.
const TopMerchants = 20

// MaxMerchantsTracked is how many merchants an Aggregator counts apart per
// key and minute in memory; decisions for further merchants of that key
// and minute are counted under Other straight away.
const MaxMerchantsTracked = 1_000

// MerchantCounts is what the limiter decided for one merchant's requests
// on one key over some interval. A request admitted by a key in shadow
// mode counts as admitted.
type MerchantCounts struct {
	Admitted int64
	Refused  int64
}

// Add adds o to c.
func (c *MerchantCounts) Add(o MerchantCounts) {
	c.Admitted += o.Admitted
	c.Refused += o.Refused
}

// Attempts is Admitted + Refused.
func (c MerchantCounts) Attempts() int64 { return c.Admitted + c.Refused }

// MerchantRow is the counts of one merchant on one counted key in one
// minute, the unit a MerchantStore persists. Merchant is the request's
// merchant, ratelimit.NoMerchant for a request naming none, or Other for
// the merchants past the TopMerchants of that key and minute (a merchant
// whose ID is "other" is counted with them).
type MerchantRow struct {
	Minute   time.Time
	Key      ratelimit.Key
	Merchant string
	MerchantCounts
}

// MerchantBucket is the summed counts of one merchant on one key over one
// report bucket.
type MerchantBucket struct {
	Start    time.Time
	Key      ratelimit.Key
	Merchant string
	MerchantCounts
}

// MerchantStore persists and reads merchant rows. AddMerchants must add
// each row's counts to what is stored for its minute, key and merchant,
// never overwrite them, and be all or nothing. MerchantBuckets returns
// the buckets of q (its From, To, BizType, Channel, Keys and Granularity)
// sorted by start, bizType, channel and merchant, reading at most
// q.MaxRows+1 of them when q.MaxRows is positive.
type MerchantStore interface {
	AddMerchants(ctx context.Context, rows []MerchantRow) error
	MerchantBuckets(ctx context.Context, q Query) ([]MerchantBucket, error)
}

// MerchantReport is the channel-limit report grouped by merchant, as GET
// /reports/channel-limits?groupBy=merchant answers it.
type MerchantReport struct {
	From        time.Time           `json:"from"`
	To          time.Time           `json:"to"`
	Granularity Granularity         `json:"granularity"`
	GroupBy     GroupBy             `json:"groupBy"`
	Rows        []MerchantReportRow `json:"rows"`
}

// MerchantReportRow is one merchant of one key in one bucket: at most
// TopMerchants of them per key and bucket, the rest summed under the
// merchant Other.
type MerchantReportRow struct {
	BizType  string    `json:"bizType"`
	Channel  string    `json:"channel"`
	Merchant string    `json:"merchant"`
	Bucket   time.Time `json:"bucket"`
	Attempts int64     `json:"attempts"`
	Admitted int64     `json:"admitted"`
	Refused  int64     `json:"refused"`
}

// Merchants flushes this instance's pending counts (when a Flusher is
// set), then reads the merchant buckets of q, adds those this instance
// holds unwritten, its minute in progress included (when InProgress is
// set), and keeps TopMerchants per key and bucket, the rest summed under
// Other. Rows are sorted by bucket,
// key, then attempts (most first), with Other last of its key. It needs
// ReporterOptions.Merchants.
func (r *Reporter) Merchants(ctx context.Context, q Query) (MerchantReport, error) {
	if r.opts.Merchants == nil {
		return MerchantReport{}, errors.New("stats: no merchant store")
	}
	if r.opts.Flusher != nil {
		if err := r.opts.Flusher.Flush(ctx); err != nil {
			return MerchantReport{}, err
		}
	}
	buckets, err := r.opts.Merchants.MerchantBuckets(ctx, q)
	if err != nil {
		return MerchantReport{}, err
	}
	if q.MaxRows > 0 && len(buckets) > q.MaxRows {
		return MerchantReport{}, tooManyRows(q.MaxRows, "read more than %d stored rows (one per key, merchant and minute or bucket)")
	}
	if r.opts.InProgress != nil {
		buckets = append(buckets, r.opts.InProgress.MerchantsInProgress(q)...)
	}
	return MerchantReport{From: q.From, To: q.To, Granularity: q.Granularity, GroupBy: GroupByMerchant,
		Rows: topMerchantRows(buckets, TopMerchants)}, nil
}

// topMerchantRows groups buckets by start and key and keeps, of each
// group, the n merchants with the most attempts, the others summed under
// Other.
func topMerchantRows(buckets []MerchantBucket, n int) []MerchantReportRow {
	type group struct {
		start int64
		key   ratelimit.Key
	}
	var order []group
	counts := map[group]map[string]*MerchantCounts{}
	for _, b := range buckets {
		g := group{b.Start.Unix(), b.Key}
		m := counts[g]
		if m == nil {
			m = map[string]*MerchantCounts{}
			counts[g] = m
			order = append(order, g)
		}
		addMerchant(m, b.Merchant, b.MerchantCounts, 0)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].start != order[j].start {
			return order[i].start < order[j].start
		}
		return order[i].key.String() < order[j].key.String()
	})
	rows := make([]MerchantReportRow, 0, len(buckets))
	for _, g := range order {
		for _, mc := range topMerchants(counts[g], n) {
			rows = append(rows, MerchantReportRow{
				BizType: g.key.BizType, Channel: g.key.Channel, Merchant: mc.Merchant, Bucket: time.Unix(g.start, 0).UTC(),
				Attempts: mc.Attempts(), Admitted: mc.Admitted, Refused: mc.Refused,
			})
		}
	}
	return rows
}

// MerchantCount is one merchant's counts.
type MerchantCount struct {
	Merchant string
	MerchantCounts
}

// topMerchants returns the n merchants of m with the most attempts (ties
// by merchant ID), then, when m holds more or holds Other, their sum under
// Other.
func topMerchants(m map[string]*MerchantCounts, n int) []MerchantCount {
	all := make([]MerchantCount, 0, len(m))
	var rest MerchantCounts
	hasRest := false
	for id, c := range m {
		if id == Other {
			rest.Add(*c)
			hasRest = true
			continue
		}
		all = append(all, MerchantCount{Merchant: id, MerchantCounts: *c})
	}
	SortMerchants(all, func(c MerchantCounts) int64 { return c.Attempts() })
	if len(all) > n {
		for _, c := range all[n:] {
			rest.Add(c.MerchantCounts)
		}
		all, hasRest = all[:n], true
	}
	if hasRest {
		all = append(all, MerchantCount{Merchant: Other, MerchantCounts: rest})
	}
	return all
}

// SortMerchants sorts cs by by (most first), ties by merchant ID.
func SortMerchants(cs []MerchantCount, by func(MerchantCounts) int64) {
	sort.Slice(cs, func(i, j int) bool {
		if a, b := by(cs[i].MerchantCounts), by(cs[j].MerchantCounts); a != b {
			return a > b
		}
		return cs[i].Merchant < cs[j].Merchant
	})
}

// addMerchant adds c to merchant id's counts in m; when capacity is
// positive and m already holds that many merchants, a new one is added to
// Other instead.
func addMerchant(m map[string]*MerchantCounts, id string, c MerchantCounts, capacity int) {
	cur := m[id]
	if cur == nil {
		if capacity > 0 && len(m) >= capacity && id != Other {
			id = Other
			cur = m[id]
		}
		if cur == nil {
			cur = &MerchantCounts{}
			m[id] = cur
		}
	}
	cur.Add(c)
}

// merchantLabel is the merchant a decision is counted under.
func merchantLabel(d ratelimit.Decision) string {
	if d.RequestMerchant == "" {
		return ratelimit.NoMerchant
	}
	return d.RequestMerchant
}
