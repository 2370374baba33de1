package pay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/ratelimit"
	"payserver/internal/ratelog"
	"payserver/internal/retry"
)

// ResolveStore is what the Resolver needs of the order store.
// internal/repo implements it.
type ResolveStore interface {
	// Unresolved returns up to limit UNKNOWN orders due for an attempt at
	// now and not leased, the most overdue first.
	Unresolved(ctx context.Context, now time.Time, limit int) ([]Unresolved, error)
	// Lease takes u's order (still UNKNOWN, due at now, its lease expired)
	// for owner until until, and sets u's attempts and close step to what
	// is stored then; false when another instance holds it, it is not due
	// or no longer UNKNOWN.
	Lease(ctx context.Context, u *Unresolved, owner string, now, until time.Time) (bool, error)
	// Reschedule gives up owner's lease of an UNKNOWN order and sets its
	// next attempt, counting one more when asked (the channel was asked;
	// not when the RESOLVE key refused the call). closeNext records that
	// the channel answered NOT_FOUND and the close is still to be made.
	Reschedule(ctx context.Context, requestID, owner string, next time.Time, asked, closeNext bool) error
	// Resolve ends an UNKNOWN or PROCESSING order with o's outcome and
	// o.ResolvedBy, o.ResolvedAt, if it is still on o.Channel (a routed
	// payment moved on since it was read is not that channel's to end);
	// ErrOrderNotFound when it already ended or moved.
	Resolve(ctx context.Context, o *Order) error
	// GetByOrderNo returns the order with orderNo, or ErrOrderNotFound.
	GetByOrderNo(ctx context.Context, orderNo string) (*Order, error)
	// UnresolvedStats returns how many orders are UNKNOWN, and the last
	// update of the oldest of them (zero when none).
	UnresolvedStats(ctx context.Context) (int64, time.Time, error)
	// RecordDiscrepancy records d on the order with orderNo unless one is
	// recorded already (the first word is kept); recorded says whether d
	// was.
	RecordDiscrepancy(ctx context.Context, orderNo string, d Discrepancy) (recorded bool, err error)
}

// Unresolved is an UNKNOWN order, how many attempts to resolve it were
// made, and whether its next attempt closes it at once (its channel
// answered NOT_FOUND and the close was refused by the RESOLVE key: asking
// again first would let every admitted query take the slots the closes
// need, and no order would ever end).
type Unresolved struct {
	Order     *Order
	Attempts  int
	CloseNext bool
}

// ResolveObserver is told what the Resolver did, for metrics. It must not
// block.
type ResolveObserver interface {
	// Resolved counts an order ended by query, notify or close.
	Resolved(channel, by string, to State)
	// Queried counts one call to a channel: op query or close, result an
	// outcome (SUCCEEDED, DECLINED, PROCESSING, NOT_FOUND, CLOSED), or
	// LIMITED (the RESOLVE key refused it) or ERROR.
	Queried(channel, op, result string)
	// Unresolved reports the UNKNOWN orders and the age of the oldest.
	Unresolved(count int64, oldest time.Duration)
	// Discrepancy counts one word of channel that contradicted a final
	// order (Order.Discrepancy).
	Discrepancy(channel string)
}

type nopResolveObserver struct{}

func (nopResolveObserver) Resolved(string, string, State)  {}
func (nopResolveObserver) Queried(string, string, string)  {}
func (nopResolveObserver) Unresolved(int64, time.Duration) {}
func (nopResolveObserver) Discrepancy(string)              {}

// MaxOwnerLen is the longest owner name a lease records.
const MaxOwnerLen = 128

