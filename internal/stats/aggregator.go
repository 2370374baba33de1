package stats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"payserver/internal/configcenter"
	"payserver/internal/ratelimit"
	"payserver/internal/retry"
)

// Defaults of AggregatorOptions.
const (
	DefaultFlushInterval = 5 * time.Second
	DefaultMaxPending    = 100_000
)

// AggregatorOptions configures an Aggregator. Store and Config are required;
// the zero value of every other field selects the documented default.
type AggregatorOptions struct {
	// Store receives the pending rows at each flush.
	Store Store
	// Amounts, when set, receives the pending amount rows at each flush,
	// after Store: the amounts of decisions on requests with an amount.
	Amounts AmountStore
	// Merchants, when set, receives the pending merchant rows after
	// Amounts: the admissions and refusals per key, minute and merchant,
	// TopMerchants per key and minute and the rest under Other. A minute's
	// merchant rows are written once the minute has ended (Drain writes
	// them all), so that each instance writes at most TopMerchants+1 rows
	// per key and minute.
	Merchants MerchantStore
	// Config returns the limits snapshot in force (nil before the first
	// one): it decides which keys are counted under their own name, and the
	// rule recorded with them. (*ratelimit.Limiter).Config fits.
	Config func() *ratelimit.Config
	// FlushInterval is how often Run flushes. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// MaxPending caps the rows (minute × key) held in memory, pending or
	// being flushed. While the store fails, rows pile up to this cap; past
	// it, events for new rows are dropped, counted and logged. Events for
	// rows already held are always counted. Default DefaultMaxPending.
	MaxPending int
	// Now is the clock that puts events in minutes. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// AggregatorStats are the Aggregator's own counters, for metrics.
type AggregatorStats struct {
	Pending       int   // rows held in memory, pending or being flushed
	Flushes       int64 // successful flushes that wrote rows
	FlushFailures int64
	RowsWritten   int64
	// DroppedEvents counts decisions and releases that could not be counted
	// because MaxPending rows were already held.
	DroppedEvents int64
}

// Aggregator counts limiter decisions per minute and key in memory and
// flushes them to a Store. It implements ratelimit.Observer; its methods are
// safe for concurrent use and never block on I/O.
type Aggregator struct {
	opts AggregatorOptions
	log  *slog.Logger

	mu      sync.Mutex
	pending map[slot]*entry
	amounts map[amountSlot]*AmountCounts
	// merchants counts the merchants of each key and minute, at most
	// MaxMerchantsTracked apart.
	merchants map[slot]map[string]*MerchantCounts
	inflight  int   // rows taken by a flush that has not finished
	dropped   int64 // events dropped since the last flush logged them

	flushMu sync.Mutex // one flush at a time
	view    atomic.Pointer[keyView]

	flushes, failures, written, droppedTotal atomic.Int64
}

// slot is one minute (Unix seconds of its start) of one counted key.
type slot struct {
	minute int64
	key    ratelimit.Key
}

type entry struct {
	rule string
	c    Counts
}

// NewAggregator returns an Aggregator; call Run to flush periodically and
// Drain at shutdown.
func NewAggregator(opts AggregatorOptions) (*Aggregator, error) {
	if opts.Store == nil || opts.Config == nil {
		return nil, errors.New("stats: nil store or config func")
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Aggregator{opts: opts, log: opts.Logger, pending: map[slot]*entry{}, amounts: map[amountSlot]*AmountCounts{},
		merchants: map[slot]map[string]*MerchantCounts{}}, nil
}

var _ ratelimit.Observer = (*Aggregator)(nil)

// Decided implements ratelimit.Observer: it counts one decision.
func (a *Aggregator) Decided(d ratelimit.Decision, _ time.Duration) {
	if d.Conflict || d.Unknown {
		// Neither is a refusal by a full window: a conflict is a retry
		// with another amount (409), an unknown outcome a dependency that
		// did not answer (503).
		return
	}
	c := Counts{Attempts: 1}
	switch {
	case d.Shadow:
		c.Admitted, c.ShadowLimited = 1, 1
	case d.Allowed:
		c.Admitted = 1
	default:
		c.Limited = 1
		if d.Source == ratelimit.SourceNearCache {
			c.NearCacheRefusals = 1
		}
	}
	if d.Allowed && d.Degraded() {
		c.Degraded = 1
	}
	if d.Limit > 0 {
		c.PeakUtilization = float64(d.Count) / float64(d.Limit)
	}
	a.add(d.Key, c)
	if a.opts.Merchants != nil {
		mc := MerchantCounts{Admitted: c.Admitted, Refused: c.Limited}
		a.addMerchant(d.Key, merchantLabel(d), mc)
	}
	// A duplicate admission (the requestId already held its slot: a
	// concurrent or retried duplicate) moved no new money.
	if d.RequestAmount > 0 && a.opts.Amounts != nil && !(d.Allowed && d.Duplicate) {
		ac := AmountCounts{Admitted: 1, AdmittedAmount: d.RequestAmount}
		if !d.Allowed {
			ac = AmountCounts{Refused: 1, RefusedAmount: d.RequestAmount}
		}
		a.addAmount(d.Key.Channel, d.Currency, ac)
	}
}

// addAmount counts ac under its minute, channel (Other when the limits
// document names no key on it) and currency.
func (a *Aggregator) addAmount(channel, currency string, ac AmountCounts) {
	if !a.keys().channels[channel] {
		channel = Other
	}
	s := amountSlot{minute: minuteOf(a.opts.Now()), channel: channel, currency: currencyLabel(currency)}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.amounts[s]
	if c == nil {
		if a.heldLocked() >= a.opts.MaxPending {
			a.dropped++
			a.droppedTotal.Add(1)
			return
		}
		c = &AmountCounts{}
		a.amounts[s] = c
	}
	c.Add(ac)
}

// addMerchant counts mc under its minute, counted key and merchant.
func (a *Aggregator) addMerchant(k ratelimit.Key, merchant string, mc MerchantCounts) {
	key, _ := a.keys().resolve(k)
	s := slot{minute: minuteOf(a.opts.Now()), key: key}
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.merchants[s]
	if m == nil {
		if a.heldLocked() >= a.opts.MaxPending {
			a.dropped++
			a.droppedTotal.Add(1)
			return
		}
		m = map[string]*MerchantCounts{}
		a.merchants[s] = m
	}
	addMerchant(m, merchant, mc, MaxMerchantsTracked)
}

// heldLocked is how many rows (minute × key, or × channel and currency)
// are held, pending or being flushed; a.mu must be held.
func (a *Aggregator) heldLocked() int {
	return len(a.pending) + len(a.amounts) + len(a.merchants) + a.inflight
}

// Released implements ratelimit.Observer: it counts one released slot.
func (a *Aggregator) Released(k ratelimit.Key) { a.add(k, Counts{Released: 1}) }

// StoreFailed implements ratelimit.Observer. Store failures are metrics'
// business; the decision that follows is counted by Decided.
func (a *Aggregator) StoreFailed(ratelimit.Key, error) {}

func (a *Aggregator) add(k ratelimit.Key, c Counts) {
	key, rule := a.keys().resolve(k)
	s := slot{minute: minuteOf(a.opts.Now()), key: key}
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.pending[s]
	if e == nil {
		if a.heldLocked() >= a.opts.MaxPending {
			a.dropped += c.Events()
			a.droppedTotal.Add(c.Events())
			return
		}
		e = &entry{}
		a.pending[s] = e
	}
	e.rule = rule
	e.c.Add(c)
}

// minuteOf returns the Unix seconds of the start of t's minute.
func minuteOf(t time.Time) int64 {
	sec := t.Unix()
	return sec - mod(sec, 60)
}

// mod is the remainder of a/b rounded toward minus infinity, in [0, b).
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// keyView maps observed keys to counted keys for one limits snapshot, with
// the rule in force of each until the snapshot's next schedule boundary.
type keyView struct {
	cfg      *ratelimit.Config
	rules    map[ratelimit.Key]string
	channels map[string]bool
	// until is the first schedule boundary after the view was built (zero
	// when none is ahead): from then on, some key's rule in force differs.
	until time.Time
}

// keys returns the view of the snapshot in force, building it once per
// snapshot (snapshots change only when ops edit the limits) and again at
// each schedule boundary. Keys only schedules name are counted under
// their own name too.
func (a *Aggregator) keys() *keyView {
	cfg := a.opts.Config()
	now := a.opts.Now()
	if v := a.view.Load(); v != nil && v.cfg == cfg && (v.until.IsZero() || now.Before(v.until)) {
		return v
	}
	v := &keyView{cfg: cfg, rules: map[ratelimit.Key]string{}, channels: map[string]bool{}}
	if cfg != nil {
		add := func(k ratelimit.Key) {
			v.rules[k] = configcenter.DescribeRule(cfg.RuleAt(k, now), true)
			v.channels[k.Channel] = true
			if next := cfg.NextChange(k, now); !next.IsZero() && (v.until.IsZero() || next.Before(v.until)) {
				v.until = next
			}
		}
		for k := range cfg.Rules {
			add(k)
		}
		for _, s := range cfg.Schedules {
			if _, ok := v.rules[s.Key]; !ok {
				add(s.Key)
			}
		}
	}
	a.view.Store(v)
	return v
}

func (v *keyView) resolve(k ratelimit.Key) (ratelimit.Key, string) {
	if rule, ok := v.rules[k]; ok {
		return k, rule
	}
	ch := Other
	if v.channels[k.Channel] {
		ch = k.Channel
	}
	if k.IsResolve() && ch != Other {
		// The resolver's own queries and closes, named as such rather than
		// added to other bizTypes' payments.
		return ratelimit.ResolveKey(ch), UnlimitedRule
	}
	return ratelimit.Key{BizType: Other, Channel: ch}, UnlimitedRule
}

// Pending returns a copy of the rows not yet flushed, sorted by minute and
// key. It is for tests and diagnostics.
func (a *Aggregator) Pending() []Row {
	a.mu.Lock()
	defer a.mu.Unlock()
	return rowsOf(a.pending)
}

func rowsOf(m map[slot]*entry) []Row {
	rows := make([]Row, 0, len(m))
	for s, e := range m {
		rows = append(rows, Row{Minute: time.Unix(s.minute, 0).UTC(), Key: s.key, Rule: e.rule, Counts: e.c})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if !a.Minute.Equal(b.Minute) {
			return a.Minute.Before(b.Minute)
		}
		if a.Key.BizType != b.Key.BizType {
			return a.Key.BizType < b.Key.BizType
		}
		return a.Key.Channel < b.Key.Channel
	})
	return rows
}

// Flush hands every pending row to the Store, sorted by minute and key (a
// stable lock order for the database), then every pending amount row to
// the AmountStore. If a store fails, its rows (and the amount rows not
// written yet) go back into the pending set, added to whatever arrived
// meanwhile, and are retried by the next flush: nothing is lost while the
// cap holds. Flushes run one at a time.
func (a *Aggregator) Flush(ctx context.Context) error { return a.flush(ctx, false) }

// flush is Flush; with all, it also writes the merchant rows of the
// minute in progress.
func (a *Aggregator) flush(ctx context.Context, all bool) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	batch, amounts := a.pending, a.amounts
	a.pending = make(map[slot]*entry, len(batch))
	a.amounts = make(map[amountSlot]*AmountCounts, len(amounts))
	merchants := a.takeMerchantsLocked(all)
	a.inflight = len(batch) + len(amounts) + len(merchants)
	dropped := a.dropped
	a.dropped = 0
	a.mu.Unlock()
	if dropped > 0 {
		a.log.Error("stats buffer full: limiter events were not counted", "droppedEvents", dropped, "maxPending", a.opts.MaxPending)
	}
	var rows []Row
	var err error
	if len(batch) > 0 {
		rows = rowsOf(batch)
		err = a.opts.Store.Add(ctx, rows)
	}
	if err == nil {
		batch = nil // written: nothing of it goes back
	}
	var amountRows []AmountRow
	if err == nil && len(amounts) > 0 {
		amountRows = amountRowsOf(amounts)
		if err = a.opts.Amounts.AddAmounts(ctx, amountRows); err == nil {
			amounts = nil
		}
	} else if err == nil {
		amounts = nil
	}
	var merchantRows []MerchantRow
	if err == nil && len(merchants) > 0 {
		merchantRows = merchantRowsOf(merchants)
		if err = a.opts.Merchants.AddMerchants(ctx, merchantRows); err == nil {
			merchants = nil
		}
	}
	a.mu.Lock()
	a.inflight = 0
	for s, m := range merchants { // not written: back for the next flush
		cur := a.merchants[s]
		if cur == nil {
			a.merchants[s] = m
			continue
		}
		for id, c := range m {
			addMerchant(cur, id, *c, MaxMerchantsTracked)
		}
	}
	if err != nil {
		if rows != nil {
			for s, e := range batch {
				if cur := a.pending[s]; cur != nil {
					cur.c.Add(e.c) // cur.rule is newer; keep it
				} else {
					a.pending[s] = e
				}
			}
		}
		for s, c := range amounts {
			if cur := a.amounts[s]; cur != nil {
				cur.Add(*c)
			} else {
				a.amounts[s] = c
			}
		}
	}
	held := len(a.pending) + len(a.amounts) + len(a.merchants)
	a.mu.Unlock()
	if err != nil {
		a.failures.Add(1)
		a.log.Warn("stats flush failed; counts kept for the next flush", "rows", len(rows), "amountRows", len(amountRows),
			"merchantRows", len(merchantRows), "pendingRows", held, "err", err)
		return fmt.Errorf("stats: flush %d rows: %w", len(rows)+len(amountRows)+len(merchantRows), err)
	}
	if n := len(rows) + len(amountRows) + len(merchantRows); n > 0 {
		a.flushes.Add(1)
		a.written.Add(int64(n))
		a.log.Debug("stats flushed", "rows", len(rows), "amountRows", len(amountRows), "merchantRows", len(merchantRows))
	}
	return nil
}

