package pay

import (
	"context"
	"errors"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/channel"
	"payserver/internal/ratelimit"
)

// Reasons a routed payment skipped a candidate (RouteSkip.Reason).
const (
	// ReasonLimited: the candidate's limiter refused: a window is full.
	ReasonLimited = "limited"
	// ReasonClosed: the candidate's limit is 0 (closed).
	ReasonClosed = "closed"
	// ReasonUnhealthy: the candidate's health breaker is open, or the call
	// provably never reached it (channel.ErrNotSent).
	ReasonUnhealthy = "unhealthy"
)

// RouteSkip is one candidate a routed payment was not sent to, and why.
type RouteSkip struct {
	Channel string `json:"channel"`
	Reason  string `json:"reason"`
}

// RouteTable gives the routes of the limits document in force.
type RouteTable interface {
	// Route returns bizType's candidates in order of preference, nil when
	// it has no route. The error is an *apperr.Error when no limits
	// document is in force yet.
	Route(bizType string) ([]string, error)
}

// ChannelHealth says which channels routed payments skip, and counts the
// outcome of their calls. *channel.Health implements it.
type ChannelHealth interface {
	// Unhealthy reports whether code is skipped now.
	Unhealthy(code string) bool
	// RetryAfter is how long until an unhealthy code is probed again.
	RetryAfter(code string) time.Duration
	// Call calls ch unless its health forbids it, in which case the error
	// wraps channel.ErrNotSent.
	Call(ctx context.Context, ch channel.Channel, req channel.Request) (channel.Result, error)
	// CallPinned calls ch for a pinned payment, always, counting the
	// outcome into ch's health.
	CallPinned(ctx context.Context, ch channel.Channel, req channel.Request) (channel.Result, error)
}

// RouteObserver is told how routed payments were routed, for metrics and
// reports. It is called on the request path and must not block.
type RouteObserver interface {
	// Routed: a routed payment was sent to channel after skipping skipped.
	Routed(bizType, channel string, skipped []RouteSkip)
	// Exhausted: every candidate of a routed payment refused it.
	Exhausted(bizType string, skipped []RouteSkip)
}

// candidateRefusal is a candidate that refused a routed payment: the skip, and the
// limiter's decision (zero for an unhealthy candidate).
type candidateRefusal struct {
	skip RouteSkip
	d    ratelimit.Decision
	wait time.Duration // until it may admit; 0 for a closed candidate
}

func skipsOf(rs []candidateRefusal) []RouteSkip {
	out := make([]RouteSkip, len(rs))
	for i, r := range rs {
		out[i] = r.skip
	}
	return out
}

// payRouted runs a payment without a channel: the first candidate of its
// bizType's route whose limiter admits it is used, and the order records
// the candidates skipped (RoutedFrom). It holds a limiter slot in exactly
// one candidate's windows: a refusing candidate records nothing, and a slot
// taken by a duplicate that lost the claim to an order on another channel
// is released once that order is final (lostClaim).
func (s *Service) payRouted(ctx context.Context, req PayRequest) (*Order, error) {
	candidates, err := s.opts.Routes.Route(req.BizType)
	if err == nil && len(candidates) == 0 {
		err = apperr.Invalid(apperr.FieldError{Field: "channel",
			Reason: "is required: bizType " + req.BizType + " has no route in the limits document"})
	}
	// The hash is of the payload without a channel: a retry without one
	// matches the stored order, whichever channel it went to. A stored
	// order is answered even when the route is gone or the limits are not
	// loaded; if it cannot be looked up then, the route's error stands.
	existing, lookupErr := s.priorOrder(ctx, req.RequestID)
	switch {
	case existing != nil:
		return s.replay(ctx, existing, req.Hash())
	case err != nil:
		return nil, err
	case lookupErr != nil:
		return nil, lookupErr
	}
	keys := make([]ratelimit.Key, len(candidates))
	for i, c := range candidates {
		keys[i] = ratelimit.Key{BizType: req.BizType, Channel: c}
	}
	hold, inFlight := s.admissionInFlight(req, keys...)
	defer inFlight()
	req.holding = &holding{hold}
	chosen, d, refused, rest, err := s.pick(ctx, req, candidates)
	if err != nil {
		return nil, err
	}
	if chosen == "" {
		s.opts.RouteObserver.Exhausted(req.BizType, skipsOf(refused))
		return nil, RoutesRefusedError(req.BizType, refused)
	}
	hash := req.Hash()
	now := s.opts.Now().UTC()
	o := &Order{
		OrderNo: newOrderNo(now), RequestID: req.RequestID, RequestHash: hash,
		BizType: req.BizType, Channel: chosen, MerchantID: req.MerchantID,
		Amount: req.Amount, Currency: req.Currency, Subject: req.Subject,
		Status: StatusProcessing, CreatedAt: now, UpdatedAt: now,
		RoutedFrom: skipsOf(refused), Admission: admissionOf(d), hold: d.Hold,
	}
	won, answer, err := s.claim(ctx, req, o)
	inFlight() // the order, or the ledger, owns the slot now
	if !won {
		return answer, err
	}
	return s.sendRouted(ctx, o, rest)
}