// ResolverOptions tunes a Resolver. Zero values select the defaults.
type ResolverOptions struct {
	// Owner names this instance in leases. Required.
	Owner string
	// Backoff is the wait after an order's first unanswered attempt; it
	// doubles with each attempt up to MaxBackoff. Defaults 1s and 1m.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Lease is how long one instance holds an order it is resolving: past
	// it (the instance died) another takes it. Default 30s + 2 CallTimeout,
	// longer than one attempt (a query and a close, two limiter checks, a
	// store write). Instances' clocks must agree to well within it.
	Lease time.Duration
	// CallTimeout bounds one query or close. Default 5s.
	CallTimeout time.Duration
	// Interval is how often the store is asked for due orders. Default 1s.
	Interval time.Duration
	// Workers resolve orders at once, at most; Batch orders are read per
	// round. Defaults 4 and 32.
	Workers int
	Batch   int
	// StatsEvery is how often the unresolved gauge is read. Default 15s.
	StatsEvery time.Duration
	Observer   ResolveObserver
	Logger     *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Ledger settles the slot of each order the resolver ends, and keeps
	// it when the limiter cannot give it back now. Default: a ledger in
	// memory over limiter, never run.
	Ledger *Ledger
	// Rules returns a channel's own rules for its unknown outcomes; nil,
	// or a zero field, keeps the Resolver's: a first query at once,
	// queries every Backoff.
	Rules func(channel string) UnknownRules
}

// UnknownRules are one channel's own timing for resolving its unknown
// outcomes, measured from the order's creation.
type UnknownRules struct {
	// QueryAfter is the earliest first query.
	QueryAfter time.Duration
	// QueryEvery is the wait after an unanswered query, doubling with each
	// attempt up to the Resolver's MaxBackoff; 0 is the Resolver's Backoff.
	QueryEvery time.Duration
	// CloseAfter is the earliest close (plus CallTimeout, the latest its
	// pay can have reached the channel): a close due sooner waits for it.
	CloseAfter time.Duration
}

// Resolver resolves UNKNOWN orders with their channels: it queries the
// channel with backoff and ends the order SUCCEEDED or FAILED as the
// channel says; when the channel has no such order (which is not proof
// that it was never sent), it closes the order at the channel and ends it
// NOT_SENT only when the close proves it was never processed. Every query
// and close is checked by the limiter on the channel's RESOLVE key first,
// so resolving cannot itself exceed the channel's quota. Orders are
// leased, so two instances never query one order at once. The slot of a
// resolved order meets the fate of any ended payment: kept when SUCCEEDED,
// its amount given back when FAILED, released when NOT_SENT.
type Resolver struct {
	store    ResolveStore
	limiter  Limiter
	channels Channels
	opts     ResolverOptions
	log      *slog.Logger
	obs      ResolveObserver
}

// NewResolver returns a Resolver; Run runs it.
func NewResolver(store ResolveStore, limiter Limiter, channels Channels, opts ResolverOptions) (*Resolver, error) {
	if store == nil || limiter == nil || channels == nil {
		return nil, errors.New("pay: nil resolver dependency")
	}
	if opts.Owner == "" || len(opts.Owner) > MaxOwnerLen {
		return nil, fmt.Errorf("pay: the resolver needs an owner name of 1 to %d bytes", MaxOwnerLen)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.Backoff, time.Second)
	def(&opts.MaxBackoff, time.Minute)
	def(&opts.CallTimeout, 5*time.Second)
	// An attempt is at most two limiter checks and a store write of 5s
	// each, a query and a close: the lease outlasts it.
	def(&opts.Lease, 30*time.Second+2*opts.CallTimeout)
	def(&opts.Interval, time.Second)
	def(&opts.StatsEvery, 15*time.Second)
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Batch <= 0 {
		opts.Batch = 32
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = nopResolveObserver{}
	}
	if opts.Rules == nil {
		opts.Rules = func(string) UnknownRules { return UnknownRules{} }
	}
	if opts.Ledger == nil {
		var err error
		if opts.Ledger, err = NewLedger(nil, limiter, LedgerOptions{Now: opts.Now, Logger: opts.Logger}); err != nil {
			return nil, err
		}
	}
	return &Resolver{store: store, limiter: limiter, channels: channels, opts: opts, log: opts.Logger, obs: opts.Observer}, nil
}

