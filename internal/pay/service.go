// Package pay is payserver's payment flow: validate, then idempotency by
// requestId, then the channel limiter, then the channel call, with the order
// stored durably before and after the call.
package pay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/ratelimit"
	"payserver/internal/retry"
)

// Limiter is the channel limiter: POST /pay asks it before each channel
// call, and the limits service (internal/limitapi) serves it to other
// callers. *ratelimit.Limiter implements it, waiting (Request.MaxWait),
// refusing before the first limits document and counting per caller
// included; this is the one declaration of its methods.
type Limiter interface {
	// Check checks a payment (its requestId and amount) against every
	// window that applies to it, waiting up to its MaxWait for room.
	Check(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error)
	// Release gives back every slot of requestId: only when no channel
	// call can happen for it.
	Release(ctx context.Context, h ratelimit.Hold) error
	// ReleaseAmount gives back what requestId paid in amount windows, its
	// call still counted: for a payment the channel declined.
	ReleaseAmount(ctx context.Context, h ratelimit.Hold) error
	// Throttled tells the limiter that the channel throttled the call
	// admitted under h: the learned limits of its windows drop, and the
	// channel's retry-after (0: none given) holds them. Called before the
	// slot is released, so that the call counts among what was sent.
	Throttled(ctx context.Context, h ratelimit.Hold, retryAfter time.Duration) error
}

// LimiterCaller names the payment flow's checks to the limiter
// (ratelimit.Request.Caller): they are counted under it beside the limits
// service's clients.
const LimiterCaller = "pay"

// ThrottleObserver counts the channels' throttles. It is called on the
// request path and must not block.
type ThrottleObserver interface {
	Throttled(channel string)
}

type nopThrottleObserver struct{}

func (nopThrottleObserver) Throttled(string) {}

// Channels finds a configured channel by code. *channel.Registry implements it.
type Channels interface {
	Get(code string) (channel.Channel, bool)
}

// Options tunes a Service. Zero values select the documented defaults.
type Options struct {
	// ChannelTimeout bounds one channel call; past it the outcome is
	// UNKNOWN. Default 5s.
	ChannelTimeout time.Duration
	// ClaimTimeout bounds the claim INSERT, and again the reading back of a
	// claim whose INSERT failed. Default 5s.
	ClaimTimeout time.Duration
	// InFlightWait is how long a duplicate of a request that is still being
	// processed waits for its outcome before answering IDEMPOTENCY_CONFLICT.
	// Default ChannelTimeout + 2s.
	InFlightWait time.Duration
	// StaleAfter is the age past which a PROCESSING order is marked
	// UNKNOWN by SweepStale. Default ChannelTimeout + 1m.
	StaleAfter time.Duration
	// Ledger keeps every slot whose fate a request could not carry out
	// before it answered (ledger.go); its owner runs it. Default: a
	// ledger in memory that is never run, so such slots free themselves
	// when their windows pass.
	Ledger *Ledger
	// Routes gives the routes of payments without a channel (route.go).
	// Default none: such payments are refused (INVALID_REQUEST, channel).
	Routes RouteTable
	// Health gates and counts the channel calls of routed payments.
	// Default: every channel healthy, calls made directly.
	Health ChannelHealth
	// RouteObserver is told how routed payments were routed. Optional.
	RouteObserver RouteObserver
	Logger        *slog.Logger
	// Now is the clock for order timestamps. Default time.Now.
	Now func() time.Time
	// Throttles counts the channels' throttles. Optional.
	Throttles ThrottleObserver
}

// Service runs payments. It is safe for concurrent use.
type Service struct {
	orders   OrderStore
	limiter  Limiter
	channels Channels
	opts     Options
	log      *slog.Logger
	ledger   *Ledger
}

