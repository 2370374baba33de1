package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"payserver/internal/retry"
)

// The windows each key has had. A hold whose windows are unknown (an
// acquisition of the limits API released by its requestId) is released
// from the windows the limits give its key now and gave it before; but an
// instance knows only the documents it loaded since it started, and
// remembers one before the one in force. An acquisition made two documents
// before its release, or before the releasing instance (re)started, would
// stay in the calendar windows of its document (a zone, a cut-off, a
// currency name the window), counted to the end of the period while the
// release answered that it was freed. So a store shared by
// the instances keeps, beside the windows, the windows each key's
// documents gave it and when they were last in force (WindowRegistry):
// every instance registers the document it loads and the one it replaces,
// and a release with unknown windows reads them back.

// registeredWindows is what a document gives each of its keys to release
// from (releaseWindows), by key: every key with a rule or a schedule, and
// every bizType a reservation names (its own use of the reservation).
func registeredWindows(cfg *Config, now time.Time, into map[Key][]KeyWindow) {
	if cfg == nil {
		return
	}
	keys := make(map[Key]bool, len(cfg.Rules))
	for k, r := range cfg.Rules {
		keys[k] = true
		reserved(k, r, keys)
	}
	for _, sc := range cfg.Schedules {
		keys[sc.Key] = true
		reserved(sc.Key, sc.Rule, keys)
	}
	for k := range keys {
		into[k] = unionWindows(into[k], releaseWindows(cfg, k, now, false, NoMerchant))
	}
}

// reserved adds to keys the key of each bizType a reservation of wide's
// rule names.
func reserved(wide Key, r Rule, keys map[Key]bool) {
	if !wide.IsChannelWide() {
		return
	}
	for _, names := range r.Reserve {
		for n := range names {
			keys[Key{BizType: n, Channel: wide.Channel}] = true
		}
	}
}

// registration is what the limiter has still to register in its store:
// the windows of each document set (SetConfig) and of the one it replaced,
// by key, merged until RunWindowRegistry registers them.
type registration struct {
	mu      sync.Mutex
	pending map[Key][]KeyWindow
	wake    chan struct{}
}

// registryBackoff is the wait between two tries of a registration while
// the store fails.
var registryBackoff = retry.Schedule{First: 100 * time.Millisecond, Most: 5 * time.Second}

// queue adds the windows of prev (last in force now) and of cfg (in force
// from now) to what is to register, and wakes RunWindowRegistry.
func (r *registration) queue(prev, cfg *Config, now time.Time) {
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[Key][]KeyWindow{}
	}
	registeredWindows(prev, now, r.pending)
	registeredWindows(cfg, now, r.pending)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take returns what is to register, and forgets it.
func (r *registration) take() map[Key][]KeyWindow {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pending
	r.pending = nil
	return out
}

// putBack keeps byKey, which could not be registered, to register again.
func (r *registration) putBack(byKey map[Key][]KeyWindow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[Key][]KeyWindow{}
	}
	for k, ws := range byKey {
		r.pending[k] = unionWindows(r.pending[k], ws)
	}
}

// RunWindowRegistry registers in the shared store the windows of each
// limits document set and of the one it replaced (WindowRegistry), trying
// again on its retry schedule while the store fails, until ctx ends. Each
// try records the time it is made: later than the windows were last in
// force, so a longer retention, never a shorter one. Main runs it; with a
// store that keeps no registry it returns at once.
func (l *Limiter) RunWindowRegistry(ctx context.Context) {
	reg, ok := l.store.(WindowRegistry)
	if !ok {
		return
	}
	b := registryBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.reg.wake:
		}
		for byKey := l.reg.take(); len(byKey) > 0; byKey = l.reg.take() {
			cctx, cancel := context.WithTimeout(ctx, 10*l.opts.Timeout)
			err := reg.RegisterWindows(cctx, byKey, l.opts.Now())
			cancel()
			if err == nil {
				b.Reset()
				continue
			}
			l.reg.putBack(byKey)
			l.log.Warn("the windows of a limits document could not be registered for releases by requestId; trying again", "err", err)
			if !retry.Sleep(ctx, b.Wait()) {
				return
			}
		}
	}
}

// registered adds to windows the windows key and, when it counts there,
// its channel-wide key have had (WindowRegistry), for a hold with unknown
// windows; windows unchanged when the store keeps none. When the registry
// cannot be read, the windows the member may be in are unknown: the error,
// so that the release fails (503, the client retries) rather than answer
// that it released while the member stays in a window of an earlier
// document.
func (l *Limiter) registered(ctx context.Context, key Key, windows []KeyWindow, amountsOnly bool) ([]KeyWindow, error) {
	reg, ok := l.store.(WindowRegistry)
	if !ok {
		return windows, nil
	}
	keys := []Key{key}
	if key.CountsChannelWide() {
		keys = append(keys, ChannelWide(key.Channel))
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	ws, err := reg.RegisteredWindows(cctx, keys, l.opts.Now())
	if err != nil {
		return nil, fmt.Errorf("ratelimit: release %s: read the windows its documents gave it: %w", key, err)
	}
	if amountsOnly {
		ws = amountWindows(ws)
	}
	return unionWindows(windows, ws), nil
}

// amountWindows keeps the amount windows of ws.
func amountWindows(ws []KeyWindow) []KeyWindow {
	out := ws[:0:0]
	for _, w := range ws {
		if w.Amount {
			out = append(out, w)
		}
	}
	return out
}
