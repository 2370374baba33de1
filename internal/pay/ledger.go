package pay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"payserver/internal/apperr"
	"payserver/internal/ratelimit"
	"payserver/internal/retry"
)

// Ledger is the one owner of every limiter slot whose fate the pay flow
// could not carry out when it answered. DecideSlot decides each fate; the
// ledger keeps the slot until that fate is known and carried out:
//
//   - a claim to close: a payment answered 503 whose slot may be held (its
//     limiter answer was lost, or its claim could not be confirmed), or
//     whose NOT_SENT could not be recorded. Its requestId is first made to
//     belong to a final order: its own row, when one turns up PROCESSING
//     or UNKNOWN, is ended FAILED NOT_SENT; when none does within Grace
//     (the client did not retry), a FAILED NOT_SENT row is claimed for it,
//     so that no channel call can ever follow. Then each slot meets the
//     fate DecideSlot gives it against the order holding the requestId.
//   - a slot to watch: DecideSlot waits, because the order holding the
//     requestId is still in flight (a duplicate's, or a routed payment's
//     on another channel). It is read again until the fate is known.
//   - a fate to carry out: the release or the give-back the limiter
//     failed (its store unreachable, its breaker open), made again until
//     it answers.
//   - a lost acquire: the member of a limits API acquire answered 503
//     with its outcome unknown (KeepLostAcquire). It is released once its
//     grace has passed, unless the same member is acquired again first
//     (AcquiredAgain): the retry then owns the slot.
//
// Each entry is kept in one file in Dir (ledger_journal.go) before the
// call that handed it over returns, so that a kill of the process
// orphans none. Workers (Run, owned by Main) take the entries in the order
// they fall due, each on its own backoff on the injected clock.
//
// The ledger is bounded by refusing new payments, never by dropping an
// entry: while Max entries are kept, or while the journal cannot be
// written, Admitting answers DEPENDENCY_UNAVAILABLE and the pay flow
// refuses a payment before it takes a slot, so no new entry arises from
// it. An entry of a payment already past its admission, of the resolver
// or of a notification is always taken: their number is bounded by the
// requests and workers in flight. An entry leaves the ledger when its fate
// is carried out, or after GiveUpAfter, past the longest window there is,
// when its slot has freed itself.
type Ledger struct {
	orders  OrderStore
	limiter Limiter
	opts    LedgerOptions
	mu      sync.Mutex
	entries map[string]*entry
	seq     uint64
	size    atomic.Int64
	// unwritten counts the entries whose file could not be written
	// (entry.unwritten; l.mu); unjournaled is set while it is above 0:
	// new payments are refused, and the workers write those files again
	// on each pass, Admitting at most once a second.
	unwritten   int
	unjournaled atomic.Bool
	lastRewrite atomic.Int64 // Unix µs of Admitting's last rewrite
	// carryWaiting is set while a fate to carry out waits on its backoff
	// after the limiter failed it: the next release the limiter makes
	// brings them all forward (limiterAnswered).
	carryWaiting atomic.Bool
	// flight is the log of admissions in flight (ledger_inflight.go).
	flight inflightLog
	wake   chan struct{}
}

// LedgerOptions configures a Ledger. The zero value is usable: memory only,
// the defaults below.
type LedgerOptions struct {
	// Dir keeps each entry in a file, so that a restart does not forget
	// it. Empty: memory only.
	Dir string
	// Migrate names directories kept by earlier versions (lost answers,
	// owed releases): their files are read once by NewLedger, kept as
	// entries in Dir, and removed. A file that does not read is left in
	// place and logged.
	Migrate []string
	// Max is how many entries the ledger keeps before it refuses new
	// payments (Admitting). Default 8192.
	Max int
	// Workers carry out entries concurrently. Default 2.
	Workers int
	// Grace is how long a claim to close whose requestId no order holds
	// waits for its client's retry before a NOT_SENT row is claimed for
	// it. Default 30s.
	Grace time.Duration
	// GiveUpAfter is how long an entry is tried before it is left to its
	// windows' expiry. Default 32 days: past a calendar month and its
	// cut-off, the longest window a limit can have.
	GiveUpAfter time.Duration
	// Now and After are the clock; defaults time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Observer counts the payments refused because the ledger was full;
	// default none.
	Observer LedgerObserver
	Logger   *slog.Logger
}

// LedgerObserver is told of the ledger's refusals. It must not block.
type LedgerObserver interface {
	// LedgerRefused counts a payment refused before its admission because
	// the ledger was full or could not journal.
	LedgerRefused()
}

