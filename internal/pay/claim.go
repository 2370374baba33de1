package pay

import (
	"context"
	"errors"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
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
	deadline := time.Now().Add(s.opts.ClaimTimeout)
	maybeCommitted := !errors.Is(claimErr, ErrNotCommitted)
	wait := 10 * time.Millisecond
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
		if time.Until(deadline) < wait {
			return claimUnknown, nil
		}
		time.Sleep(wait)
		wait = min(wait*2, 500*time.Millisecond)
	}
}

// claimFailed answers a claim that did not commit for certain, or could not
// be confirmed. The limiter slot is kept either way: a concurrent duplicate
// of this requestId (here or on another instance) may hold the same member
// and be calling the channel under it. A retry with the same requestId is
// admitted under that member without taking another slot.
func (s *Service) claimFailed(o *Order, fate claimFate, key ratelimit.Key, claimErr error) error {
	if fate == claimUnknown {
		// Our row may exist, PROCESSING, with nobody to send it: settle it
		// as NOT_SENT once the database answers, so it does not end UNKNOWN.
		go s.settleAbandoned(o, unconfirmedClaim, key)
	}
	s.log.Error("order store failed", "op", "claim the requestId", "requestId", o.RequestID,
		"mayBeCommitted", fate == claimUnknown, "err", claimErr)
	return apperr.Wrap(claimErr, apperr.DependencyUnavailable,
		"the order database is unavailable; the payment was not sent to the channel").
		WithDetails(map[string]any{"dependency": "database"})
}

// settleAbandoned ends an abandoned claim: if our row turns up (a commit the
// flow could not confirm), it is finished as FAILED NOT_SENT, which no
// channel call can follow, and only then is the limiter slot released. It
// looks until StaleAfter has passed and the store has answered that there
// is no such row; while the store fails it keeps trying, so that a row that
// shows up after a long outage (and that the stale sweeper may have marked
// UNKNOWN meanwhile: UNKNOWN -> NOT_SENT is allowed) still ends NOT_SENT. A
// row of another request, or none, is left alone and the slot kept.
//
// why is the failure message recorded; the slots of keys are released.
func (s *Service) settleAbandoned(o *Order, why string, keys ...ratelimit.Key) {
	deadline := time.Now().Add(s.opts.StaleAfter)
	wait := 50 * time.Millisecond
	for missing := false; time.Now().Before(deadline) || !missing; {
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		got, err := s.orders.Get(ctx, o.RequestID)
		missing = errors.Is(err, ErrOrderNotFound)
		if err == nil && (got.OrderNo != o.OrderNo || CheckFinishFrom(got) != nil) {
			// Another request's claim, or ours already final (a write that
			// answered an error was committed after all): the slots meet
			// that order's fate.
			cancel()
			for _, key := range keys {
				settleSlot(context.Background(), s.limiter, key, got, s.log)
			}
			return
		}
		if err == nil {
			n := *got
			n.Status, n.FailureCode = StatusFailed, FailureNotSent
			n.FailureMessage = why
			n.UpdatedAt = s.opts.Now().UTC()
			err = s.orders.Finish(ctx, &n)
			if err == nil {
				cancel()
				s.log.Warn("an abandoned claim was settled as NOT_SENT", "requestId", o.RequestID, "orderNo", o.OrderNo)
				for _, key := range keys {
					settleSlot(ctx, s.limiter, key, &n, s.log)
				}
				return
			}
		}
		cancel()
	}
	s.log.Warn("an abandoned claim was not found; its limiter slot frees itself when the window passes",
		"requestId", o.RequestID, "orderNo", o.OrderNo)
}
