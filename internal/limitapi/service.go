// Package limitapi makes the channel limiter a service for the rest of the
// platform (refunds, payouts, queries, reconciliation jobs): acquire a slot,
// release one that was never used, peek at the room left. The HTTP routes
// under /v1/limits and Envoy's rate-limit protocol over gRPC both call it,
// so they answer alike. It checks the very windows POST /pay checks, so the
// channel sees one limit; its members are the callers' requestIds under the
// prefix MemberPrefix, so that a caller's requestId can never share (or
// release) the slot of a POST /pay payment with the same requestId: those
// are two channel operations.
package limitapi

import (
	"context"
	"errors"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/pay"
	"payserver/internal/ratelimit"
)

// MemberPrefix starts the limiter member of every requestId acquired through
// this service (HTTP and gRPC alike), keeping them apart from POST /pay's
// members, which are bare requestIds: '#' is never in a requestId
// (pay.ValidRequestID), so no payment's member starts with it, whatever a
// client sends, and a release here only ever frees a member under it.
const MemberPrefix = "#api:"

// member is the limiter member of a caller's requestId:
// "#api:<client>:<requestId>". Client names hold no ':', so each client's
// requestIds are its own: another client can neither share nor release
// them.
func member(client, requestID string) string { return MemberPrefix + client + ":" + requestID }

// Peeker says whether a request would be admitted now, consuming nothing.
// *ratelimit.Limiter implements it.
type Peeker interface {
	Peek(ctx context.Context, r ratelimit.Request) (ratelimit.Decision, error)
}

// OrderFinder looks up a payment made through POST /pay. *pay.Service
// implements it.
type OrderFinder interface {
	Get(ctx context.Context, requestID string) (*pay.Order, error)
}

// Op names a limits-service operation, for observers.
type Op string

// The operations.
const (
	OpAcquire Op = "acquire"
	OpRelease Op = "release"
	OpPeek    Op = "peek"
)

// Result says how an operation ended, for observers.
type Result string

// The results.
const (
	ResultAdmitted Result = "admitted"
	ResultLimited  Result = "limited"
	ResultReleased Result = "released"
	ResultRefused  Result = "refused"  // release of a POST /pay requestId, or a bizType outside the client's scope
	ResultNotHeld  Result = "not_held" // release of a requestId no window held for the client
	ResultPeeked   Result = "peeked"
	ResultFailed   Result = "failed" // the limiter or a dependency failed
)

// Observer is told of every operation by the calling client's name. It is
// called on the request path and must not block.
type Observer interface {
	Called(client string, op Op, key ratelimit.Key, result Result)
}

// HeldReleaser gives back a slot and reports whether some window held its
// member. *ratelimit.Limiter implements it.
type HeldReleaser interface {
	ReleaseHeld(ctx context.Context, h ratelimit.Hold) (held bool, err error)
}

// Options wires a Service. Admit, Peek and Ledger are required.
type Options struct {
	// Admit is the limiter that decides acquisitions, waiting for room
	// when a request carries a maximum wait: POST /pay's, so that the
	// channel sees one limit.
	Admit pay.Limiter
	Peek  Peeker
	// Release frees the slots clients release (Service.Release). Default:
	// Admit, which must then implement HeldReleaser.
	Release HeldReleaser
	// Orders, when set, lets Release refuse a requestId that belongs to a
	// payment made through POST /pay: payserver itself frees those slots,
	// only when the channel was never called.
	Orders   OrderFinder
	Observer Observer
	// Scopes are the bizTypes each client may acquire and release, by
	// client name; a client not in it may use every bizType.
	Scopes map[string][]string
	// Ledger keeps the members of acquires whose limiter answer was
	// lost (ReleaseLater), and refuses new acquires while it cannot take
	// them: POST /pay's, so that every slot whose fate is not known has
	// one owner.
	Ledger Ledger
}

