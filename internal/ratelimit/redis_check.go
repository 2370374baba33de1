package ratelimit

import (
	"context"
	"errors"
	"time"
)

// The limiter's check on the shared store (Redis): the call under Timeout,
// its one retry when the outcome is unknown, and the copy of each answer
// kept for a later outage. What the limiter does when the store fails is in
// degraded.go.

// onRedis decides on the shared store. Under PolicyLocal, admissions decided
// in process during an outage that are still in their windows lower the
// limits asked of Redis, which does not hold them; and each Redis answer is
// kept for a later outage: admissions copied into the in-process sliding
// count windows, and the use of amount and calendar windows.
func (l *Limiter) onRedis(ctx context.Context, lim *limits, p plan, r Request, now time.Time, end *time.Time) (Decision, error) {
	asked, localOnly := p, []int64(nil)
	if l.opts.Policy == PolicyLocal && !p.shadow && l.local.mayHoldLocalOnly(now) {
		var refused *Decision
		if asked, localOnly, refused = l.lowerByLocalOnly(p, r.Key, now); refused != nil {
			l.breaker.Abandon()
			return *refused, nil
		}
	}
	res, unknown, err := l.check(ctx, asked.windows, r.Member, r.Amount)
	if errors.Is(err, errLostCall) {
		// Redis answered the retry: it is up, and the breaker hears so.
		// The first call's fate is unknown under every policy: never a
		// fail-open admission, never a degraded decision.
		*end = l.opts.Now()
		if l.breaker.Success() {
			l.log.Warn("limiter store answers again; back to shared windows", "key", r.Key.String())
		}
		d := p.decision(r.Key, res, SourceRedis)
		d.Allowed, d.Unknown = false, true
		return d, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			l.breaker.Abandon()
			if !unknown {
				return Decision{Key: r.Key}, ctx.Err()
			}
			// The caller gave up while its call was out: the call may
			// still admit the member, and only an unknown outcome (with
			// its Hold) tells the caller to keep the slot.
			*end = l.opts.Now()
			d := p.decision(r.Key, res, SourceRedis)
			d.Allowed, d.Unknown = false, true
			return d, nil
		}
		l.opts.Observer.StoreFailed(r.Key, err)
		if l.breaker.Failure() {
			l.log.Warn("limiter store failing; degraded decisions until it answers", "policy", string(l.opts.Policy), "key", r.Key.String(), "err", err)
		}
		if unknown {
			return l.unknownOutcome(p, r.Key)
		}
		return l.decideDegraded(lim, p, r)
	}
	*end = l.opts.Now()
	if l.breaker.Success() {
		l.log.Warn("limiter store answers again; back to shared windows", "key", r.Key.String())
	}
	if localOnly != nil {
		for i := range res.Counts {
			res.Counts[i] += localOnly[i]
		}
		res.Count = res.Counts[res.Window]
		// Redis was asked with limits lowered by the in-process use: an
		// amount above a lowered limit may still fit the real one later.
		if w := p.windows[res.Window]; res.ExceedsCap && w.Weight(r.Amount) <= w.Limit {
			res.ExceedsCap = false
		}
	}
	d := p.decision(r.Key, res, SourceRedis)
	if l.opts.Policy == PolicyLocal && !p.shadow {
		// Stamped after the answer: Redis admitted no later, so the copy
		// leaves its window no earlier than Redis's entry.
		if d.Allowed || p.hasBaseline {
			l.local.followRedis(p.windows, l.LocalShare(), r.Member, r.Amount, d.Allowed, res.Counts, *end)
		}
		l.local.noteLearned(asked.windows, res.Limits, *end)
	}
	return d, nil
}

// check asks the store under Timeout. A call that failed after it may have
// reached Redis has an unknown outcome: Redis may have admitted the member.
// It is asked once more, with the same member, under RetryTimeout: the
// script never counts a member twice, so an admission is exact either way.
// A refusal of the retry is not: it proves only that the retry was refused,
// and the first call, still on its way (another connection, a slow link),
// may reach Redis after it and admit the member once a slot frees. So a
// retry refused for a full window leaves the outcome unknown too
// (errLostCall); one refused for a conflict or an amount above the cap
// does not, as the first call meets the same refusal. A call that was out
// when ctx ended (its caller gave up) is not asked again; its outcome is
// unknown all the same. unknown reports that
// the outcome is still unknown after the retry.
func (l *Limiter) check(ctx context.Context, windows []KeyWindow, member string, amount int64) (res StoreResult, unknown bool, err error) {
	if err := ctx.Err(); err != nil {
		return StoreResult{}, false, err // nothing sent
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	res, err = l.store.Check(cctx, windows, member, amount)
	cancel()
	if err == nil || errors.Is(err, ErrNotSent) {
		return res, false, err
	}
	if ctx.Err() != nil {
		// The caller gave up while the call was out; no retry for it.
		return StoreResult{}, true, err
	}
	cctx, cancel = context.WithTimeout(ctx, l.opts.RetryTimeout)
	res, err = l.store.Check(cctx, windows, member, amount)
	cancel()
	if err == nil && !res.Allowed && !res.Conflict && !res.ExceedsCap {
		return res, true, errLostCall
	}
	return res, err != nil, err
}

// errLostCall is a check whose first call's answer was lost and whose
// retry was refused for a full window: the first call may still admit.
var errLostCall = errors.New("ratelimit: the first call's answer was lost and its retry was refused; the first may still be admitted")
