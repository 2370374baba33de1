package pay

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"payserver/internal/ratelimit"
)

// Settler settles the limiter slots whose fate a payment's flow could not
// learn before it answered: the claim it could not confirm (settled as
// NOT_SENT once its row turns up, then released), and the slot a duplicate
// took on a channel whose order was still PROCESSING elsewhere (released
// once that order is final there). It is the pay flow's only background
// work for a request: a bounded queue, a fixed number of workers
// (startWorkers), the injected clock, started and stopped by Run. The bound
// is on the jobs alive (queued or in a worker's hands), so a job a worker
// puts back for its next look always fits: only a new job is refused when
// Queue are alive. A refused job is counted (SettlerObserver.Dropped) and
// logged: its slots then free themselves when their windows pass, the
// documented fallback.
type Settler struct {
	orders  OrderStore
	limiter Limiter
	opts    SettlerOptions
	queue   chan settleJob
	alive   atomic.Int64 // jobs queued or being worked on, at most Queue
	dropped atomic.Int64
}

// SettlerObserver is told of the jobs a full queue dropped.
type SettlerObserver interface {
	SettleDropped()
}

type nopSettlerObserver struct{}

func (nopSettlerObserver) SettleDropped() {}

// SettlerOptions tunes a Settler. Zero values select the defaults.
type SettlerOptions struct {
	// Workers settle jobs concurrently. Default 2.
	Workers int
	// Queue bounds the jobs waiting. Default 4096.
	Queue int
	// Patience is how long a slot is watched for its order's fate; a
	// claim whose row may yet appear is watched past it for as long as
	// the database fails. Default DefaultStaleAfter(0).
	Patience time.Duration
	// Now and After are the clock; defaults time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Observer counts drops; default none.
	Observer SettlerObserver
	Logger   *slog.Logger
}

// settleJob is one slot (or the slots of one abandoned claim) waiting for
// its order's fate.
type settleJob struct {
	requestID string
	// abandoned, when set, is our own claim that may have committed: its
	// row is finished FAILED NOT_SENT with why when it turns up PROCESSING
	// (or UNKNOWN: the sweeper may have marked it).
	abandoned *Order
	why       string
	// mine, when watching, is the payment whose slots holds are: an
	// attempt that lost its claim to the order it watches.
	mine     *Order
	holds    []ratelimit.Hold
	deadline time.Time
	due      time.Time
	backoff  backoff
}