type nopLedgerObserver struct{}

func (nopLedgerObserver) LedgerRefused() {}

// phase is where an entry is in its slot's life.
type phase int

const (
	// phaseClose: the requestId must belong to a final order first.
	phaseClose phase = iota
	// phaseWatch: DecideSlot waits on the order holding the requestId.
	phaseWatch
	// phaseCarry: the fate is known; the limiter must carry it out.
	phaseCarry
	// phaseAcquire: a limits API acquire's answer was lost; its member is
	// released once notBefore has passed, unless it is acquired again.
	phaseAcquire
)

var phaseNames = [...]string{"close", "watch", "carry", "acquire"}

func (p phase) String() string { return phaseNames[p] }

// entry is one thing the ledger keeps: a claim to close and its slots, or
// one slot to watch or whose fate to carry out.
type entry struct {
	id    string
	phase phase
	at    time.Time // when the ledger took it
	// order: for phaseClose, the claim to end NOT_SENT (its OrderNo is the
	// row that may exist); for phaseWatch, the payment whose slot it is
	// (slotOf's mine), nil for the order's own slot.
	order *Order
	why   string // phaseClose: the NOT_SENT order's failure message
	holds []ratelimit.Hold
	// amountsOnly: phaseCarry gives the amounts back; else it releases.
	amountsOnly bool
	// notBefore: phaseAcquire releases its member from then on, the end of
	// its grace; acquiredAgain is set when the member was acquired again
	// while a worker had the entry (l.mu): it is then forgotten, not
	// released.
	notBefore     time.Time
	acquiredAgain bool

	due     time.Time
	backoff retry.Schedule
	busy    bool
	// unwritten is set while the entry's file could not be written.
	unwritten bool
	// seq numbers each keep of the entry's id, so that an entry kept
	// again while a worker carries out the earlier one is not forgotten
	// with it.
	seq uint64
}