// NewService returns a Service. No dependency may be nil.
func NewService(orders OrderStore, limiter Limiter, channels Channels, opts Options) (*Service, error) {
	if orders == nil || limiter == nil || channels == nil {
		return nil, errors.New("pay: nil dependency")
	}
	if opts.ChannelTimeout <= 0 {
		opts.ChannelTimeout = 5 * time.Second
	}
	if opts.ClaimTimeout <= 0 {
		opts.ClaimTimeout = 5 * time.Second
	}
	if opts.InFlightWait <= 0 {
		opts.InFlightWait = opts.ChannelTimeout + 2*time.Second
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter(opts.ChannelTimeout)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	setRouteDefaults(&opts)
	ledger := opts.Ledger
	if ledger == nil {
		var err error
		if ledger, err = NewLedger(orders, limiter, LedgerOptions{Now: opts.Now, Logger: opts.Logger}); err != nil {
			return nil, err
		}
	}
	return &Service{orders: orders, limiter: limiter, channels: channels, opts: opts, log: opts.Logger, ledger: ledger}, nil
}

// Pay runs one payment and returns its order. The error is an *apperr.Error
// for every expected outcome: REQUEST_LIMITED, CHANNEL_NOT_SUPPORTED,
// IDEMPOTENCY_CONFLICT, CHANNEL_ERROR, DEPENDENCY_UNAVAILABLE.
//
// A requestId seen before with the same payload returns the stored outcome
// without calling the channel or the limiter. The channel is called at most
// once per requestId, ever: the order row, unique by requestId, is written
// before the call, and the call runs to its end even if the client leaves.
// A claim whose INSERT answered an error is read back before anything else
// happens (resolveClaim); the limiter slot is released only for an order
// settled as NOT_SENT, which no channel call can follow.
func (s *Service) Pay(ctx context.Context, req PayRequest) (*Order, error) {
	if req.Channel == "" {
		return s.payRouted(ctx, req) // route.go
	}
	ch, ok := s.channels.Get(req.Channel)
	if !ok {
		return nil, apperr.New(apperr.ChannelNotSupported, "channel %s is not supported", req.Channel).
			WithDetails(map[string]any{"channel": req.Channel})
	}
	existing, err := s.priorOrder(ctx, req.RequestID)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return s.replay(ctx, existing, req.Hash())
	}

	key := req.Key()
	hold, inFlight := s.admissionInFlight(req, key)
	defer inFlight()
	req.holding = &holding{hold}
	d, err := s.admit(ctx, req, key, req.MaxWait)
	if err != nil {
		return nil, err
	}
	if !d.Allowed {
		return nil, LimitedError(key, d)
	}

	hash := req.Hash() // only now: a refused request never needs it
	now := s.opts.Now().UTC()
	o := &Order{
		OrderNo: newOrderNo(now), RequestID: req.RequestID, RequestHash: hash,
		BizType: req.BizType, Channel: req.Channel, MerchantID: req.MerchantID,
		Amount: req.Amount, Currency: req.Currency, Subject: req.Subject,
		Status: StatusProcessing, CreatedAt: now, UpdatedAt: now,
		Admission: admissionOf(d), hold: d.Hold,
	}
	won, answer, err := s.claim(ctx, req, o)
	inFlight() // the order, or the ledger, owns the slot now
	if !won {
		return answer, err
	}
	return s.callChannel(ctx, ch, o)
}

// admissionInFlight returns hold, which keeps req, checked on keys, on disk
// from the moment the limiter can hold a slot for it, and done, which ends
// that: a process killed before its claim leaves its slots to the next
// run's ledger (Ledger.inFlight).
func (s *Service) admissionInFlight(req PayRequest, keys ...ratelimit.Key) (hold, done func()) {
	return s.ledger.inFlight(func() *Order {
		return &Order{RequestID: req.RequestID, RequestHash: req.Hash(), BizType: req.BizType, Channel: req.Channel,
			MerchantID: req.MerchantID, Amount: req.Amount, Currency: req.Currency, Subject: req.Subject}
	}, keys...)
}