// NewSettler returns a Settler of orders' slots on limiter; Run starts it.
func NewSettler(orders OrderStore, limiter Limiter, opts SettlerOptions) *Settler {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Queue <= 0 {
		opts.Queue = 4096
	}
	if opts.Patience <= 0 {
		opts.Patience = DefaultStaleAfter(0)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Observer == nil {
		opts.Observer = nopSettlerObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Settler{orders: orders, limiter: limiter, opts: opts, queue: make(chan settleJob, opts.Queue)}
}

// Run settles jobs until ctx ends, then returns once every worker has
// stopped. Jobs still queued then are left to their windows' expiry.
func (s *Settler) Run(ctx context.Context) {
	wait := startWorkers(s.opts.Workers, func() { s.work(ctx) })
	<-ctx.Done()
	wait()
	if n := len(s.queue); n > 0 {
		s.opts.Logger.Info("settler stopped with slots still waiting; they free themselves when their windows pass", "waiting", n)
	}
}

// Dropped is how many jobs a full queue dropped since the start.
func (s *Settler) Dropped() int64 { return s.dropped.Load() }

// settleClaimLater and releaseWhenFinal do nothing on a nil Settler (a
// Service built without one): those slots free themselves when their
// windows pass.

// settleClaimLater watches o, our claim that may have committed, and
// settles it as NOT_SENT (why) when its row turns up, then the slots.
func (s *Settler) settleClaimLater(o *Order, why string, holds ...ratelimit.Hold) {
	if s == nil {
		return
	}
	s.add(settleJob{requestID: o.RequestID, abandoned: o, why: why, holds: holds})
}

// releaseWhenFinal watches the order holding mine's requestId and settles
// hold, mine's slot, when its fate is known (DecideSlot no longer waits).
func (s *Settler) releaseWhenFinal(mine *Order, hold ratelimit.Hold) {
	if s == nil {
		return
	}
	s.add(settleJob{requestID: mine.RequestID, mine: mine, holds: []ratelimit.Hold{hold}})
}

// add queues a new job, unless Queue jobs are alive.
func (s *Settler) add(j settleJob) {
	if s.alive.Add(1) > int64(cap(s.queue)) {
		s.alive.Add(-1)
		s.dropped.Add(1)
		s.opts.Observer.SettleDropped()
		s.opts.Logger.Warn("settler queue full; a slot is left to free itself when its window passes",
			"requestId", j.requestID, "queue", cap(s.queue))
		return
	}
	now := s.opts.Now()
	j.deadline = now.Add(s.opts.Patience)
	j.backoff = workBackoff
	j.due = now.Add(j.backoff.wait())
	s.queue <- j // alive ≤ cap: there is room
}

func (s *Settler) work(ctx context.Context) {
	for {
		var j settleJob
		select {
		case <-ctx.Done():
			return
		case j = <-s.queue:
		}
		if wait := j.due.Sub(s.opts.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.opts.After(wait):
			}
		}
		done, missing := s.attempt(ctx, j)
		if done {
			s.alive.Add(-1)
			continue
		}
		now := s.opts.Now()
		if now.After(j.deadline) && (j.abandoned == nil || missing) {
			// Past its patience, and no row of ours can still appear
			// (the store answered that there is none), or only watching.
			s.alive.Add(-1)
			s.opts.Logger.Warn("a slot's order did not settle in time; it frees itself when its window passes",
				"requestId", j.requestID, "abandonedClaim", j.abandoned != nil)
			continue
		}
		j.due = now.Add(j.backoff.wait())
		s.queue <- j // still alive, so it fits
	}
}

// attempt reads the job's order once and settles what it can. missing
// reports that the store answered that no such order exists.
func (s *Settler) attempt(ctx context.Context, j settleJob) (done, missing bool) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	got, err := s.orders.Get(gctx, j.requestID)
	if err != nil {
		return false, errors.Is(err, ErrOrderNotFound)
	}
	o := j.abandoned
	if o == nil || got.OrderNo != o.OrderNo || CheckFinishFrom(got) != nil {
		// Watching, another request's claim, or ours already final (a
		// write that answered an error was committed after all): the
		// slots meet that order's fate.
		if o == nil && DecideSlot(slotOf(j.holds[0], j.mine, got), got).Fate == FateWait {
			return false, false
		}
		s.settle(gctx, j.mine, got, j.holds)
		return true, false
	}
	n := *got
	n.Status, n.FailureCode, n.FailureMessage = StatusFailed, FailureNotSent, j.why
	n.UpdatedAt = s.opts.Now().UTC()
	if err := s.orders.Finish(gctx, &n); err != nil {
		return false, false
	}
	s.opts.Logger.Warn("an abandoned claim was settled as NOT_SENT", "requestId", o.RequestID, "orderNo", o.OrderNo)
	s.settle(gctx, nil, &n, j.holds)
	return true, false
}

func (s *Settler) settle(ctx context.Context, mine, o *Order, holds []ratelimit.Hold) {
	for _, h := range holds {
		settleSlot(ctx, s.limiter, h, mine, o, s.opts.Logger)
	}
}

// DefaultStaleAfter is the age past which a PROCESSING order is stale
// when none is configured: the channel timeout (default 5s) and a minute.
func DefaultStaleAfter(channelTimeout time.Duration) time.Duration {
	if channelTimeout <= 0 {
		channelTimeout = 5 * time.Second
	}
	return channelTimeout + time.Minute
}