// Service is the limiter as a service. It is safe for concurrent use.
type Service struct {
	opts Options
	// scopes is Options.Scopes as sets.
	scopes map[string]map[string]bool
}

// NewService returns a Service.
func NewService(opts Options) (*Service, error) {
	if opts.Admit == nil || opts.Peek == nil || opts.Ledger == nil {
		return nil, errors.New("limitapi: nil admitter, peeker or ledger")
	}
	if opts.Release == nil {
		r, ok := opts.Admit.(HeldReleaser)
		if !ok {
			return nil, errors.New("limitapi: no releaser, and the admitter cannot say what it released")
		}
		opts.Release = r
	}
	scopes := make(map[string]map[string]bool, len(opts.Scopes))
	for client, bizTypes := range opts.Scopes {
		scopes[client] = map[string]bool{}
		for _, b := range bizTypes {
			scopes[client][b] = true
		}
	}
	return &Service{opts: opts, scopes: scopes}, nil
}

// inScope refuses, FORBIDDEN naming the bizType, a key outside client's
// scope.
func (s *Service) inScope(client string, op Op, key ratelimit.Key) error {
	scope, scoped := s.scopes[client]
	if !scoped || scope[key.BizType] {
		return nil
	}
	s.observe(client, op, key, ResultRefused)
	return apperr.New(apperr.Forbidden, "client %s may not use bizType %s", client, key.BizType).
		WithDetails(map[string]any{"bizType": key.BizType})
}

// WindowUsage is one window that applies to a request: the key it belongs
// to (the request's, or its channel-wide key), its rule ("count/1s",
// "amount/day"), its limit, its size (zero for a calendar window), what it
// holds (admissions, or amount) and what is left for this request (less
// what it keeps for other bizTypes' unmet reservations).
type WindowUsage struct {
	Scope ratelimit.Key
	// Merchant, for the request's merchant's own use of Scope's window
	// under its merchant limit, names the merchant; empty for the window.
	Merchant string
	Rule     string
	Amount   bool
	// Currency is the only currency an amount window counts; "" when it
	// counts every currency (or is not known).
	Currency  string
	Limit     int64
	Window    time.Duration
	Used      int64
	Remaining int64
}

// Acquired is an admission.
type Acquired struct {
	Decision ratelimit.Decision
	// Windows is every window of the key after the admission; empty for an
	// unlimited key.
	Windows []WindowUsage
}

// Acquire takes a slot for r.RequestID in every window of r.Key, waiting up
// to r.MaxWait when refused. A retried requestId already in the windows is
// admitted again without being counted twice. A refusal is the
// REQUEST_LIMITED error POST /pay answers; a bizType outside the client's
// scope (Options.Scopes) is FORBIDDEN, naming it; a limiter failure is
// DEPENDENCY_UNAVAILABLE. So is a lost limiter answer (LostAnswer), whose
// member the ledger keeps, on disk before Acquire returns, and releases
// after LostAnswerGrace unless the requestId is admitted again. While the
// ledger cannot take it (full, or its disk failing) Acquire answers
// DEPENDENCY_UNAVAILABLE (dependency "ledger") before taking a slot.
func (s *Service) Acquire(ctx context.Context, client string, r AcquireRequest) (Acquired, error) {
	a, err := s.Decide(ctx, client, r)
	switch {
	case err != nil && a.Decision.Unknown:
		s.ReleaseLater(client, a.Decision.Hold)
	case err == nil && a.Decision.Conflict:
		return Acquired{}, pay.ConflictError(r.Key, r.RequestID, r.Amount)
	case err == nil && !a.Decision.Allowed:
		return Acquired{}, pay.LimitedError(r.Key, a.Decision)
	}
	return a, err
}