// callChannel calls the channel once and records the outcome. It is detached
// from the caller's cancellation: a started payment always gets recorded.
func (s *Service) callChannel(ctx context.Context, ch channel.Channel, o *Order) (*Order, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ChannelTimeout)
	res, err := s.opts.Health.CallPinned(cctx, ch, channelRequest(o))
	cancel()
	return s.record(ctx, o, res, err)
}

// record records the outcome of o's one channel call. A call that provably
// never reached the channel (channel.ErrNotSent) ends FAILED NOT_SENT, and
// its limiter slot is released once that is recorded.
func (s *Service) record(ctx context.Context, o *Order, res channel.Result, err error) (*Order, error) {
	base := context.WithoutCancel(ctx)
	var sysErr *channel.SystemError
	var throttled *channel.ThrottledError
	switch {
	case errors.As(err, &throttled):
		s.learnThrottle(base, o, throttled)
		o.Status, o.FailureCode, o.FailureMessage = StatusFailed, FailureNotSent, throttledMessage
	case errors.Is(err, channel.ErrNotSent):
		o.Status, o.FailureCode = StatusFailed, FailureNotSent
		o.FailureMessage = "the channel could not be reached; the payment was not sent and nothing was charged"
	case err == nil:
		o.Status, o.ChannelTradeNo = Status(res.Status), res.TradeNo
		o.FailureCode, o.FailureMessage = res.DeclineCode, res.DeclineReason
		if res.Status == channel.Processing {
			o.Status, o.FailureCode, o.FailureMessage = StatusUnknown, "CHANNEL_PROCESSING", "the channel is still processing the payment; its outcome will be resolved with the channel"
		} else if o.Status != StatusSucceeded && o.Status != StatusFailed {
			o.Status, o.FailureCode, o.FailureMessage = StatusUnknown, "CHANNEL_BAD_ANSWER", fmt.Sprintf("channel answered status %q", res.Status)
		}
	case errors.As(err, &sysErr):
		o.Status, o.FailureCode, o.FailureMessage = StatusFailed, string(apperr.ChannelError), sysErr.Code+": "+sysErr.Message
	case errors.Is(err, channel.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		o.Status, o.FailureCode, o.FailureMessage = StatusUnknown, "CHANNEL_TIMEOUT", "the channel did not answer in time; the outcome is unknown"
	default:
		o.Status, o.FailureCode, o.FailureMessage = StatusUnknown, "CHANNEL_TRANSPORT", "the channel call failed in transit; the outcome is unknown"
		s.log.Warn("channel call failed; outcome unknown", "channel", o.Channel, "requestId", o.RequestID, "err", err)
	}
	o.UpdatedAt = s.opts.Now().UTC()
	if err := s.finish(base, o); err != nil {
		if o.FailureCode == FailureNotSent {
			// Provably never processed (a throttle, a refused
			// connection): not an unknown outcome. The ledger ends the
			// row NOT_SENT once the database answers, then the slot.
			s.ledger.closeClaim(o, o.FailureMessage, 0, holdFor(ratelimit.Key{BizType: o.BizType, Channel: o.Channel}, o))
			return nil, apperr.Wrap(err, apperr.DependencyUnavailable,
				"the payment was not sent, but that could not be recorded; query GET /pay/%s later", o.RequestID).
				WithDetails(map[string]any{"dependency": "database", "orderNo": o.OrderNo})
		}
		// Unrecorded: the order is swept UNKNOWN and resolved with the
		// channel, which settles its slot then.
		return nil, apperr.Wrap(err, apperr.DependencyUnavailable,
			"the payment was sent to the channel but its outcome could not be recorded; query GET /pay/%s later", o.RequestID).
			WithDetails(map[string]any{"dependency": "database", "orderNo": o.OrderNo, "status": string(StatusUnknown)})
	}
	// Settled by the outcome as stored (an order the channel's own word
	// ended first is adopted by finish).
	s.ledger.Settle(base, holdFor(ratelimit.Key{BizType: o.BizType, Channel: o.Channel}, o), nil, o)
	if throttled != nil && o.FailureMessage == throttledMessage {
		return nil, channelThrottledError(o, throttled.RetryAfter, true)
	}
	return s.outcome(o)
}

// learnThrottle tells the limiter that o's channel throttled its call, so
// that every instance admits less there (the learned limit), before the
// slot is released; and counts the throttle.
func (s *Service) learnThrottle(ctx context.Context, o *Order, t *channel.ThrottledError) {
	s.opts.Throttles.Throttled(o.Channel)
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := s.limiter.Throttled(tctx, holdFor(ratelimit.Key{BizType: o.BizType, Channel: o.Channel}, o), t.RetryAfter); err != nil {
		s.log.Warn("the limiter could not learn a channel's throttle; its limit stays where it was",
			"channel", o.Channel, "requestId", o.RequestID, "err", err)
	}
}

// finish records the outcome, retrying briefly: the channel was called, so
// giving up early would leave a known outcome unrecorded.
func (s *Service) finish(ctx context.Context, o *Order) error {
	var err error
	b := requestBackoff
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 && !retry.Sleep(context.WithoutCancel(ctx), b.Wait()) {
			break
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = s.orders.Finish(fctx, o)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrOrderNotFound) {
			if s.endedElsewhere(ctx, o) {
				return nil
			}
			if attempt > 0 && s.recorded(ctx, o) {
				// An earlier attempt that timed out on our side was
				// committed after all (a batched statement outlives its
				// callers' deadlines): the outcome is recorded.
				return nil
			}
			return err
		}
	}
	s.log.Error("could not record a channel outcome; the order stays PROCESSING until swept to UNKNOWN",
		"requestId", o.RequestID, "orderNo", o.OrderNo, "status", string(o.Status), "err", err)
	return err
}