// Run resolves due orders until ctx ends, then waits for the attempts in
// flight (each bounded by CallTimeout).
func (r *Resolver) Run(ctx context.Context) {
	work := make(chan Unresolved)
	wait := startWorkers(r.opts.Workers, func() {
		for u := range work {
			r.attempt(ctx, u)
		}
	})
	defer func() {
		close(work)
		wait()
	}()
	var lastStats time.Time
	readLog := ratelog.New(time.Minute, 1) // a failing store fails every round
	for {
		now := r.opts.Now()
		if now.Sub(lastStats) >= r.opts.StatsEvery {
			lastStats = now
			r.stats(ctx)
		}
		due, err := r.due(ctx, now)
		if err != nil && ctx.Err() == nil {
			if ok, suppressed := readLog.Allow(); ok {
				r.log.Warn("could not read the orders to resolve", "err", err, "suppressed", suppressed)
			}
		}
		for _, u := range due {
			select {
			case work <- u:
			case <-ctx.Done():
				return
			}
		}
		// A full batch may mean more are due: look again soon, but never
		// spin (orders another instance holds stay due until it is done).
		pause := r.opts.Interval
		if len(due) == r.opts.Batch {
			pause = min(pause, 100*time.Millisecond)
		}
		if !retry.Sleep(ctx, pause) {
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (r *Resolver) due(ctx context.Context, now time.Time) ([]Unresolved, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.store.Unresolved(qctx, now, r.opts.Batch)
}

func (r *Resolver) stats(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	n, oldest, err := r.store.UnresolvedStats(sctx)
	cancel()
	if err != nil {
		return
	}
	var age time.Duration
	if n > 0 && !oldest.IsZero() {
		age = max(r.opts.Now().Sub(oldest), 0)
	}
	r.obs.Unresolved(n, age)
}

// ResolveOnce resolves the orders due now, one round, and returns when
// their attempts are done: for tests and tools.
func (r *Resolver) ResolveOnce(ctx context.Context) error {
	due, err := r.due(ctx, r.opts.Now())
	if err != nil {
		return err
	}
	for _, u := range due {
		r.attempt(ctx, u)
	}
	return nil
}

// backoff is the wait after attempt n (1 the first) on channel.
func (r *Resolver) backoff(channel string, n int) time.Duration {
	d := r.opts.Backoff
	if every := r.opts.Rules(channel).QueryEvery; every > 0 {
		d = every
	}
	for i := 1; i < n && d < r.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.opts.MaxBackoff)
}

// attempt leases u's order and asks its channel once (a query, and a
// close when the channel has no such order).
func (r *Resolver) attempt(ctx context.Context, u Unresolved) {
	o := u.Order
	now := r.opts.Now()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ok, err := r.store.Lease(lctx, &u, r.opts.Owner, now, now.Add(r.opts.Lease))
	cancel()
	if err != nil && ctx.Err() == nil {
		r.log.Warn("could not lease an unknown outcome to resolve it; next round", "requestId", o.RequestID, "err", err)
	}
	if err != nil || !ok {
		return // another instance has it, it ended or is not due, or the store failed: next round
	}
	next, why, st := r.ask(ctx, o, u.Attempts+1, u.CloseNext)
	if next == 0 {
		return
	}
	r.log.Debug("an unknown outcome is not resolved yet", "requestId", o.RequestID, "orderNo", o.OrderNo,
		"channel", o.Channel, "attempt", u.Attempts+1, "why", why, "next", next)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.store.Reschedule(sctx, o.RequestID, r.opts.Owner, r.opts.Now().Add(next), st.asked, st.closeNext); err != nil {
		r.log.Warn("could not reschedule an unknown outcome; its lease expires instead", "requestId", o.RequestID, "err", err)
	}
}

// step is what an unfinished attempt leaves for the next one.
type step struct {
	// asked: the channel was asked (the attempt counts, for backoff).
	asked bool
	// closeNext: the channel answered NOT_FOUND; the next attempt closes.
	closeNext bool
}

// ask runs one attempt on o: a query, then a close if the channel has no
// such order, or the close alone when an earlier query found nothing. It
// returns the wait before the next attempt, zero when o ended (here or
// elsewhere), why it did not end, and what it leaves for the next.
func (r *Resolver) ask(ctx context.Context, o *Order, attempt int, closeNext bool) (time.Duration, string, step) {
	ch, ok := r.channels.Get(o.Channel)
	look, canAsk := ch.(channel.Lookup)
	if !ok || !canAsk {
		return r.opts.MaxBackoff, "the channel is not configured, or cannot be queried", step{}
	}
	req := channelRequest(o)
	if closeNext {
		return r.close(ctx, look, o, req, attempt)
	}
	if wait := o.CreatedAt.Add(r.opts.Rules(o.Channel).QueryAfter).Sub(r.opts.Now()); attempt == 1 && wait > 0 {
		return wait, "the channel's queryAfter has not passed", step{}
	}
	if wait, admitted := r.admit(ctx, o, "q"+strconv.Itoa(attempt)); !admitted {
		r.obs.Queried(o.Channel, "query", "LIMITED")
		return wait, whyLimited, step{}
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CallTimeout)
	res, err := look.Query(qctx, req)
	cancel()
	asked := step{asked: true}
	switch {
	case errors.Is(err, channel.ErrNotFound):
		r.obs.Queried(o.Channel, "query", "NOT_FOUND")
		return r.close(ctx, look, o, req, attempt)
	case err != nil:
		r.obs.Queried(o.Channel, "query", "ERROR")
		return r.backoff(o.Channel, attempt), "query failed: " + err.Error(), asked
	case res.Status == channel.Processing:
		r.obs.Queried(o.Channel, "query", string(channel.Processing))
		return r.backoff(o.Channel, attempt), "the channel is still processing it", asked
	}
	r.obs.Queried(o.Channel, "query", outcomeName(res.Status))
	next, why := r.end(ctx, o, res, ResolvedByQuery)
	return next, why, asked
}

// closeWait is how long until o may be closed at its channel: CloseAfter
// from its creation, plus CallTimeout, since its pay may have reached the
// channel (whose clock starts then) that much later.
func (r *Resolver) closeWait(o *Order) time.Duration {
	after := r.opts.Rules(o.Channel).CloseAfter
	if after <= 0 {
		return 0
	}
	return o.CreatedAt.Add(after + r.opts.CallTimeout).Sub(r.opts.Now())
}

// whyLimited is why an attempt did not ask the channel: the RESOLVE key
// refused the call. It does not count as an attempt (no backoff).
const whyLimited = "the RESOLVE key is at its limit"

// close closes o at its channel after a query found nothing: the close
// either proves the payment was never processed (NOT_SENT) or gives its
// outcome.
func (r *Resolver) close(ctx context.Context, look channel.Lookup, o *Order, req channel.Request, attempt int) (time.Duration, string, step) {
	closing := step{asked: true, closeNext: true}
	if wait := r.closeWait(o); wait > 0 {
		return wait, "the channel's closeAfter has not passed", closing
	}
	if wait, admitted := r.admit(ctx, o, "c"+strconv.Itoa(attempt)); !admitted {
		r.obs.Queried(o.Channel, "close", "LIMITED")
		return wait, whyLimited, step{closeNext: true}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CallTimeout)
	cr, err := look.Close(cctx, req)
	cancel()
	if err != nil {
		r.obs.Queried(o.Channel, "close", "ERROR")
		return r.backoff(o.Channel, attempt), "close failed: " + err.Error(), closing
	}
	r.obs.Queried(o.Channel, "close", "CLOSED")
	if !cr.Processed {
		o.Status, o.FailureCode = StatusFailed, FailureNotSent
		o.FailureMessage = "the channel confirmed it never processed the payment (closed); nothing was charged"
		o.ChannelTradeNo = ""
		next, why := r.finish(ctx, o, ResolvedByClose)
		return next, why, closing
	}
	next, why := r.end(ctx, o, cr.Result, ResolvedByClose)
	return next, why, closing
}

// end records a channel's final answer (SUCCEEDED or DECLINED) about o.
func (r *Resolver) end(ctx context.Context, o *Order, res channel.Result, by string) (time.Duration, string) {
	if !applyFinal(o, res) {
		return r.opts.MaxBackoff, fmt.Sprintf("the channel answered status %q", res.Status)
	}
	return r.finish(ctx, o, by)
}

// applyFinal sets o's outcome from a channel's final answer; false when
// the answer is not final.
func applyFinal(o *Order, res channel.Result) bool {
	switch res.Status {
	case channel.Succeeded:
		o.Status, o.ChannelTradeNo, o.FailureCode, o.FailureMessage = StatusSucceeded, res.TradeNo, "", ""
	case channel.Declined:
		o.Status, o.ChannelTradeNo, o.FailureCode, o.FailureMessage = StatusFailed, res.TradeNo, res.DeclineCode, res.DeclineReason
		if o.FailureCode == "" {
			o.FailureCode = "DECLINED"
		}
	default:
		return false
	}
	return true
}

// finish stores o's resolution and settles its slot.
func (r *Resolver) finish(ctx context.Context, o *Order, by string) (time.Duration, string) {
	now := r.opts.Now().UTC()
	o.ResolvedBy, o.ResolvedAt, o.UpdatedAt = by, now, now
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	err := r.store.Resolve(fctx, o)
	cancel()
	switch {
	case errors.Is(err, ErrOrderNotFound):
		return 0, "" // ended elsewhere (a notification, its own request), which settled its slot
	case err != nil:
		return r.opts.Backoff, "the resolution could not be stored: " + err.Error()
	}
	r.opts.Ledger.Settle(ctx, holdFor(ratelimit.Key{BizType: o.BizType, Channel: o.Channel}, o), nil, o)
	r.obs.Resolved(o.Channel, by, StateOf(o))
	r.log.Info("an unknown outcome was resolved", "requestId", o.RequestID, "orderNo", o.OrderNo,
		"channel", o.Channel, "by", by, "status", string(o.Status), "failureCode", o.FailureCode)
	return 0, ""
}

// admit checks one query or close of o on its channel's RESOLVE key. A
// refusal, or a limiter that cannot answer, returns the wait before the
// next attempt.
func (r *Resolver) admit(ctx context.Context, o *Order, call string) (time.Duration, bool) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	d, err := r.limiter.Check(actx, ratelimit.Request{
		Caller: LimiterCaller,
		Key:    ratelimit.Key{BizType: ratelimit.ResolveBizType, Channel: o.Channel},
		Member: "#resolve:" + o.OrderNo + ":" + call,
	})
	cancel()
	switch {
	case err != nil:
		return r.opts.Backoff, false
	case !d.Allowed:
		return max(d.RetryAfter, 100*time.Millisecond), false
	}
	return 0, true
}

func outcomeName(s channel.Status) string {
	if s == channel.Declined {
		return "DECLINED"
	}
	return string(s)
}

// Notification is a channel's asynchronous word on one order.
type Notification struct {
	Channel string
	OrderNo string
	Result  channel.Result
}

// Notify ends the order a channel's notification names, as a query
// answering the same would: idempotent and safe out of order (a final
// order never changes). A final word that contradicts a final order, or
// comes from a channel the routed payment left, is a discrepancy
// (discrepancy): recorded on the order, logged, counted, and taken (the
// channel stops repeating it). It returns NOT_FOUND (apperr) for an order
// this payserver does not have on that channel, and INVALID_REQUEST for a
// notification that is not final.
func (r *Resolver) Notify(ctx context.Context, n Notification) (*Order, error) {
	if n.Result.Status != channel.Succeeded && n.Result.Status != channel.Declined {
		return nil, apperr.New(apperr.InvalidRequest, "a notification must be SUCCEEDED or DECLINED, not %s", n.Result.Status).
			WithDetails(map[string]any{"field": "outcome"})
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	o, err := r.store.GetByOrderNo(gctx, n.OrderNo)
	cancel()
	switch {
	case errors.Is(err, ErrOrderNotFound), err == nil && o.Channel != n.Channel && !routedFrom(o, n.Channel):
		return nil, apperr.New(apperr.OrderNotFound, "no order %s on channel %s", n.OrderNo, n.Channel)
	case err != nil:
		return nil, apperr.Wrap(err, apperr.DependencyUnavailable, "the order could not be read").
			WithDetails(map[string]any{"dependency": "database"})
	case o.Channel != n.Channel:
		// The payment left that channel because its call provably never
		// reached it; a final word from it says otherwise.
		return o, r.discrepancy(ctx, o, n)
	}
	if s := StateOf(o); s != StateProcessing && s != StateUnknown {
		if contradicts(o, n.Result) {
			return o, r.discrepancy(ctx, o, n)
		}
		return o, nil // already final: a notification never changes it
	}
	applyFinal(o, n.Result)
	if _, why := r.finish(ctx, o, ResolvedByNotify); why != "" {
		return nil, apperr.New(apperr.DependencyUnavailable, "%s", why).WithDetails(map[string]any{"dependency": "database"})
	}
	return o, nil
}

// contradicts reports whether a channel's final word res about the final
// order o says otherwise than o: paid where o is not SUCCEEDED, declined
// where o is not FAILED (a NOT_SENT order was never sent, so no channel
// can have declined it).
func contradicts(o *Order, res channel.Result) bool {
	switch res.Status {
	case channel.Succeeded:
		return StateOf(o) != StateSucceeded
	case channel.Declined:
		return StateOf(o) != StateFailed
	}
	return false
}

// discrepancy records a channel's final word n that contradicts the final
// order o, or that came from a channel o's payment was routed away from:
// the channel broke its close guarantee, or answered otherwise than it had.
// The order keeps its state, for a person to reconcile with the channel.
// When the channel says it paid, the slot on that channel counts again,
// whatever the limits say now (Request.Regardless): money moved under it
// (the slot had been released or its amount given back when the order
// ended). An error means the word was not recorded, or the slot not
// counted again: the channel is answered so, and repeats it.
func (r *Resolver) discrepancy(ctx context.Context, o *Order, n Notification) error {
	d := Discrepancy{Channel: n.Channel, Reported: outcomeName(n.Result.Status), TradeNo: n.Result.TradeNo, At: r.opts.Now().UTC()}
	r.log.Error("a channel contradicted a final order: it may have moved money payserver did not expect; reconcile with the channel",
		"requestId", o.RequestID, "orderNo", o.OrderNo, "channel", n.Channel, "orderChannel", o.Channel,
		"orderState", string(StateOf(o)), "reported", d.Reported, "tradeNo", d.TradeNo)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	recorded, err := r.store.RecordDiscrepancy(wctx, o.OrderNo, d)
	cancel()
	if err != nil {
		return apperr.Wrap(err, apperr.DependencyUnavailable, "the discrepancy could not be recorded").
			WithDetails(map[string]any{"dependency": "database"})
	}
	if recorded {
		r.obs.Discrepancy(n.Channel)
		o.Discrepancy = &d
	}
	if n.Result.Status != channel.Succeeded {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	key := ratelimit.Key{BizType: o.BizType, Channel: n.Channel}
	c, err := r.limiter.Check(cctx, ratelimit.Request{Caller: LimiterCaller, Key: key, Member: o.RequestID, Amount: o.Amount, Currency: o.Currency, Merchant: o.MerchantID, Regardless: true})
	if err != nil || c.Unknown || c.Source == ratelimit.SourceFailOpen {
		// The limiter failed, lost its answer, or admitted without a
		// record (policy allow while the store fails): the channel is
		// answered so and repeats its word, which counts the slot then.
		r.log.Warn("the slot of a payment a channel reported paid against its order could not be counted again; the channel repeats its word",
			"requestId", o.RequestID, "key", key.String(), "source", string(c.Source), "unknown", c.Unknown, "err", err)
		return apperr.New(apperr.DependencyUnavailable, "the slot of a payment the channel reported paid could not be counted again; repeat the notification").
			WithDetails(map[string]any{"dependency": "limiter"})
	}
	if !c.Allowed {
		// Held for another amount by then: nothing to count again.
		r.log.Warn("the slot of a payment a channel reported paid against its order could not be counted again: its requestId is held for another amount",
			"requestId", o.RequestID, "key", key.String())
	}
	return nil
}

// routedFrom reports whether the routed payment o skipped channel.
func routedFrom(o *Order, code string) bool {
	for _, sk := range o.RoutedFrom {
		if sk.Channel == code {
			return true
		}
	}
	return false
}