// Decide is Acquire with a refusal returned as a decision (Allowed false,
// Windows empty), not an error: for protocols that answer refusals in
// their own terms (gRPC). A lost limiter answer is LostAnswer's error with
// the decision (Unknown, its Hold naming the windows the lost call would
// have recorded the member in); Decide leaves its settling to the caller
// (ReleaseLater, or nothing when the slot is to stay counted). It asks
// the ledger first, as Acquire does.
func (s *Service) Decide(ctx context.Context, client string, r AcquireRequest) (Acquired, error) {
	if err := s.inScope(client, OpAcquire, r.Key); err != nil {
		return Acquired{}, err
	}
	if err := s.opts.Ledger.Admitting(); err != nil {
		s.observe(client, OpAcquire, r.Key, ResultFailed)
		return Acquired{}, err
	}
	m := member(client, r.RequestID)
	d, err := s.opts.Admit.Check(ctx, ratelimit.Request{MaxWait: r.MaxWait,
		Key: r.Key, Member: m, Amount: r.Amount, Currency: r.Currency, Merchant: r.MerchantID,
	})
	if err != nil {
		s.observe(client, OpAcquire, r.Key, ResultFailed)
		return Acquired{}, limiterDown(err)
	}
	if d.Unknown {
		s.observe(client, OpAcquire, r.Key, ResultFailed)
		return LostAnswer(r, d)
	}
	if d.Allowed {
		// The retry's admission owns the slot an earlier lost answer may
		// have taken. A refusal settles nothing: a near-cache refusal or
		// a conflict does not say the member holds no slot.
		s.opts.Ledger.AcquiredAgain(r.Key, m)
	}
	if !d.Allowed {
		s.observe(client, OpAcquire, r.Key, ResultLimited)
		return Acquired{Decision: d, Windows: []WindowUsage{}}, nil
	}
	s.observe(client, OpAcquire, r.Key, ResultAdmitted)
	return Acquired{Decision: d, Windows: windowsAfter(d)}, nil
}

// Undo gives back a slot this service admitted moments ago for a request
// that will not go ahead (another descriptor of the same gRPC request was
// refused). Unlike Release it skips the POST /pay check: the caller made
// the slot itself, for merchant ("" for none).
func (s *Service) Undo(ctx context.Context, client string, key ratelimit.Key, requestID, merchant string) error {
	if err := s.opts.Admit.Release(ctx, ratelimit.HoldOf(key, member(client, requestID)).OfMerchant(merchant)); err != nil {
		s.observe(client, OpRelease, key, ResultFailed)
		return limiterDown(err)
	}
	s.observe(client, OpRelease, key, ResultReleased)
	return nil
}

// windowsAfter is the per-window usage of an admitted key: every window
// from the decision when the store reported them (Redis and in-process
// decisions), else the binding window alone (a fail-open decision).
func windowsAfter(d ratelimit.Decision) []WindowUsage {
	if d.Source == ratelimit.SourceUnlimited {
		return []WindowUsage{}
	}
	if len(d.Windows) == 0 {
		return []WindowUsage{{Scope: d.Scope, Merchant: d.Merchant, Rule: d.Rule, Amount: d.Amount, Limit: d.Limit, Window: d.Window, Used: d.Count, Remaining: d.Remaining}}
	}
	out := make([]WindowUsage, len(d.Windows))
	for i, w := range d.Windows {
		out[i] = WindowUsage{Scope: w.Scope, Merchant: w.Merchant, Rule: w.Name(), Amount: w.Amount, Currency: w.Currency, Limit: w.Limit, Window: w.Size, Used: w.Count, Remaining: max(w.Limit-w.Kept-w.Count, 0)}
	}
	return out
}

