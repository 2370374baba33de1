// Package emulator is a channel gateway emulator for tests: it speaks the
// gateway protocol (api/channel-gateway.yaml, package gateway) for several
// channels at once, misbehaves on demand like a real channel on a bad day,
// and keeps its own durable ledger of every call it received, so a test
// can compare what payserver believes with what the channel saw.
//
// A gateway call (POST /{CODE}/pay, /query, /close) goes through these
// steps, each rolled afresh on every call with the channel's Behaviour at
// that moment:
//
//  1. pause: while the channel is paused the call waits for the end;
//  2. refuseRate: the connection is reset (RST) at once; not processed;
//  3. the signature is checked (401) and the body parsed (400);
//  4. latency: the call waits, whether or not its client is still there;
//  5. dropRate: not processed; the connection is held for holdMs (or until
//     the client gives up), then closed without an answer;
//  6. errorRate: answered 503; not processed;
//  7. the call is decided: a pay is replayed from the order's memory,
//     declined (ORDER_CLOSED) because the order was closed unprocessed,
//     THROTTLED (throttleCapacity), or processed (declineRate,
//     processingRate); a query answers from the order's memory (NOT_FOUND
//     for an order never processed, closed or not); a close closes the
//     order and says whether it had been processed. The ledger line (and
//     the order) is written, durably, before anything is sent;
//  8. lostAnswerRate: the decided answer is not sent; the connection is
//     held as for a drop, then closed;
//  9. the signed answer is sent.
//
// Every call received gets one ledger line; an order decided by a call is
// written in the same transaction. The emulator's memory of orders (their
// outcomes, whether they are closed) lives in the same file, so a
// restarted emulator replays as the old one would have.
package emulator

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"payserver/internal/channel/gateway"
)

// Config is what New needs.
type Config struct {
	// Channels are the codes served (ALIPAY, WECHAT, …): upper-case
	// letters, digits and underscores, each once.
	Channels []string
	// Keys are channels' own signing keys (gateway.Keys: the first signs
	// the channel's answers and notifications, a request signed under any
	// is accepted).
	Keys map[string]gateway.Keys
	// Secret is the one key, id DefaultKeyID, of every channel without
	// keys of its own.
	Secret []byte
	// NonceCacheSize bounds the nonces remembered against replay; 0 is
	// DefaultNonceCacheSize.
	NonceCacheSize int
	// Store is the ledger; the emulator does not close it.
	Store *Store
	// Patches change channels' DefaultBehaviour at start, in order.
	Patches []ChannelPatch
	// NotifyURL is payserver's base URL for notifications; empty sends
	// none.
	NotifyURL string
	// NotifyClient sends notifications; nil is a client with a 3 s timeout.
	NotifyClient *http.Client
	Logger       *slog.Logger
	// Seed seeds the rolls of the rates; 0 seeds them at random.
	Seed uint64
}

// DefaultKeyID is the id of Config.Secret's key.
const DefaultKeyID = "default"

// DefaultNonceCacheSize is the emulator's nonce cache size when
// Config.NonceCacheSize is 0: about 150 MB when full, room for 1,666
// requests a second over the 10 minutes a nonce is held.
const DefaultNonceCacheSize = 1_000_000

// Emulator serves the gateway protocol, the admin endpoint and the ledger
// (it is an http.Handler). Close stops its background work and releases
// calls that are waiting or held.
type Emulator struct {
	nonces   *gateway.NonceCache
	store    *Store
	log      *slog.Logger
	notifier *Notifier // nil: no notifications
	rand     *roller
	channels map[string]*channelState
	mux      *http.ServeMux

	// orderLocks serialise the decisions about one order (by hash).
	orderLocks [64]sync.Mutex

	stop      chan struct{}
	closeOnce sync.Once
}

// channelState is one channel's behaviour and its live state.
type channelState struct {
	code      string
	keys      atomic.Pointer[gateway.Keys]
	behaviour atomic.Pointer[Behaviour]
	adminMu   sync.Mutex // serialises admin changes (load, patch, store)
	pause     pause

	mu     sync.Mutex // guards window
	window window
}