// amountRowsOf returns the amount rows of m, sorted by minute, channel and
// currency.
func amountRowsOf(m map[amountSlot]*AmountCounts) []AmountRow {
	rows := make([]AmountRow, 0, len(m))
	for s, c := range m {
		rows = append(rows, AmountRow{Minute: time.Unix(s.minute, 0).UTC(), Channel: s.channel, Currency: s.currency, AmountCounts: *c})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if !a.Minute.Equal(b.Minute) {
			return a.Minute.Before(b.Minute)
		}
		if a.Channel != b.Channel {
			return a.Channel < b.Channel
		}
		return a.Currency < b.Currency
	})
	return rows
}

// MerchantsInProgress returns the merchant counts this instance holds and
// has not written yet (the minute in progress, and minutes a failed write
// gave back) that q selects (its range, bizType, channel and keys), each
// minute as a bucket of q's granularity: what a merchant report adds to
// the stored rows so that it includes every count this instance has seen,
// as Report does after its flush. Other instances' minutes in progress
// appear once they have ended and been written.
func (a *Aggregator) MerchantsInProgress(q Query) []MerchantBucket {
	step := int64(q.Granularity.Duration() / time.Second)
	if step <= 0 {
		return nil
	}
	keys := map[ratelimit.Key]bool{}
	for _, k := range q.Keys {
		keys[k] = true
	}
	from, to := q.From.Unix(), q.To.Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []MerchantBucket
	for s, m := range a.merchants {
		if s.minute < from || s.minute >= to || (q.BizType != "" && s.key.BizType != q.BizType) ||
			(q.Channel != "" && s.key.Channel != q.Channel) || (len(keys) > 0 && !keys[s.key]) {
			continue
		}
		start := time.Unix(s.minute-mod(s.minute, step), 0).UTC()
		for merchant, c := range m {
			out = append(out, MerchantBucket{Start: start, Key: s.key, Merchant: merchant, MerchantCounts: *c})
		}
	}
	return out
}