// endedElsewhere reports whether o's order was already ended by the
// channel's own word (a notification, or the resolver after the sweeper
// marked it UNKNOWN) and, if so, makes o that order: the channel's word
// stands, and a final order never changes.
func (s *Service) endedElsewhere(ctx context.Context, o *Order) bool {
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got, err := s.orders.Get(gctx, o.RequestID)
	if err != nil || got.OrderNo != o.OrderNo || got.ResolvedBy == "" {
		return false
	}
	if st := StateOf(got); st == StateProcessing || st == StateUnknown {
		return false
	}
	*o = *got
	return true
}

// recorded reports whether the stored order already holds o's outcome.
func (s *Service) recorded(ctx context.Context, o *Order) bool {
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got, err := s.orders.Get(gctx, o.RequestID)
	return err == nil && got.Status == o.Status && got.ChannelTradeNo == o.ChannelTradeNo &&
		got.FailureCode == o.FailureCode && got.FailureMessage == o.FailureMessage
}

// outcome turns a finished order into the answer: the order, or the same
// CHANNEL_ERROR the first request got.
func (s *Service) outcome(o *Order) (*Order, error) {
	if StateOf(o) == StateNotSent && o.FailureMessage == throttledMessage {
		return nil, channelThrottledError(o, 0, false)
	}
	if o.FailureCode == string(apperr.ChannelError) {
		return nil, apperr.New(apperr.ChannelError, "the channel refused the payment with a system error; nothing was charged").
			WithDetails(map[string]any{"orderNo": o.OrderNo, "channel": o.Channel, "channelMessage": o.FailureMessage})
	}
	return o, nil
}

func (s *Service) replay(ctx context.Context, o *Order, hash string) (*Order, error) {
	if o.RequestHash != hash {
		return nil, apperr.New(apperr.IdempotencyConflict, "requestId %s was used before with a different payload", o.RequestID).
			WithDetails(map[string]any{"requestId": o.RequestID, "orderNo": o.OrderNo})
	}
	if o.Status == StatusProcessing {
		return s.awaitExisting(ctx, o.RequestID, hash)
	}
	return s.outcome(o)
}

