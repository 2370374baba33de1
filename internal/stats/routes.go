package stats

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"payserver/internal/retry"
)

// RouteRow is one minute's count of one routing event of one bizType's
// route. A routed payment sent to To counts once with Reason ""; each
// candidate it skipped counts once with From, To and the reason (limited,
// closed, unhealthy); To is "" when every candidate refused the payment.
type RouteRow struct {
	Minute  time.Time
	BizType string
	From    string
	To      string
	Reason  string
	Count   int64
}

// RouteStore adds routing counts to durable rows (additive upserts) and
// reads them back. internal/repo implements it on the route_stats table.
type RouteStore interface {
	AddRoutes(ctx context.Context, rows []RouteRow) error
	// Routes returns the rows of minutes in [from, to), for bizType ("" for
	// every bizType), sorted by minute.
	Routes(ctx context.Context, from, to time.Time, bizType string) ([]RouteRow, error)
}

// RouteCounter counts routing events per minute in memory and flushes them
// to a RouteStore, as Aggregator does for limiter decisions. Its bizTypes
// and channels come from the routes of the limits document, so the rows
// are bounded by it. Its methods are safe for concurrent use; Count never
// blocks on I/O.
type RouteCounter struct {
	store RouteStore
	now   func() time.Time
	log   *slog.Logger

	mu         sync.Mutex
	pending    map[routeSlot]int64
	maxPending int   // maxRoutePending; tests lower it
	dropped    int64 // events dropped past maxPending since the last flush
	flushMu    sync.Mutex
}

type routeSlot struct {
	minute                   int64
	bizType, from, to, cause string
}

// maxRoutePending caps the rows held while the database fails; past it,
// new rows are dropped, and the next flush logs how many events.
const maxRoutePending = 100_000

// NewRouteCounter returns a RouteCounter over store; now is its clock
// (time.Now when nil).
func NewRouteCounter(store RouteStore, now func() time.Time, log *slog.Logger) (*RouteCounter, error) {
	if store == nil {
		return nil, errors.New("stats: nil route store")
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RouteCounter{store: store, now: now, log: log, pending: map[routeSlot]int64{}, maxPending: maxRoutePending}, nil
}

// Count adds one event: a payment sent to to (reason ""), or a fallback
// from from to to (to "" when every candidate refused).
func (c *RouteCounter) Count(bizType, from, to, reason string) {
	s := routeSlot{minute: minuteOf(c.now()), bizType: bizType, from: from, to: to, cause: reason}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[s]; ok || len(c.pending) < c.maxPending {
		c.pending[s]++
	} else {
		c.dropped++
	}
}

// Flush writes the pending counts; on failure they are kept for the next
// flush.
func (c *RouteCounter) Flush(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	taken, dropped := c.pending, c.dropped
	c.pending, c.dropped = map[routeSlot]int64{}, 0
	c.mu.Unlock()
	if dropped > 0 {
		c.log.Error("route stats dropped: too many rows pending while the database failed",
			"events", dropped, "maxPendingRows", c.maxPending)
	}
	if len(taken) == 0 {
		return nil
	}
	rows := make([]RouteRow, 0, len(taken))
	for s, n := range taken {
		rows = append(rows, RouteRow{Minute: time.Unix(s.minute, 0).UTC(), BizType: s.bizType, From: s.from, To: s.to, Reason: s.cause, Count: n})
	}
	// One order for every writer, so concurrent upserts lock rows alike.
	sort.Slice(rows, func(i, j int) bool { return routeLess(rows[i], rows[j]) })
	err := c.store.AddRoutes(ctx, rows)
	if err != nil {
		c.mu.Lock()
		for s, n := range taken {
			if _, ok := c.pending[s]; ok || len(c.pending) < c.maxPending {
				c.pending[s] += n
			} else {
				c.dropped += n
			}
		}
		c.mu.Unlock()
		c.log.Warn("route stats not written; kept for the next flush", "rows", len(rows), "err", err)
	}
	return err
}

func routeLess(a, b RouteRow) bool {
	switch {
	case !a.Minute.Equal(b.Minute):
		return a.Minute.Before(b.Minute)
	case a.BizType != b.BizType:
		return a.BizType < b.BizType
	case a.From != b.From:
		return a.From < b.From
	case a.To != b.To:
		return a.To < b.To
	}
	return a.Reason < b.Reason
}

// Run flushes every interval until ctx ends; Drain flushes the rest.
func (c *RouteCounter) Run(ctx context.Context, interval time.Duration) {
	retry.Every(ctx, interval, max(interval, 10*time.Second), func(ctx context.Context) { _ = c.Flush(ctx) })
}

// Drain flushes until nothing is pending or ctx ends.
func (c *RouteCounter) Drain(ctx context.Context) error {
	for {
		err := c.Flush(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RouteReport is one bizType's routing over a time range.
type RouteReport struct {
	BizType string `json:"bizType"`
	// Payments counts the routed payments sent to each channel.
	Payments map[string]int64 `json:"payments"`
	// Fallbacks counts the skipped candidates, by channel skipped, channel
	// used ("" when every candidate refused) and reason.
	Fallbacks []RouteFallback `json:"fallbacks"`
}

// RouteFallback is how often payments fell back from one channel to
// another for one reason.
type RouteFallback struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// SummarizeRoutes sums rows per bizType, sorted by bizType; fallbacks are
// sorted by from, to and reason.
func SummarizeRoutes(rows []RouteRow) []RouteReport {
	by := map[string]*RouteReport{}
	type fb struct{ biz, from, to, reason string }
	fallbacks := map[fb]int64{}
	for _, r := range rows {
		rep := by[r.BizType]
		if rep == nil {
			rep = &RouteReport{BizType: r.BizType, Payments: map[string]int64{}, Fallbacks: []RouteFallback{}}
			by[r.BizType] = rep
		}
		if r.Reason == "" {
			rep.Payments[r.To] += r.Count
			continue
		}
		fallbacks[fb{r.BizType, r.From, r.To, r.Reason}] += r.Count
	}
	for k, n := range fallbacks {
		by[k.biz].Fallbacks = append(by[k.biz].Fallbacks, RouteFallback{From: k.from, To: k.to, Reason: k.reason, Count: n})
	}
	out := make([]RouteReport, 0, len(by))
	for _, rep := range by {
		sort.Slice(rep.Fallbacks, func(i, j int) bool {
			a, b := rep.Fallbacks[i], rep.Fallbacks[j]
			return a.From < b.From || a.From == b.From && (a.To < b.To || a.To == b.To && a.Reason < b.Reason)
		})
		out = append(out, *rep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BizType < out[j].BizType })
	return out
}