// takeMerchantsLocked removes and returns the merchant counts of the
// minutes that have ended, or of every minute with all; a.mu must be held.
func (a *Aggregator) takeMerchantsLocked(all bool) map[slot]map[string]*MerchantCounts {
	current := minuteOf(a.opts.Now())
	out := map[slot]map[string]*MerchantCounts{}
	for s, m := range a.merchants {
		if all || s.minute < current {
			out[s] = m
			delete(a.merchants, s)
		}
	}
	return out
}

// merchantRowsOf returns the rows of m, TopMerchants per key and minute
// and the rest under Other, sorted by minute, key and merchant.
func merchantRowsOf(m map[slot]map[string]*MerchantCounts) []MerchantRow {
	var rows []MerchantRow
	for s, ms := range m {
		for _, mc := range topMerchants(ms, TopMerchants) {
			rows = append(rows, MerchantRow{Minute: time.Unix(s.minute, 0).UTC(), Key: s.key, Merchant: mc.Merchant, MerchantCounts: mc.MerchantCounts})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if !a.Minute.Equal(b.Minute) {
			return a.Minute.Before(b.Minute)
		}
		if a.Key != b.Key {
			return a.Key.String() < b.Key.String()
		}
		return a.Merchant < b.Merchant
	})
	return rows
}