// NewLedger returns a Ledger settling slots on limiter, reading and
// closing orders in orders, with the entries an earlier run kept in Dir
// (and Migrate) already taken; Run starts its workers. orders may be nil
// for a ledger that only carries out fates known when they are handed over
// (a slot that would wait is logged and left to its window).
func NewLedger(orders OrderStore, limiter Limiter, opts LedgerOptions) (*Ledger, error) {
	if limiter == nil {
		return nil, errors.New("pay: the ledger needs a limiter")
	}
	if opts.Max <= 0 {
		opts.Max = 8192
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.GiveUpAfter <= 0 {
		opts.GiveUpAfter = 32 * 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Observer == nil {
		opts.Observer = nopLedgerObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Ledger{orders: orders, limiter: limiter, opts: opts, entries: map[string]*entry{}, wake: make(chan struct{}, 1)}
	l.flight = inflightLog{path: filepath.Join(opts.Dir, inflightName), live: map[string][]byte{}}
	if err := l.recover(); err != nil {
		return nil, err
	}
	return l, nil
}

// Size is how many entries the ledger keeps now.
func (l *Ledger) Size() int { return int(l.size.Load()) }

// Sizes is how many entries are in each phase ("close", "watch",
// "carry", "acquire").
func (l *Ledger) Sizes() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, p := range phaseNames {
		out[p] = 0
	}
	for _, e := range l.entries {
		out[e.phase.String()]++
	}
	return out
}

// Admitting returns nil while the ledger can take the entries a new payment
// or acquire may leave, and DEPENDENCY_UNAVAILABLE (dependency "ledger")
// while it keeps Max entries or cannot journal them: the pay flow and the
// limits API ask it before taking a slot.
func (l *Ledger) Admitting() error {
	full := l.size.Load() >= int64(l.opts.Max)
	if !full && l.unjournaled.Load() {
		l.rewriteUnwritten()
	}
	if !full && !l.unjournaled.Load() {
		return nil
	}
	l.opts.Observer.LedgerRefused()
	why := "the slots of earlier requests could not be settled yet (the database or the limiter is failing)"
	if !full {
		why = "the ledger of unsettled slots cannot be written to disk"
	}
	return apperr.New(apperr.DependencyUnavailable, "new slots are refused for now: %s; retry later", why).
		WithDetails(map[string]any{"dependency": "ledger"})
}

// Settle gives the slot hold keeps for mine's payment the fate DecideSlot
// gives it against o, the order holding its requestId (mine nil: the slot
// is o's own; o nil: not known yet). A fate that waits, and one the
// limiter could not carry out now, is kept by the ledger, on disk before
// Settle returns. Releasing and giving back are idempotent, so settling
// twice (the owner and a notification) changes nothing more.
func (l *Ledger) Settle(ctx context.Context, hold ratelimit.Hold, mine, o *Order) Decision {
	s := slotOf(hold, mine, o)
	d := DecideSlot(s, o)
	switch d.Fate {
	case FateKeep:
		return d
	case FateWait:
		l.watch(hold, mine, o)
		return d
	}
	h, amountsOnly := where(hold, s, d.Where), d.Fate == FateGiveBackAmount
	if err := l.carry(ctx, h, amountsOnly); err != nil {
		l.carryWaiting.Store(true)
		l.add(&entry{id: carryID(h, amountsOnly), phase: phaseCarry, holds: []ratelimit.Hold{h}, amountsOnly: amountsOnly}, 0)
		l.opts.Logger.Info("a limiter slot could not be given back now; the ledger gives it back once the limiter answers",
			"key", h.Key.String(), "requestId", h.Member, "fate", d.Fate.String(), "where", d.Where.String(), "err", err)
	}
	return d
}

// watch keeps hold, mine's slot, until the order holding its requestId
// gives it a fate.
func (l *Ledger) watch(hold ratelimit.Hold, mine, o *Order) {
	if mine == nil {
		mine = o
	}
	if l.orders == nil || mine == nil {
		l.opts.Logger.Error("a slot whose fate waits could not be watched; it frees itself when its window passes",
			"key", hold.Key.String(), "requestId", hold.Member)
		return
	}
	l.add(&entry{id: newEntryID(), phase: phaseWatch, order: paymentOf(mine), holds: []ratelimit.Hold{hold}}, 0)
}

// closeClaim keeps o, a claim that may be committed and that no channel
// call followed, with the slots holds keep: its row is ended FAILED
// NOT_SENT with why once it reads back, or claimed so after Grace when it
// never does, and then the slots meet their fate. wait is how long before
// its first look: Grace for a payment whose client may retry first.
func (l *Ledger) closeClaim(o *Order, why string, wait time.Duration, holds ...ratelimit.Hold) {
	if l.orders == nil {
		l.opts.Logger.Error("a claim to close was not kept (no order store); its slots free themselves when their windows pass",
			"requestId", o.RequestID)
		return
	}
	l.add(&entry{id: newEntryID(), phase: phaseClose, order: paymentOf(o), why: why, holds: holds}, wait)
}

// AddLostAnswer keeps req, whose checks lost their answers (a timeout
// after the check may have reached the limiter's store, answered 503):
// holds are the slots they may have taken, each with the windows its lost
// call would have recorded it in. A client that retries with the same
// requestId is exact, and its order then owns the slots; one that does not
// is closed NOT_SENT after Grace, and only then are they released.
func (l *Ledger) AddLostAnswer(req PayRequest, holds ...ratelimit.Hold) {
	for _, h := range holds {
		if h.Member != req.RequestID {
			// Another request's slot: never released on this one's behalf.
			l.opts.Logger.Error("a lost answer named another request's slot; not settled", "requestId", req.RequestID, "member", h.Member)
			return
		}
	}
	now := l.opts.Now().UTC()
	o := &Order{
		OrderNo: newOrderNo(now), RequestID: req.RequestID, RequestHash: req.Hash(),
		BizType: req.BizType, Channel: req.Channel, MerchantID: req.MerchantID,
		Amount: req.Amount, Currency: req.Currency, Subject: req.Subject,
	}
	if o.Channel == "" && len(holds) > 0 {
		o.Channel = holds[0].Key.Channel
	}
	l.closeClaim(o, notSentLost, l.opts.Grace, holds...)
}

// KeepLostAcquire keeps h, the member of a limits API acquire whose
// limiter answer was lost, to be released once grace has passed, unless
// AcquiredAgain names it first. It is on disk (Dir) before it returns. The
// same member lost again starts its grace again. It is released from the
// member's records for h's amount only (OwnRecord): the lost call may have
// been refused for a record of another amount, the client's own earlier
// acquire, which stays.
func (l *Ledger) KeepLostAcquire(h ratelimit.Hold, grace time.Duration) {
	h = h.OwnRecord()
	grace = max(grace, 0)
	l.add(&entry{id: acquireID(h.Key, h.Member), phase: phaseAcquire, holds: []ratelimit.Hold{h},
		notBefore: l.opts.Now().Add(grace)}, max(grace, time.Nanosecond))
}

// AcquiredAgain forgets the lost acquire of member on key, if one is kept:
// the member was admitted again (the retry owns the slot) or released by
// its client. When a worker has the entry, it is forgotten instead of
// released, unless the release is already under way.
func (l *Ledger) AcquiredAgain(key ratelimit.Key, member string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[acquireID(key, member)]
	if !ok || e.phase != phaseAcquire {
		return
	}
	if e.busy {
		e.acquiredAgain = true
		return
	}
	l.drop(e)
}

// notSentLost is the failure message of a payment closed after its
// limiter answer was lost, or its claim failed, and it was not retried.
const notSentLost = "the payment was answered 503 (the limiter's answer was lost, or its order could not be written) and was not retried in time; it was closed without being sent, and nothing was charged"

// paymentOf is what an entry keeps of o: the fields a closed row and a
// slot's decision need.
func paymentOf(o *Order) *Order {
	return &Order{OrderNo: o.OrderNo, RequestID: o.RequestID, RequestHash: o.RequestHash, BizType: o.BizType, Channel: o.Channel,
		MerchantID: o.MerchantID, Amount: o.Amount, Currency: o.Currency, Subject: o.Subject, CreatedAt: o.CreatedAt}
}

// carry makes a release or a give-back of h, then counts h's requestId
// again if its order now says the channel paid (recountPaid).
func (l *Ledger) carry(ctx context.Context, h ratelimit.Hold, amountsOnly bool) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	var err error
	if amountsOnly {
		err = l.limiter.ReleaseAmount(cctx, h)
	} else {
		err = l.limiter.Release(cctx, h)
	}
	if err != nil {
		return err
	}
	l.limiterAnswered()
	return l.recountPaid(cctx, h)
}

// recountPaid counts h's member again, whatever the limits say, when the
// order holding it carries a channel's word that it paid on h's key
// (Resolver.discrepancy). The fate this release carried out was decided
// before; a word that came since counted the slot again, and the release
// may have undone that. Read after the release, the order tells: a word
// recorded before the read is counted here, one recorded after counts
// itself after this release. An error (the order could not be read, or
// not counted) keeps the fate to carry out: releasing again changes
// nothing, and the order is read again.
func (l *Ledger) recountPaid(ctx context.Context, h ratelimit.Hold) error {
	if l.orders == nil {
		return nil
	}
	o, err := l.orders.Get(ctx, h.Member)
	if errors.Is(err, ErrOrderNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pay: read the order after a release: %w", err)
	}
	d := o.Discrepancy
	if d == nil || d.Reported != string(StatusSucceeded) || d.Channel != h.Key.Channel || o.BizType != h.Key.BizType {
		return nil
	}
	c, err := l.limiter.Check(ctx, ratelimit.Request{Caller: LimiterCaller, Key: h.Key, Member: o.RequestID,
		Amount: o.Amount, Currency: o.Currency, Merchant: o.MerchantID, Regardless: true})
	if err != nil || c.Unknown || c.Source == ratelimit.SourceFailOpen {
		return fmt.Errorf("pay: count again the slot of a payment its channel reported paid: %w", cmp.Or(err, errNotCounted))
	}
	if !c.Allowed {
		l.opts.Logger.Warn("the slot of a payment a channel reported paid could not be counted again after a release",
			"requestId", o.RequestID, "key", h.Key.String(), "conflict", c.Conflict)
	}
	return nil
}

// errNotCounted is a count made regardless whose outcome is unknown, or
// that a failing store let through unrecorded.
var errNotCounted = errors.New("not recorded")

// limiterAnswered makes every fate to carry out that waits on its backoff
// due at once: the limiter that failed them answers again, and a slot
// given back seconds late is a slot a caller was refused meanwhile.
func (l *Ledger) limiterAnswered() {
	if !l.carryWaiting.CompareAndSwap(true, false) {
		return
	}
	now := l.opts.Now()
	l.mu.Lock()
	for _, e := range l.entries {
		if (e.phase == phaseCarry || e.phase == phaseAcquire) && !e.busy {
			e.due = e.dueFrom(now)
			e.backoff.Reset()
		}
	}
	l.mu.Unlock()
	l.signal()
}

// add keeps e, first looked at after wait (its backoff's first wait when
// zero): journaled, then in the map. An entry of an id already kept (a
// fate to carry out handed over again) is looked at again in its turn.
func (l *Ledger) add(e *entry, wait time.Duration) {
	now := l.opts.Now()
	e.at, e.backoff = now, workBackoff
	if wait <= 0 {
		wait = e.backoff.Wait()
	}
	e.due = now.Add(wait)
	l.mu.Lock()
	l.seq++
	if prev, ok := l.entries[e.id]; ok {
		prev.seq = l.seq
		if prev.phase == phaseAcquire {
			// Lost again: the grace starts again, and a release under
			// way is not the last (putBack, forget).
			prev.at, prev.notBefore, prev.acquiredAgain = now, e.notBefore, false
			l.journal(prev)
			if !prev.busy {
				prev.due = e.due
			}
		} else if !prev.busy && e.due.Before(prev.due) {
			prev.due = e.due
		}
		l.mu.Unlock()
		l.signal()
		return
	}
	e.seq = l.seq
	l.journal(e)
	l.entries[e.id] = e
	l.size.Add(1)
	l.mu.Unlock()
	l.signal()
}

func (l *Ledger) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run carries out entries until ctx ends, then returns once every worker
// has stopped. The entries still kept then are on disk (Dir) for the next
// run; in memory only, they are logged and left to their windows.
func (l *Ledger) Run(ctx context.Context) {
	wait := startWorkers(l.opts.Workers, func() { l.work(ctx) })
	<-ctx.Done()
	wait()
	if n := l.Size(); n > 0 && l.opts.Dir == "" {
		l.opts.Logger.Info("the ledger stopped with slots unsettled; they free themselves when their windows pass", "entries", n)
	}
}

// idle bounds a worker's wait when nothing is due, so that a wake taken
// by another worker delays no entry long.
const idle = time.Second

func (l *Ledger) work(ctx context.Context) {
	for {
		e, seq, wait := l.next()
		if e == nil {
			select {
			case <-ctx.Done():
				return
			case <-l.wake:
			case <-l.opts.After(wait):
			}
			continue
		}
		done := l.step(ctx, e)
		if ctx.Err() != nil && !done {
			l.putBack(e, seq, l.opts.Now())
			return
		}
		if done {
			l.forget(e, seq)
			continue
		}
		now := l.opts.Now()
		if now.Sub(e.at) > l.opts.GiveUpAfter {
			l.opts.Logger.Warn("a slot's fate could not be carried out in time; it frees itself when its window passes",
				"requestId", e.member(), "phase", e.phase.String(), "since", e.at)
			l.forget(e, seq)
			continue
		}
		l.putBack(e, seq, now.Add(e.backoff.Wait()))
	}
}

// next takes the entry due first, when it is due now, with its seq;
// otherwise it returns how long to wait.
func (l *Ledger) next() (*entry, uint64, time.Duration) {
	now := l.opts.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var first *entry
	for _, e := range l.entries {
		if !e.busy && (first == nil || e.due.Before(first.due)) {
			first = e
		}
	}
	if first == nil {
		return nil, 0, idle
	}
	if wait := first.due.Sub(now); wait > 0 {
		return nil, 0, min(wait, idle)
	}
	first.busy = true
	return first, first.seq, 0
}

// putBack makes e due at due again, or at once when it was kept again
// while a worker had it.
func (l *Ledger) putBack(e *entry, seq uint64, due time.Time) {
	l.mu.Lock()
	if e.phase == phaseCarry || e.phase == phaseAcquire {
		l.carryWaiting.Store(true)
	}
	if e.unwritten {
		l.journal(e)
	}
	e.busy = false
	e.due = due
	if e.seq != seq {
		e.due = l.opts.Now()
	}
	e.due = e.dueFrom(e.due)
	l.mu.Unlock()
}

// forget removes e, done or given up, and its file, unless it was kept
// again since seq (then it is looked at again at once).
func (l *Ledger) forget(e *entry, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.seq != seq {
		e.busy, e.due = false, e.dueFrom(l.opts.Now())
		return
	}
	l.drop(e)
}

// drop removes e and its file; l.mu is held.
func (l *Ledger) drop(e *entry) {
	delete(l.entries, e.id)
	l.size.Add(-1)
	if e.unwritten {
		e.unwritten = false
		l.countUnwritten(-1)
	} else {
		l.unjournal(e)
	}
}

// dueFrom is t, or the end of e's grace when that is later: a lost
// acquire is never released before it.
func (e *entry) dueFrom(t time.Time) time.Time {
	if e.phase == phaseAcquire && t.Before(e.notBefore) {
		return e.notBefore
	}
	return t
}

// member is the requestId e is about.
func (e *entry) member() string {
	if e.order != nil {
		return e.order.RequestID
	}
	if len(e.holds) > 0 {
		return e.holds[0].Member
	}
	return ""
}

// step looks at e once; done reports that its fate is carried out (or
// handed to new entries).
func (l *Ledger) step(ctx context.Context, e *entry) bool {
	switch e.phase {
	case phaseClose:
		return l.stepClose(ctx, e)
	case phaseWatch:
		return l.stepWatch(ctx, e)
	case phaseAcquire:
		return l.stepAcquire(ctx, e)
	}
	return l.carry(ctx, e.holds[0], e.amountsOnly) == nil
}

// stepAcquire releases e's member once its grace has passed, unless it
// was acquired again meanwhile.
func (l *Ledger) stepAcquire(ctx context.Context, e *entry) bool {
	l.mu.Lock()
	again, early := e.acquiredAgain, l.opts.Now().Before(e.notBefore)
	l.mu.Unlock()
	if again {
		return true
	}
	if early {
		return false
	}
	h := e.holds[0]
	if err := l.carry(ctx, h, false); err != nil {
		l.opts.Logger.Warn("the member of a lost acquire could not be released yet; the ledger tries again",
			"key", h.Key.String(), "member", h.Member, "err", err)
		return false
	}
	l.opts.Logger.Info("released the member of an acquire whose limiter answer was lost and that was not acquired again",
		"key", h.Key.String(), "member", h.Member)
	return true
}

// stepClose makes e's requestId belong to a final order, then settles
// e's slots against it.
func (l *Ledger) stepClose(ctx context.Context, e *entry) bool {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	claim := e.order
	got, err := l.orders.Get(gctx, claim.RequestID)
	switch {
	case errors.Is(err, ErrOrderNotFound):
		if l.opts.Now().Before(e.at.Add(l.opts.Grace)) {
			return false // its client may yet retry
		}
		now := l.opts.Now().UTC()
		n := *claim
		n.Status, n.FailureCode, n.FailureMessage = StatusFailed, FailureNotSent, e.why
		n.CreatedAt, n.UpdatedAt = now, now
		if err := l.orders.Create(gctx, &n); err != nil {
			return false // the next look reads what holds the requestId
		}
		l.opts.Logger.Info("a payment answered 503 was not retried: closed NOT_SENT, its slots settled",
			"requestId", n.RequestID, "bizType", n.BizType)
		l.settleAll(gctx, e.holds, nil, &n)
		return true
	case err != nil:
		return false
	}
	if got.OrderNo == claim.OrderNo && CheckFinishFrom(got) == nil {
		n := *got
		n.Status, n.FailureCode, n.FailureMessage = StatusFailed, FailureNotSent, e.why
		n.UpdatedAt = l.opts.Now().UTC()
		if err := l.orders.Finish(gctx, &n); err != nil {
			return false
		}
		l.opts.Logger.Warn("an abandoned claim was settled as NOT_SENT", "requestId", n.RequestID, "orderNo", n.OrderNo)
		l.settleAll(gctx, e.holds, nil, &n)
		return true
	}
	// Ours, already final (a write that answered an error was committed
	// after all), or another request's order: the slots meet its fate.
	mine := claim
	if got.OrderNo == claim.OrderNo {
		mine = nil
	}
	l.settleAll(gctx, e.holds, mine, got)
	return true
}

func (l *Ledger) settleAll(ctx context.Context, holds []ratelimit.Hold, mine, o *Order) {
	for _, h := range holds {
		l.Settle(ctx, h, mine, o)
	}
}

// stepWatch reads the order holding e's requestId and, once DecideSlot no
// longer waits, carries out the slot's fate; a fate the limiter fails
// turns e into one to carry out.
func (l *Ledger) stepWatch(ctx context.Context, e *entry) bool {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	got, err := l.orders.Get(gctx, e.order.RequestID)
	if err != nil {
		return false
	}
	hold := e.holds[0]
	s := slotOf(hold, e.order, got)
	d := DecideSlot(s, got)
	switch d.Fate {
	case FateWait:
		return false
	case FateKeep:
		return true
	}
	h, amountsOnly := where(hold, s, d.Where), d.Fate == FateGiveBackAmount
	if l.carry(gctx, h, amountsOnly) == nil {
		return true
	}
	l.mu.Lock()
	e.phase, e.holds, e.amountsOnly, e.order = phaseCarry, []ratelimit.Hold{h}, amountsOnly, nil
	l.journal(e)
	l.mu.Unlock()
	return false
}
