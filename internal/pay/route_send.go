package pay

import (
	"context"
	"errors"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/ratelimit"
)

// sendRouted calls the channel of o, a claimed routed payment, through its
// health breaker. Only a call that provably never reached the channel
// (channel.ErrNotSent: a refused connection, or the breaker refusing the
// call) moves on to the next candidate of rest that admits it, and only
// after the claim names that candidate (moveOn): the order row always names
// the one channel that may have been called. Any other outcome, a timeout
// above all, is recorded as for a pinned payment and never sent elsewhere.
func (s *Service) sendRouted(ctx context.Context, o *Order, rest []string) (*Order, error) {
	for {
		ch, ok := s.channels.Get(o.Channel)
		if !ok {
			// pick never chooses an unknown channel.
			return nil, apperr.New(apperr.Internal, "channel %s of a routed payment is not configured", o.Channel)
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ChannelTimeout)
		res, err := s.opts.Health.Call(cctx, ch, channelRequest(o))
		cancel()
		if !errors.Is(err, channel.ErrNotSent) {
			s.opts.RouteObserver.Routed(o.BizType, o.Channel, o.RoutedFrom)
			return s.record(ctx, o, res, err)
		}
		if throttled := (*channel.ThrottledError)(nil); errors.As(err, &throttled) {
			s.learnThrottle(ctx, o, throttled)
		}
		s.log.Warn("a routed payment never reached its channel; trying the next candidate",
			"requestId", o.RequestID, "channel", o.Channel, "err", err)
		var moved bool
		if moved, rest, err = s.moveOn(ctx, o, rest); !moved {
			if err != nil {
				return nil, err
			}
			return s.outcome(o)
		}
	}
}

// moveOn moves o, whose call provably never reached o.Channel, to the next
// candidate of rest that admits it: the claim is updated to name the new
// channel (PROCESSING, same owner) before any call, and the old channel's
// slot is released only then, when no call on it can follow. moved is
// false when the payment ends here instead, settled as FAILED NOT_SENT (no
// candidate admits it, the limiter failed, or the claim could not be
// moved); err is then nil, or DEPENDENCY_UNAVAILABLE when that could not be
// recorded.
func (s *Service) moveOn(ctx context.Context, o *Order, rest []string) (moved bool, left []string, err error) {
	from := ratelimit.Key{BizType: o.BizType, Channel: o.Channel}
	skipped := append(append([]RouteSkip{}, o.RoutedFrom...), RouteSkip{Channel: o.Channel, Reason: ReasonUnhealthy})
	// A kill between the next candidate's check and the claim naming it
	// leaves that slot to the next run (admissionInFlight); the claim on
	// from is the sweeper's and the resolver's as before.
	keys := make([]ratelimit.Key, len(rest))
	for i, c := range rest {
		keys[i] = ratelimit.Key{BizType: o.BizType, Channel: c}
	}
	hold, done := s.ledger.inFlight(func() *Order { return o }, keys...)
	defer done()
	// Detached, as the channel call is: a client leaving now must not
	// change where a claimed payment ends.
	chosen, d, refused, left, err := s.pick(context.WithoutCancel(ctx),
		PayRequest{RequestID: o.RequestID, BizType: o.BizType, MerchantID: o.MerchantID, Amount: o.Amount, Currency: o.Currency, Subject: o.Subject, holding: &holding{hold}}, rest)
	if err != nil || chosen == "" {
		holds := []ratelimit.Hold{holdFor(from, o)}
		if err != nil {
			s.log.Warn("the limiter failed while a routed payment looked for its next candidate; it ends NOT_SENT",
				"requestId", o.RequestID, "err", err)
			// A lost limiter answer may have left the member in a
			// candidate's windows; the order ends NOT_SENT and is final,
			// so no call can follow under any of them: release them all
			// (releasing a member a window does not hold changes nothing).
			for _, c := range rest {
				holds = append(holds, ratelimit.HoldOf(ratelimit.Key{BizType: o.BizType, Channel: c}, o.RequestID).OfMerchant(o.MerchantID))
			}
		}
		s.opts.RouteObserver.Exhausted(o.BizType, append(skipped, skipsOf(refused)...))
		return false, nil, s.settleNotSent(ctx, o, holds...)
	}
	n := *o
	n.Channel, n.RoutedFrom, n.Admission, n.hold = chosen, append(skipped, skipsOf(refused)...), admissionOf(d), d.Hold
	n.UpdatedAt = s.opts.Now().UTC()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ClaimTimeout)
	err = s.orders.Reroute(rctx, &n, o.Channel)
	cancel()
	if err != nil {
		// Not moved (the sweeper took the claim), or perhaps moved: send
		// nothing more, under either channel.
		s.log.Warn("a routed payment could not be moved to its next candidate; it ends NOT_SENT",
			"requestId", o.RequestID, "from", from.Channel, "to", chosen, "err", err)
		return false, nil, s.settleNotSent(ctx, o, holdFor(from, o), d.Hold)
	}
	fromHold := holdFor(from, o)
	*o = n
	s.ledger.Settle(ctx, fromHold, nil, o) // o left from: released
	return true, left, nil
}