// Release gives back the slot r.RequestID holds in r.Key's windows. A key
// outside the client's scope (Options.Scopes) is FORBIDDEN, as for Acquire. The
// caller declares that it never called the channel for it. A requestId
// that no window of the key holds for this client (never acquired by it,
// released before, gone with its window, or a key the limits leave
// unlimited) is SLOT_NOT_FOUND, and nothing changed. A limiter failure is
// DEPENDENCY_UNAVAILABLE, never SLOT_NOT_FOUND: what the shared store held
// is then unknown. A requestId that belongs to a POST /pay payment is
// refused (409 IDEMPOTENCY_CONFLICT): its slot is payserver's to free.
func (s *Service) Release(ctx context.Context, client string, r ReleaseRequest) error {
	if err := s.inScope(client, OpRelease, r.Key); err != nil {
		return err
	}
	if s.opts.Orders != nil {
		o, err := s.opts.Orders.Get(ctx, r.RequestID)
		switch {
		case err == nil:
			s.observe(client, OpRelease, r.Key, ResultRefused)
			return apperr.New(apperr.IdempotencyConflict,
				"requestId %s belongs to a payment made through POST /pay; payserver frees its slot itself", r.RequestID).
				WithDetails(map[string]any{"orderNo": o.OrderNo, "status": string(o.Status)})
		case apperr.CodeOf(err) != apperr.OrderNotFound:
			s.observe(client, OpRelease, r.Key, ResultFailed)
			return err
		}
	}
	held, err := s.opts.Release.ReleaseHeld(ctx, ratelimit.HoldOf(r.Key, member(client, r.RequestID)).OfMerchant(r.MerchantID))
	if err != nil {
		s.observe(client, OpRelease, r.Key, ResultFailed)
		return limiterDown(err)
	}
	s.opts.Ledger.AcquiredAgain(r.Key, member(client, r.RequestID))
	if !held {
		s.observe(client, OpRelease, r.Key, ResultNotHeld)
		return apperr.New(apperr.SlotNotFound, "no window of %s holds requestId %s for client %s; nothing was released", r.Key, r.RequestID, client)
	}
	s.observe(client, OpRelease, r.Key, ResultReleased)
	return nil
}

// Peeked is what a peek found.
type Peeked struct {
	// Allowed reports whether a request would be admitted now: every
	// window that applies has room for it (or the key is unlimited, or in
	// shadow mode).
	Allowed bool
	Shadow  bool
	// Windows is every window that applies to the request, the
	// channel-wide key's included; empty for an unlimited key.
	Windows []WindowUsage
}

// Peek reports whether a request for r.Key, paying r.Amount in r.Currency
// (both optional) for merchant r.MerchantID (optional, as in Acquire),
// would be admitted now, and the room left in each window that applies to
// it, the merchant's own use of a window with merchant limits included. It
// consumes nothing.
func (s *Service) Peek(ctx context.Context, client string, r PeekRequest) (Peeked, error) {
	d, err := s.opts.Peek.Peek(ctx, ratelimit.Request{Key: r.Key, Amount: r.Amount, Currency: r.Currency, Merchant: r.MerchantID})
	if err != nil {
		s.observe(client, OpPeek, r.Key, ResultFailed)
		return Peeked{}, limiterDown(err)
	}
	s.observe(client, OpPeek, r.Key, ResultPeeked)
	if d.Source == ratelimit.SourceUnlimited {
		return Peeked{Allowed: true, Windows: []WindowUsage{}}, nil
	}
	return Peeked{Allowed: d.Allowed, Shadow: d.Shadow, Windows: windowsAfter(d)}, nil
}

func (s *Service) observe(client string, op Op, key ratelimit.Key, r Result) {
	if s.opts.Observer != nil {
		s.opts.Observer.Called(client, op, key, r)
	}
}

// limiterDown turns a limiter failure into DEPENDENCY_UNAVAILABLE.
func limiterDown(err error) error {
	if apperr.CodeOf(err) != apperr.Internal {
		return err // already classified, e.g. pay.LimitsNotLoaded
	}
	if errors.Is(err, context.Canceled) {
		return apperr.Wrap(err, apperr.DependencyUnavailable, "the request was cancelled while waiting for the limiter")
	}
	return apperr.Wrap(err, apperr.DependencyUnavailable, "the channel limiter is unavailable").
		WithDetails(map[string]any{"dependency": "redis"})
}