// New checks cfg and returns an emulator, with its notifier started when
// cfg.NotifyURL is set.
func New(cfg Config) (*Emulator, error) {
	if cfg.Store == nil {
		return nil, errors.New("emulator: nil store")
	}
	if len(cfg.Channels) == 0 {
		return nil, errors.New("emulator: no channels")
	}
	e := &Emulator{
		nonces:   gateway.NewNonceCache(cmp.Or(cfg.NonceCacheSize, DefaultNonceCacheSize)),
		store:    cfg.Store,
		log:      cfg.Logger,
		rand:     newRoller(cfg.Seed),
		channels: map[string]*channelState{},
		stop:     make(chan struct{}),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	for _, code := range cfg.Channels {
		if !validCode(code) {
			return nil, fmt.Errorf("emulator: channel code %q: want upper-case letters, digits and _", code)
		}
		if _, dup := e.channels[code]; dup {
			return nil, fmt.Errorf("emulator: channel %s given twice", code)
		}
		ch := &channelState{code: code}
		b := DefaultBehaviour()
		ch.behaviour.Store(&b)
		e.channels[code] = ch
	}
	for _, p := range cfg.Patches {
		ch, ok := e.channels[p.Channel]
		if !ok {
			return nil, fmt.Errorf("emulator: behaviour for %s, which is not served", p.Channel)
		}
		if err := ch.apply(p.Patch, time.Now()); err != nil {
			return nil, fmt.Errorf("emulator: behaviour of %s: %w", p.Channel, err)
		}
	}
	for code := range cfg.Keys {
		if _, ok := e.channels[code]; !ok {
			return nil, fmt.Errorf("emulator: keys for %s, which is not served", code)
		}
	}
	for code := range e.channels {
		keys, own := cfg.Keys[code]
		if !own {
			if len(cfg.Secret) == 0 {
				return nil, fmt.Errorf("emulator: channel %s has no keys and there is no secret", code)
			}
			keys = gateway.Keys{{ID: DefaultKeyID, Secret: cfg.Secret}}
		}
		if err := e.SetKeys(code, keys); err != nil {
			return nil, err
		}
	}
	if cfg.NotifyURL != "" {
		n, err := NewNotifier(NotifierConfig{URL: cfg.NotifyURL, Key: e.signingKey, Client: cfg.NotifyClient, Logger: e.log}, e.rand)
		if err != nil {
			return nil, err
		}
		e.notifier = n
		e.notifyPending(time.Now())
	}
	e.mux = e.routes()
	return e, nil
}

// Channels returns the codes served, sorted.
func (e *Emulator) Channels() []string {
	codes := make([]string, 0, len(e.channels))
	for code := range e.channels {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	return codes
}

// Behaviour returns channel's current behaviour.
func (e *Emulator) Behaviour(channel string) (Behaviour, bool) {
	ch, ok := e.channels[channel]
	if !ok {
		return Behaviour{}, false
	}
	return *ch.behaviour.Load(), true
}

// SetKeys replaces channel's keys (gateway.Keys: the first signs, any
// verifies), as one step of a key's rotation: add the new key second, move
// it first, remove the old one.
func (e *Emulator) SetKeys(channel string, keys gateway.Keys) error {
	ch, ok := e.channels[channel]
	if !ok {
		return fmt.Errorf("emulator: no channel %s", channel)
	}
	if err := keys.Validate(); err != nil {
		return fmt.Errorf("emulator: keys of %s: %w", channel, err)
	}
	keys = keys.Clone()
	ch.keys.Store(&keys)
	return nil
}

// signingKey returns channel's first key; false for a channel not served.
func (e *Emulator) signingKey(channel string) (gateway.Key, bool) {
	ch, ok := e.channels[channel]
	if !ok {
		return gateway.Key{}, false
	}
	return (*ch.keys.Load())[0], true
}

// Notifier returns the notifier, nil when there is none.
func (e *Emulator) Notifier() *Notifier { return e.notifier }

// ServeHTTP implements http.Handler.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.mux.ServeHTTP(w, r) }

// Close ends pauses, latencies and holds at once (a waiting call is
// answered 503, a held one closed) and stops the notifier. Call it before
// shutting the HTTP server down, and close the Store after both.
func (e *Emulator) Close() error {
	var err error
	e.closeOnce.Do(func() {
		close(e.stop)
		if e.notifier != nil {
			err = e.notifier.Close()
		}
	})
	return err
}

// stopped reports whether Close was called.
func (e *Emulator) stopped() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// sleep waits d; false means Close came first.
func (e *Emulator) sleep(d time.Duration) bool {
	if d <= 0 {
		return !e.stopped()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.stop:
		return false
	}
}

// lockOrder locks the decisions about one order and returns the unlock.
func (e *Emulator) lockOrder(channel, orderNo string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(channel))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(orderNo))
	m := &e.orderLocks[h.Sum32()%uint32(len(e.orderLocks))]
	m.Lock()
	return m.Unlock
}