// pick asks the candidates in order and takes the first whose health and
// limiter admit the request; refused lists those before it that refused,
// rest those after it. chosen is "" when every candidate refused. A
// candidate's limiter refusal records nothing, so only the chosen one holds
// a slot; d is the limiter's admission of that slot. maxWaitMs applies
// once all refused: the request then waits for the limited candidate with
// the shortest wait, if it is within maxWaitMs.
func (s *Service) pick(ctx context.Context, req PayRequest, candidates []string) (chosen string, d ratelimit.Decision, refused []candidateRefusal, rest []string, err error) {
	for i, c := range candidates {
		r, ok, err := s.try(ctx, req, c)
		if err != nil {
			return "", ratelimit.Decision{}, nil, nil, err
		}
		if ok {
			return c, r.d, refused, candidates[i+1:], nil
		}
		refused = append(refused, r)
	}
	best := -1
	for i, r := range refused {
		if r.skip.Reason == ReasonLimited && r.wait <= req.MaxWait && (best < 0 || r.wait < refused[best].wait) {
			best = i
		}
	}
	if best < 0 || req.MaxWait <= 0 {
		return "", ratelimit.Decision{}, refused, nil, nil
	}
	c := refused[best].skip.Channel
	d, err = s.admit(ctx, req, ratelimit.Key{BizType: req.BizType, Channel: c}, req.MaxWait)
	if err != nil {
		return "", ratelimit.Decision{}, nil, nil, err
	}
	if !d.Allowed {
		refused[best].d, refused[best].wait = d, d.RetryAfter
		return "", ratelimit.Decision{}, refused, nil, nil
	}
	return c, d, refused[:best], candidates[indexOf(candidates, c)+1:], nil
}

// try asks one candidate: its health first, then its limiter (without
// waiting). ok is true when it admitted the request and holds its slot.
func (s *Service) try(ctx context.Context, req PayRequest, c string) (candidateRefusal, bool, error) {
	if _, known := s.channels.Get(c); !known {
		// The live loader refuses routes naming unknown channels; this
		// guards a table built some other way.
		s.log.Warn("a route names a channel that is not configured; skipped as closed", "bizType", req.BizType, "channel", c)
		return candidateRefusal{skip: RouteSkip{Channel: c, Reason: ReasonClosed}}, false, nil
	}
	if s.opts.Health.Unhealthy(c) {
		return candidateRefusal{skip: RouteSkip{Channel: c, Reason: ReasonUnhealthy}, wait: s.opts.Health.RetryAfter(c)}, false, nil
	}
	// A lost answer stops the route: the limiter may have admitted the
	// request on this candidate after all, and moving on could leave it
	// holding slots on two channels (a retry with the same requestId is
	// exact). So does a conflict: this candidate holds the requestId for
	// another amount, and moving on would pay it elsewhere.
	d, err := s.admit(ctx, req, ratelimit.Key{BizType: req.BizType, Channel: c}, 0)
	if err != nil {
		return candidateRefusal{}, false, err
	}
	if d.Allowed {
		return candidateRefusal{d: d}, true, nil
	}
	reason := ReasonLimited
	if d.Closed() {
		reason = ReasonClosed
	}
	return candidateRefusal{skip: RouteSkip{Channel: c, Reason: reason}, d: d, wait: d.RetryAfter}, false, nil
}

