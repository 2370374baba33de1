package pay

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"payserver/internal/ratelimit"
)

// LostAnswers settles payments whose limiter answer was lost (a timeout
// after the check may have reached Redis, answered 503): the check may have
// recorded the requestId in its windows after all. A client that retries
// with the same requestId is exact (never counted twice), and its order
// then owns the slot. One that never retries would leave the slot held
// until its window passes: a day, for a calendar window. So, after Grace,
// a lost answer with no order is closed: an order FAILED NOT_SENT is
// claimed for its requestId (so no channel call can ever follow for it; a
// later retry is answered that outcome), and only then is its slot
// released, retried until the limiter answers again. When an order was
// claimed meanwhile, it owns the slot and nothing is done.
//
// Run is the one worker; Main starts it and stops it with its context. A
// full queue drops (Dropped counts it): the slot then frees itself when its
// window passes, the documented fallback.
type LostAnswers struct {
	orders  OrderStore
	limiter Limiter
	opts    LostAnswersOptions
	queue   chan lostAnswer
	dropped atomic.Int64
}

// LostAnswersOptions configures LostAnswers. The zero value is usable.
type LostAnswersOptions struct {
	// Grace is how long a lost answer waits for its client's retry before
	// it is closed. Default 30s.
	Grace time.Duration
	// Queue bounds the lost answers waiting. Default 1024.
	Queue int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Dir, when set, keeps each lost answer waiting for its grace in a
	// file there, so that a restart does not forget it
	// (lost_answers_journal.go). Empty: memory only.
	Dir string
	// Settler, when set, watches a slot whose fate waits on an order still
	// in flight (its requestId claimed by another request), so that one
	// such lost answer does not hold up the others. Nil: the lost answer
	// itself waits for it.
	Settler *Settler
	Logger  *slog.Logger
}

type lostAnswer struct {
	req   PayRequest
	holds []ratelimit.Hold
	at    time.Time
}

// NewLostAnswers returns a LostAnswers over orders and limiter.
func NewLostAnswers(orders OrderStore, limiter Limiter, opts LostAnswersOptions) (*LostAnswers, error) {
	if orders == nil || limiter == nil {
		return nil, errors.New("pay: lost answers need an order store and a limiter")
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &LostAnswers{orders: orders, limiter: limiter, opts: opts, queue: make(chan lostAnswer, opts.Queue)}, nil
}

// Add queues req, whose checks lost their answers: holds are the slots
// they may have taken (each with the windows its lost call would have
// recorded it in). It never blocks.
func (l *LostAnswers) Add(req PayRequest, holds ...ratelimit.Hold) {
	for _, h := range holds {
		if h.Member != req.RequestID {
			// Another request's slot: never released on this one's behalf.
			l.opts.Logger.Error("a lost answer named another request's slot; not settled", "requestId", req.RequestID, "member", h.Member)
			return
		}
	}
	a := lostAnswer{req: req, holds: holds, at: l.opts.Now()}
	select {
	case l.queue <- a:
		l.keep(a)
	default:
		l.dropped.Add(1)
	}
}

// Dropped is how many lost answers a full queue dropped.
func (l *LostAnswers) Dropped() int64 { return l.dropped.Load() }

// Run settles lost answers in arrival order until ctx ends, starting with
// those an earlier run kept (Dir).
func (l *LostAnswers) Run(ctx context.Context) {
	l.recover()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-l.queue:
			if !sleepCtx(ctx, a.at.Add(l.opts.Grace).Sub(l.opts.Now())) {
				return
			}
			giveUp := l.opts.Now().Add(giveUpAfter)
			for b := workBackoff; ; {
				err := l.settle(ctx, a)
				if err == nil {
					l.forget(a)
					break
				}
				if l.opts.Now().After(giveUp) {
					// One entry must not hold the queue for ever: its slot
					// frees itself when its window passes.
					l.opts.Logger.Warn("a lost limiter answer could not be settled; its slot frees itself when its window passes",
						"requestId", a.req.RequestID, "err", err)
					l.forget(a)
					break
				}
				l.opts.Logger.Debug("a lost limiter answer could not be settled yet; retrying", "requestId", a.req.RequestID, "err", err)
				if !sleepCtx(ctx, b.wait()) {
					return
				}
			}
		}
	}
}

// errFateNotKnown is a lost answer's settle waiting for the order that
// owns its requestId to end.
var errFateNotKnown = errors.New("pay: the order owning the requestId is still in flight")

// giveUpAfter bounds how long one lost answer is retried.
const giveUpAfter = 5 * time.Minute

// notSentLost is the failure message of a payment closed after its
// limiter answer was lost and it was not retried.
const notSentLost = "the payment was answered 503 (the limiter's answer was lost, or its order could not be written) and was not retried in time; it was closed without being sent, and nothing was charged"

// settle closes a, unless an order owns its requestId, and releases its
// slots. An error means: try again later.
func (l *LostAnswers) settle(ctx context.Context, a lostAnswer) error {
	now := l.opts.Now().UTC()
	r := a.req
	o := &Order{
		OrderNo: newOrderNo(now), RequestID: r.RequestID, RequestHash: r.Hash(),
		BizType: r.BizType, Channel: r.Channel, MerchantID: r.MerchantID,
		Amount: r.Amount, Currency: r.Currency, Subject: r.Subject,
		Status: StatusFailed, FailureCode: FailureNotSent, FailureMessage: notSentLost,
		CreatedAt: now, UpdatedAt: now,
	}
	if o.Channel == "" && len(a.holds) > 0 {
		o.Channel = a.holds[0].Key.Channel
	}
	err := l.orders.Create(ctx, o)
	if err != nil {
		// Ours if an earlier attempt was written after all; else another
		// request holds the requestId and its order owns the slot.
		got, gerr := l.orders.Get(ctx, r.RequestID)
		if gerr != nil {
			if errors.Is(gerr, ErrOrderNotFound) {
				return err
			}
			return gerr
		}
		if got.Status != StatusFailed || got.FailureCode != FailureNotSent || got.FailureMessage != notSentLost {
			// Another request's order owns the requestId: each slot the
			// lost check may have taken meets that order's fate (released
			// on a channel it did not end on). While that order is in
			// flight the fate is not known yet: the lost answer waits for
			// it, or the slot of a call that can no longer happen would be
			// held by nobody.
			mine := &Order{RequestID: r.RequestID, Amount: r.Amount, Currency: r.Currency} // claimed no order
			for _, h := range a.holds {
				if DecideSlot(slotOf(h, mine, got), got).Fate == FateWait && l.opts.Settler == nil {
					return errFateNotKnown
				}
			}
			for _, h := range a.holds {
				if d := settleSlot(ctx, l.limiter, h, mine, got, l.opts.Logger); d.Fate == FateWait {
					l.opts.Settler.releaseWhenFinal(mine, h)
				}
			}
			return nil
		}
	}
	for _, h := range a.holds {
		// The lost call's windows, whatever the limits say now (a day
		// window whose document changed in the grace is still freed).
		if err := l.limiter.Release(ctx, h); err != nil {
			return err
		}
	}
	l.opts.Logger.Info("a payment whose limiter answer was lost was not retried: closed NOT_SENT and its slot released",
		"requestId", r.RequestID, "bizType", r.BizType)
	return nil
}

// sleepCtx sleeps d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