// notifyPending queues the notifications of payments still PROCESSING
// when the emulator starts (their reveal is in the future), for channels
// whose behaviour notifies.
func (e *Emulator) notifyPending(now time.Time) {
	for _, o := range e.store.Orders() {
		if ch, ok := e.channels[o.Channel]; ok && o.Processed() && !o.Revealed(now) {
			e.notify(ch.code, *ch.behaviour.Load(), o)
		}
	}
}

// notify queues the notification of o's final outcome, if b notifies.
func (e *Emulator) notify(channel string, b Behaviour, o Order) {
	if e.notifier == nil || !b.Notify || !o.Processed() {
		return
	}
	e.notifier.Send(channel, o.Final(), NotifyOptions{
		Due:        o.RevealAt,
		Delay:      b.NotifyDelay,
		Duplicates: b.NotifyDuplicates,
		Reorder:    b.NotifyReorder,
		Retries:    b.NotifyRetries,
	})
}

// apply changes the channel's behaviour by p (and its pause), or leaves
// it as it was when p is refused.
func (ch *channelState) apply(p Patch, now time.Time) error {
	ch.adminMu.Lock()
	defer ch.adminMu.Unlock()
	b, err := ch.behaviour.Load().With(p)
	if err != nil {
		return err
	}
	if p.Pause != nil {
		if *p.Pause < 0 || *p.Pause > time.Duration(maxMs)*time.Millisecond {
			return &FieldError{Field: "pauseMs", Err: fmt.Errorf("%v outside [0, 1h]", *p.Pause)}
		}
		ch.pause.set(now.Add(*p.Pause))
	}
	ch.behaviour.Store(&b)
	return nil
}

// admit takes a slot in the channel's throttle window for a payment
// processed at now, or says how long until one frees.
func (ch *channelState) admit(now time.Time, b Behaviour) (bool, time.Duration) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.window.admit(now, b.ThrottleCapacity, b.ThrottleWindow)
}

// forget gives back the slot taken at t.
func (ch *channelState) forget(t time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.window.forget(t)
}

// validCode reports whether code is a channel code: an upper-case letter,
// then up to 31 upper-case letters, digits or underscores.
func validCode(code string) bool {
	if len(code) == 0 || len(code) > 32 || code[0] < 'A' || code[0] > 'Z' {
		return false
	}
	for _, c := range code {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// roller rolls the rates; safe for concurrent use.
type roller struct {
	mu sync.Mutex
	r  *mrand.Rand
}

func newRoller(seed uint64) *roller {
	if seed == 0 {
		seed = mrand.Uint64()
	}
	return &roller{r: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// float returns a number in [0, 1).
func (r *roller) float() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

// hit reports true with probability rate: never for 0, always for 1.
func (r *roller) hit(rate float64) bool {
	if rate <= 0 {
		return false
	}
	return rate >= 1 || r.float() < rate
}