// Run flushes every FlushInterval until ctx ends. It does not flush at the
// end: call Drain once nothing observes decisions any more.
func (a *Aggregator) Run(ctx context.Context) {
	retry.Every(ctx, a.opts.FlushInterval, max(a.opts.FlushInterval, 10*time.Second), func(ctx context.Context) {
		_ = a.Flush(ctx) // logged and retried by the next tick
	})
}

// Drain flushes until nothing is pending, retrying failed flushes with
// backoff until ctx ends. If ctx ends first, it logs at error level exactly
// what is lost and returns the last error.
func (a *Aggregator) Drain(ctx context.Context) error {
	wait := 50 * time.Millisecond
	for {
		err := a.flush(ctx, true)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			var lost Counts
			rows := a.Pending()
			for _, r := range rows {
				lost.Add(r.Counts)
			}
			a.log.Error("stats not flushed at shutdown; these counts are lost", "rows", len(rows),
				"attempts", lost.Attempts, "admitted", lost.Admitted, "limited", lost.Limited, "released", lost.Released, "err", err)
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Stats returns the Aggregator's own counters.
func (a *Aggregator) Stats() AggregatorStats {
	a.mu.Lock()
	pending := a.heldLocked()
	a.mu.Unlock()
	return AggregatorStats{
		Pending: pending, Flushes: a.flushes.Load(), FlushFailures: a.failures.Load(),
		RowsWritten: a.written.Load(), DroppedEvents: a.droppedTotal.Load(),
	}
}