// notSentRouted is the failure message of a routed payment that no
// candidate could take.
const notSentRouted = "no candidate channel could be reached or admitted the payment; nothing was sent or charged"

// settleNotSent ends o, which no channel call reached, as FAILED NOT_SENT,
// and then settles the slots holds keep: no call under them can follow.
// When that cannot be recorded, DEPENDENCY_UNAVAILABLE is returned and the
// ledger goes on with it, so that the order ends NOT_SENT rather than
// UNKNOWN once the database answers; the slots are kept until then.
func (s *Service) settleNotSent(ctx context.Context, o *Order, holds ...ratelimit.Hold) error {
	o.Status, o.FailureCode, o.FailureMessage = StatusFailed, FailureNotSent, notSentRouted
	o.UpdatedAt = s.opts.Now().UTC()
	if err := s.finish(context.WithoutCancel(ctx), o); err != nil {
		s.ledger.closeClaim(o, notSentRouted, 0, holds...)
		return apperr.Wrap(err, apperr.DependencyUnavailable,
			"the payment was not sent, but that could not be recorded; query GET /pay/%s later", o.RequestID).
			WithDetails(map[string]any{"dependency": "database", "orderNo": o.OrderNo})
	}
	// By the order as stored: NOT_SENT releases every slot; an order the
	// channel's own word ended first (adopted by finish) keeps its slot
	// on the channel that processed it, and the others were never called.
	for _, h := range holds {
		s.ledger.Settle(ctx, h, nil, o)
	}
	return nil
}

// lostClaim answers a request (routed or pinned) whose claim a concurrent
// duplicate won: it waits for that order's outcome, as any duplicate does.
// The slot it took (hold) meets the fate DecideSlot gives it against the
// winner's order: released at once when it is another payment's attempt
// (another amount, another bizType on the channel) or the order ended
// elsewhere, kept with the winner's own slot otherwise. While the fate
// waits on the winner (PROCESSING, or not readable), the ledger watches
// it.
func (s *Service) lostClaim(ctx context.Context, mine *Order, hold ratelimit.Hold) (*Order, error) {
	requestID := mine.RequestID
	o, err := s.awaitExisting(ctx, requestID, mine.RequestHash)
	holder := o
	if err != nil || o.Status == StatusProcessing {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		got, gerr := s.orders.Get(gctx, requestID)
		cancel()
		holder = got
		if gerr != nil {
			holder = nil
		}
	}
	s.ledger.Settle(ctx, hold, mine, holder)
	return o, err
}

func channelRequest(o *Order) channel.Request {
	return channel.Request{
		OrderNo: o.OrderNo, RequestID: o.RequestID, BizType: o.BizType, MerchantID: o.MerchantID,
		Amount: o.Amount, Currency: o.Currency, Subject: o.Subject, CreatedAt: o.CreatedAt,
	}
}
