package pay

import (
	"context"
	"errors"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
	"payserver/internal/retry"
)

// unconfirmedClaim is the failure message of a claim settled as NOT_SENT
// because the database did not confirm it in time.
const unconfirmedClaim = "the payment was abandoned before the channel was called: the order database did not confirm the claim in time; nothing was charged"

// claimFate is what became of a claim whose INSERT did not answer nil.
type claimFate int

const (
	// claimOurs: our row (our OrderNo) is committed; the payment goes on.
	claimOurs claimFate = iota
	// claimTheirs: a concurrent duplicate's row holds the requestId. It
	// holds the same limiter member, so nothing is released.
	claimTheirs
	// claimNotMade: no attempt of ours was committed, and none can be later
	// (every one failed with ErrNotCommitted). Nothing was sent.
	claimNotMade
	// claimUnknown: the database could not be asked; one of our attempts
	// may still be committed. Nothing was sent.
	claimUnknown
)

// claim writes o's row, the claim of its requestId, for a pinned payment
// and a routed one alike (a pinned payment is a route of one candidate).
// won is true when the row is ours and the payment goes on; otherwise
// answer and err are what the request answers: the outcome of the
// duplicate that won the claim (lostClaim), or the database's failure
// (claimFailed). The claim is detached from the caller's cancellation, as
// the channel call is: a client leaving mid-claim must not cut a claim off
// halfway (a batched INSERT outlives any one caller).
func (s *Service) claim(ctx context.Context, req PayRequest, o *Order) (won bool, answer *Order, err error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ClaimTimeout)
	err = s.orders.Create(cctx, o)
	cancel()
	if err == nil {
		return true, nil, nil
	}
	fate := claimTheirs
	if !errors.Is(err, ErrDuplicateOrder) {
		// The INSERT may have been committed although it answered an
		// error (a lost connection, a deadline): read the row back.
		fate, _ = s.resolveClaim(ctx, o, err)
	}
	switch fate {
	case claimOurs:
		return true, nil, nil
	case claimTheirs:
		// A concurrent duplicate won the claim. On this channel it holds
		// the same limiter member (the requestId). Its order may be on
		// another channel (routed, or pinned elsewhere): then our slot
		// here is released once that order is final (lostClaim).
		answer, err = s.lostClaim(ctx, o, holdFor(ratelimit.Key{BizType: o.BizType, Channel: o.Channel}, o))
		return false, answer, err
	default:
		return false, nil, s.claimFailed(req, o, fate, err)
	}
}

// resolveClaim finds out, after Create failed with claimErr, whether o's
// claim is committed. It reads the row back, and when there is none it
// claims again with the same row: the requestId is unique, so the second
// INSERT either commits (the first never will), or finds the first one's
// row (ErrDuplicateOrder, then read back), waiting on the database's lock
// while an insert of the same requestId is still in flight. It retries
// until ClaimTimeout has passed, and returns the order holding the
// requestId for claimTheirs.
func (s *Service) resolveClaim(ctx context.Context, o *Order, claimErr error) (claimFate, *Order) {
	base := context.WithoutCancel(ctx)
	deadline := s.opts.Now().Add(s.opts.ClaimTimeout)
	maybeCommitted := !errors.Is(claimErr, ErrNotCommitted)
	b := requestBackoff
	for {
		rctx, cancel := context.WithDeadline(base, deadline)
		got, err := s.orders.Get(rctx, o.RequestID)
		if errors.Is(err, ErrOrderNotFound) {
			err = s.orders.Create(rctx, o)
			switch {
			case err == nil:
				cancel()
				return claimOurs, nil
			case errors.Is(err, ErrDuplicateOrder):
				got, err = s.orders.Get(rctx, o.RequestID)
			case !errors.Is(err, ErrNotCommitted):
				maybeCommitted = true
			}
		}
		cancel()
		if err == nil {
			if got.OrderNo == o.OrderNo {
				return claimOurs, nil
			}
			return claimTheirs, got
		}
		if !maybeCommitted {
			// Nothing of ours can appear later, and the database does not
			// answer: there is nothing to wait for.
			return claimNotMade, nil
		}
		wait := b.Wait()
		if deadline.Sub(s.opts.Now()) < wait {
			return claimUnknown, nil
		}
		retry.Sleep(base, wait)
	}
}

// claimFailed answers a claim that did not commit for certain, or could not
// be confirmed. The limiter slot is not released now: a concurrent
// duplicate of this requestId (here or on another instance) may hold the
// same member and be calling the channel under it, and a retry with the
// same requestId is admitted under that member without taking another
// slot. It is handed to the ledger, as a 503 whose slot may be held: a
// payment not retried within the grace is closed FAILED NOT_SENT (which
// blocks any later claim of the requestId) and only then is its slot
// released; one retried in time owns it. A day window would otherwise
// keep the slot of every refused claim until the day ended.
func (s *Service) claimFailed(req PayRequest, o *Order, fate claimFate, claimErr error) error {
	hold := holdFor(ratelimit.Key{BizType: o.BizType, Channel: o.Channel}, o)
	if fate == claimUnknown {
		// Our row may exist, PROCESSING, with nobody to send it: the
		// ledger ends it NOT_SENT once the database answers, so it does
		// not end UNKNOWN; a row that never turns up is claimed NOT_SENT
		// after the grace, unless the client retried.
		s.ledger.closeClaim(o, unconfirmedClaim, 0, hold)
	} else {
		s.ledger.closeClaim(o, notSentLost, s.ledger.opts.Grace, hold)
	}
	s.log.Error("order store failed", "op", "claim the requestId", "requestId", o.RequestID,
		"mayBeCommitted", fate == claimUnknown, "err", claimErr)
	return apperr.Wrap(claimErr, apperr.DependencyUnavailable,
		"the order database is unavailable; the payment was not sent to the channel").
		WithDetails(map[string]any{"dependency": "database"})
}