// awaitExisting waits for a concurrent request with the same requestId to
// record its outcome, then answers as a replay.
func (s *Service) awaitExisting(ctx context.Context, requestID, hash string) (*Order, error) {
	deadline := s.opts.Now().Add(s.opts.InFlightWait)
	b := requestBackoff
	for {
		o, err := s.orders.Get(ctx, requestID)
		if err != nil {
			if errors.Is(err, ErrOrderNotFound) {
				return nil, apperr.New(apperr.IdempotencyConflict, "requestId %s is being processed; retry later", requestID)
			}
			return nil, s.storeDown(err, "look up the requestId")
		}
		if o.RequestHash != hash {
			return s.replay(ctx, o, hash)
		}
		if o.Status != StatusProcessing {
			return s.outcome(o)
		}
		if !s.opts.Now().Before(deadline) {
			return nil, apperr.New(apperr.IdempotencyConflict, "requestId %s is still being processed; retry later", requestID).
				WithDetails(map[string]any{"orderNo": o.OrderNo, "status": string(o.Status)})
		}
		if !retry.Sleep(ctx, b.Wait()) {
			return nil, apperr.Wrap(ctx.Err(), apperr.IdempotencyConflict, "requestId %s is still being processed", requestID)
		}
	}
}

// Get returns the order of requestID, or ORDER_NOT_FOUND.
func (s *Service) Get(ctx context.Context, requestID string) (*Order, error) {
	if !ValidRequestID(requestID) {
		return nil, apperr.Invalid(apperr.FieldError{Field: "requestId", Reason: requestIDProblem(requestID)})
	}
	o, err := s.orders.Get(ctx, requestID)
	if errors.Is(err, ErrOrderNotFound) {
		return nil, apperr.New(apperr.OrderNotFound, "no order has requestId %s", requestID)
	}
	if err != nil {
		return nil, s.storeDown(err, "read the order")
	}
	return o, nil
}

// SweepStale marks orders stuck in PROCESSING for longer than StaleAfter as
// UNKNOWN: their channel outcome was never recorded (a crash, or the
// database failing after the call). It returns how many it marked.
func (s *Service) SweepStale(ctx context.Context) (int64, error) {
	n, err := s.orders.MarkStaleUnknown(ctx, s.opts.Now().Add(-s.opts.StaleAfter))
	if n > 0 {
		s.log.Warn("marked stale PROCESSING orders UNKNOWN; reconcile them with the channels", "count", n)
	}
	return n, err
}

// RunSweeper calls SweepStale every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.SweepStale(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("stale order sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) storeDown(err error, what string) error {
	s.log.Error("order store failed", "op", what, "err", err)
	return apperr.Wrap(err, apperr.DependencyUnavailable, "the order database is unavailable").
		WithDetails(map[string]any{"dependency": "database"})
}

// newOrderNo returns a unique, sortable order number such as
// PS20261121232800a1b2c3d4e5f6 (28 characters).
func newOrderNo(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "PS" + now.Format("20060102150405") + hex.EncodeToString(b[:])
}

// lostAnswer hands req, whose check lost its answer (d, a refusal with an
// unknown outcome), to the ledger with the slot the lost call may have
// taken.
func (s *Service) lostAnswer(req PayRequest, d ratelimit.Decision) {
	s.ledger.AddLostAnswer(req, d.Hold)
}

// DefaultStaleAfter is the age past which a PROCESSING order is stale
// when none is configured: the channel timeout (default 5s) and a minute.
func DefaultStaleAfter(channelTimeout time.Duration) time.Duration {
	if channelTimeout <= 0 {
		channelTimeout = 5 * time.Second
	}
	return channelTimeout + time.Minute
}
