package decisionlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"payserver/internal/ratelimit"
)

// Defaults of Options.
const (
	DefaultBuffer     = 65536
	DefaultFlushEvery = time.Second
	DefaultRetention  = 168 * time.Hour
	// DefaultPruneBatch is how many rows one pruning statement deletes at
	// most: small, so that no statement holds the table long.
	DefaultPruneBatch = 5000
	// maxInsert bounds the rows of one INSERT.
	maxInsert = 1000
)

// Options configures a Log. The zero value of each field selects the
// documented default.
type Options struct {
	// Buffer is how many entries wait for the worker at most; one more is
	// dropped. Default DefaultBuffer.
	Buffer int
	// FlushEvery is the longest an entry waits in the buffer while the
	// worker runs. Default DefaultFlushEvery (1s).
	FlushEvery time.Duration
	// Retention is how long entries are kept. Default DefaultRetention.
	Retention time.Duration
	// PruneBatch bounds one pruning statement. Default DefaultPruneBatch.
	PruneBatch int
	// Dropped is called once per entry dropped because the buffer was
	// full (payserver_decision_log_dropped_total); nil counts nothing.
	Dropped func()
	Logger  *slog.Logger
	// Now is the clock of pruning and of the documents' application time,
	// and After the timer of Run's flushes; defaults time.Now and
	// time.After. Tests pass a fake clock.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Log is a ratelimit.HoldObserver that records every decision, release,
// give-back, and change the store made to learned limits, into its Store through a bounded buffer. The request path only
// appends to the buffer under a mutex; Run writes it out.
type Log struct {
	store Store
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	pending []Entry
	docs    map[string][]byte // documents applied, not yet saved
	kick    chan struct{}     // a full batch is waiting
}

var _ ratelimit.HoldObserver = (*Log)(nil)

// New returns a Log writing to store.
func New(store Store, opts Options) (*Log, error) {
	if store == nil {
		return nil, errors.New("decisionlog: nil store")
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = DefaultFlushEvery
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.PruneBatch <= 0 {
		opts.PruneBatch = DefaultPruneBatch
	}
	if opts.Dropped == nil {
		opts.Dropped = func() {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Log{store: store, opts: opts, log: opts.Logger, docs: map[string][]byte{}, kick: make(chan struct{}, 1)}, nil
}

// add appends e to the buffer, or drops and counts it when full.
func (l *Log) add(e Entry) {
	l.mu.Lock()
	if len(l.pending) >= l.opts.Buffer {
		l.mu.Unlock()
		l.opts.Dropped()
		return
	}
	l.pending = append(l.pending, e)
	full := len(l.pending) >= maxInsert
	l.mu.Unlock()
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// Decided implements ratelimit.Observer.
func (l *Log) Decided(d ratelimit.Decision, _ time.Duration) {
	l.add(Entry{
		At: d.DecidedAt, Kind: KindDecision, Key: d.Key, Member: d.Hold.Member, Merchant: d.RequestMerchant,
		Amount: d.RequestAmount, Currency: d.Currency, Outcome: outcomeOf(d), Source: d.Source, Version: d.LimitsVersion,
	})
}

// Released implements ratelimit.Observer; ReleasedHold records releases.
func (l *Log) Released(ratelimit.Key) {}

// StoreFailed implements ratelimit.Observer; the decision that follows is
// recorded with its source.
func (l *Log) StoreFailed(ratelimit.Key, error) {}

// ReleasedHold implements ratelimit.HoldObserver.
func (l *Log) ReleasedHold(h ratelimit.Hold, amountsOnly bool, at time.Time) {
	kind := KindRelease
	if amountsOnly {
		kind = KindGiveBack
	}
	l.add(Entry{At: time.UnixMicro(at.UnixMicro()), Kind: kind, Key: h.Key, Member: h.Member, Amount: h.Amount()})
}

// Unavailable implements ratelimit.HoldObserver.
func (l *Log) Unavailable(r ratelimit.Request, at time.Time) {
	l.add(Entry{
		At: time.UnixMicro(at.UnixMicro()), Kind: KindDecision, Key: r.Key, Member: r.Member, Merchant: r.Merchant,
		Amount: r.Amount, Currency: r.Currency, Outcome: Unavailable,
	})
}

// Throttled implements ratelimit.HoldObserver.
func (l *Log) Throttled(h ratelimit.Hold, retryAfter time.Duration, version string, at time.Time) {
	l.add(Entry{At: time.UnixMicro(at.UnixMicro()), Kind: KindThrottle, Key: h.Key, Member: h.Member, Amount: retryAfter.Microseconds(), Version: version})
}

// LearnedReset implements ratelimit.HoldObserver.
func (l *Log) LearnedReset(key ratelimit.Key, version string, at time.Time) {
	l.add(Entry{At: time.UnixMicro(at.UnixMicro()), Kind: KindReset, Key: key, Version: version})
}

// DocumentApplied keeps a limits document applied under version, for
// replays under the documents actually in force. It does not wait: the
// worker saves it.
func (l *Log) DocumentApplied(version string, content []byte) {
	if version == "" {
		return
	}
	l.mu.Lock()
	l.docs[version] = append([]byte(nil), content...)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Run writes the buffer at least every FlushEvery, and prunes entries past
// the retention once a minute, until ctx ends; it then writes what is left
// (under a short timeout of its own) and returns. Main starts it once.
func (l *Log) Run(ctx context.Context) {
	lastPrune := time.Time{}
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.Flush(fctx)
			cancel()
			return
		case <-l.opts.After(l.opts.FlushEvery):
		case <-l.kick:
		}
		l.Flush(ctx)
		if now := l.opts.Now(); now.Sub(lastPrune) >= time.Minute {
			lastPrune = now
			l.prune(ctx, now.Add(-l.opts.Retention))
		}
	}
}

// Flush writes every buffered entry and document now. A failed write is
// logged and its entries are lost (analytics, not money).
func (l *Log) Flush(ctx context.Context) {
	l.mu.Lock()
	batch, docs := l.pending, l.docs
	l.pending, l.docs = make([]Entry, 0, min(len(batch), maxInsert)), map[string][]byte{}
	l.mu.Unlock()
	for v, content := range docs {
		if err := l.store.SaveDocument(ctx, v, content, l.opts.Now()); err != nil {
			l.log.Warn("decision log: limits document not kept; replays of its decisions cannot check fidelity", "version", v, "err", err)
		}
	}
	for len(batch) > 0 {
		n := min(len(batch), maxInsert)
		if err := l.store.Insert(ctx, batch[:n]); err != nil {
			l.log.Warn("decision log: entries not written", "entries", len(batch), "err", err)
			return
		}
		batch = batch[n:]
	}
}

// prune deletes the entries older than before in batches of PruneBatch,
// until none is left or ctx ends.
func (l *Log) prune(ctx context.Context, before time.Time) {
	for ctx.Err() == nil {
		n, err := l.store.Prune(ctx, before, l.opts.PruneBatch)
		if err != nil {
			l.log.Warn("decision log: pruning failed (the serving user needs DELETE on decision_log)", "err", err)
			return
		}
		if n < l.opts.PruneBatch {
			return
		}
	}
}
