package pay

import (
	"context"
	"errors"
)

// priorOrder is the idempotency check of a payment: the order that already
// holds requestID, or nil when there is none. Pay makes it before the
// limiter, for every request, admitted or refused; docs/DESIGN.md ("The
// replay check comes before the limiter") says why it is not moved after the
// limiter, and why no cheaper existence filter replaces it:
//
//   - A refusal cannot tell that a requestId was never admitted (its
//     admission may have left every window, or be held by one window while
//     another, full one refuses), so a refused request needs the lookup
//     anyway: a retried admitted requestId must get its order, never a 429.
//   - Asked first, the limiter would record and count replays: a replay
//     past its window takes a slot (and freeing it again is only safe when
//     the stored order provably predates the check), and every replay would
//     be counted as an attempt in the limiter's metrics and reports.
//
// What the check costs is kept small instead: concurrent lookups share one
// SELECT (repo.OrdersOptions.BatchGets), and the payload's hash, which only
// a replay compares and only a claim stores, is not computed for a request
// that is refused (see Pay).
func (s *Service) priorOrder(ctx context.Context, requestID string) (*Order, error) {
	o, err := s.orders.Get(ctx, requestID)
	switch {
	case err == nil:
		return o, nil
	case errors.Is(err, ErrOrderNotFound):
		return nil, nil
	default:
		return nil, s.storeDown(err, "look up the requestId")
	}
}