// admissionOf is the limiter's record of an admitted decision's slot.
func admissionOf(d ratelimit.Decision) Admission {
	return Admission{At: d.AdmittedAt, Keys: d.WindowKeys, LimitsVersion: d.LimitsVersion}
}

// lostLimiterAnswer is the answer when the limiter's answer for candidate c
// was lost (it may hold the payment's slot): 503, retry with the same
// requestId, which is exact.
func lostLimiterAnswer(c string) error {
	return apperr.New(apperr.DependencyUnavailable,
		"the channel limiter did not answer in time for %s; retry with the same requestId", c).
		WithDetails(map[string]any{"dependency": "redis"})
}

// limiterFailed turns a limiter error into the API's error.
func (s *Service) limiterFailed(err error) error {
	if apperr.CodeOf(err) != apperr.Internal {
		return err // already classified, e.g. LimitsNotLoaded
	}
	if errors.Is(err, ratelimit.ErrUnavailable) {
		return apperr.Wrap(err, apperr.DependencyUnavailable, "the channel limiter is unavailable").
			WithDetails(map[string]any{"dependency": "redis"})
	}
	return apperr.Wrap(err, apperr.DependencyUnavailable, "the channel limiter did not answer")
}

// admit asks the limiter for req's slot on key, waiting up to maxWait for
// room: the one place a payment, pinned or routed, takes a slot. A refusal
// is a decision with Allowed false and a nil error. The error is what the
// request answers otherwise: the limiter failed (limiterFailed), its answer
// was lost (503; the ledger keeps the slot it may hold), or
// the key holds the requestId for another amount (409).
func (s *Service) admit(ctx context.Context, req PayRequest, key ratelimit.Key, maxWait time.Duration) (ratelimit.Decision, error) {
	if err := s.ledger.Admitting(); err != nil {
		return ratelimit.Decision{Key: key}, err
	}
	d, err := s.limiter.Check(ctx, ratelimit.Request{Caller: LimiterCaller, Key: key, Member: req.RequestID, Amount: req.Amount, Currency: req.Currency, Merchant: req.MerchantID, MaxWait: maxWait, Holding: req.holding.fn()})
	switch {
	case err != nil:
		return d, s.limiterFailed(err)
	case d.Allowed:
		return d, nil
	case d.Unknown:
		s.lostAnswer(req, d)
		return d, lostLimiterAnswer(key.Channel)
	case d.Conflict:
		return d, ConflictError(key, req.RequestID, req.Amount)
	}
	return d, nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return len(list) - 1
}

// setRouteDefaults fills the routing options left nil.
func setRouteDefaults(opts *Options) {
	if opts.Routes == nil {
		opts.Routes = noRoutes{}
	}
	if opts.Health == nil {
		opts.Health = alwaysHealthy{}
	}
	if opts.RouteObserver == nil {
		opts.RouteObserver = nopRouteObserver{}
	}
	if opts.Throttles == nil {
		opts.Throttles = nopThrottleObserver{}
	}
}

type noRoutes struct{}

func (noRoutes) Route(string) ([]string, error) { return nil, nil }

type alwaysHealthy struct{}

func (alwaysHealthy) Unhealthy(string) bool           { return false }
func (alwaysHealthy) RetryAfter(string) time.Duration { return 0 }
func (alwaysHealthy) Call(ctx context.Context, ch channel.Channel, req channel.Request) (channel.Result, error) {
	return ch.Pay(ctx, req)
}
func (alwaysHealthy) CallPinned(ctx context.Context, ch channel.Channel, req channel.Request) (channel.Result, error) {
	return ch.Pay(ctx, req)
}

type nopRouteObserver struct{}

func (nopRouteObserver) Routed(string, string, []RouteSkip) {}
func (nopRouteObserver) Exhausted(string, []RouteSkip)      {}
