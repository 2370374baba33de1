package pay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"payserver/internal/atomicfile"
	"payserver/internal/ratelimit"
)

// OwedReleases is the limiter the pay flow gives its slots back through. A
// release the limiter could not make (its store unreachable, its breaker
// open) is owed: kept, in Dir so that a restart does not forget it, and
// made again until the store answers. Before, such a release was only
// logged, and the slot stayed held by nobody until its window passed: a
// day, for a calendar window (the chaos campaign, seed 103: the resolver
// closed two orders NOT_SENT during a Redis outage of 0.6 s).
//
// Making a release later is safe because the pay flow releases only on a
// final fate (DecideSlot): no channel call can follow for that requestId on
// that key, now or later, so no later admission of the member can be one
// that a call uses. Releasing is idempotent, and a member Redis lost meanwhile
// is simply not there.
//
// The releases an earlier run kept are read by NewOwedReleases, before
// any payment is served. Run is the one worker; Main starts it and stops
// it with its context.
type OwedReleases struct {
	Limiter
	opts OwedReleasesOptions
	mu   sync.Mutex
	owed map[string]owedRelease
	seq  uint64 // the last keep's number (owedRelease.seq)
	wake chan struct{}
}

// OwedReleasesOptions configures OwedReleases. The zero value is usable.
type OwedReleasesOptions struct {
	// Max bounds the releases owed at once; past it a failed release is
	// answered as failed (its slot frees itself when its window passes).
	// Default 4096.
	Max int
	// GiveUpAfter is how long a release is tried before it is left to its
	// window's expiry. Default 25h: past a day window and its cut-off.
	GiveUpAfter time.Duration
	// Dir, when set, keeps each owed release in a file there. Empty:
	// memory only.
	Dir string
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

type owedRelease struct {
	hold        ratelimit.Hold
	amountsOnly bool
	at          time.Time
	// seq numbers each keep, so that a release owed again while the
	// worker makes the earlier one is not forgotten with it.
	seq uint64
}

// journaledRelease is an owed release as its file holds it.
type journaledRelease struct {
	Hold        journaledHold `json:"hold"`
	AmountsOnly bool          `json:"amountsOnly,omitempty"`
	AtUs        int64         `json:"atUs"`
}

// NewOwedReleases returns limiter with its failed releases owed.
func NewOwedReleases(limiter Limiter, opts OwedReleasesOptions) (*OwedReleases, error) {
	if limiter == nil {
		return nil, errors.New("pay: owed releases need a limiter")
	}
	if opts.Max <= 0 {
		opts.Max = 4096
	}
	if opts.GiveUpAfter <= 0 {
		opts.GiveUpAfter = 25 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &OwedReleases{Limiter: limiter, opts: opts, owed: map[string]owedRelease{}, wake: make(chan struct{}, 1)}
	r.recover()
	return r, nil
}

// Release implements Limiter: nil once the slot is released or owed.
func (r *OwedReleases) Release(ctx context.Context, h ratelimit.Hold) error {
	return r.release(ctx, h, false)
}

// ReleaseAmount implements Limiter: nil once the amounts are given back or
// owed.
func (r *OwedReleases) ReleaseAmount(ctx context.Context, h ratelimit.Hold) error {
	return r.release(ctx, h, true)
}

func (r *OwedReleases) release(ctx context.Context, h ratelimit.Hold, amountsOnly bool) error {
	err := r.apply(ctx, owedRelease{hold: h, amountsOnly: amountsOnly})
	if err == nil {
		return nil
	}
	if !r.keep(owedRelease{hold: h, amountsOnly: amountsOnly, at: r.opts.Now()}) {
		return err
	}
	r.opts.Logger.Info("a limiter slot could not be given back now; it is owed and given back once the limiter answers",
		"key", h.Key.String(), "requestId", h.Member, "amountsOnly", amountsOnly, "err", err)
	return nil
}

// Owed is how many releases are owed now.
func (r *OwedReleases) Owed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.owed)
}

func (r *OwedReleases) apply(ctx context.Context, o owedRelease) error {
	if o.amountsOnly {
		return r.Limiter.ReleaseAmount(ctx, o.hold)
	}
	return r.Limiter.Release(ctx, o.hold)
}

// owedID names an owed release: one per slot and kind. A whole release
// and an amounts-only one of the same slot are kept apart and each made:
// made in either order they leave what they would have left made at once.
func owedID(h ratelimit.Hold, amountsOnly bool) string {
	kind := "all"
	if amountsOnly {
		kind = "amounts"
	}
	if h.InProcess() {
		kind += "+in-process"
	}
	if h.IsOwnKey() {
		kind += "+own-key"
	}
	if h.IsOwnRecord() {
		kind += "+own-record"
	}
	sum := sha256.Sum256([]byte(h.Key.String() + "\x00" + h.Member + "\x00" + kind))
	return hex.EncodeToString(sum[:16])
}

// keep records o unless Max are owed; it reports whether o is owed. Its
// file is written under the lock, so that the file and the map agree
// whatever keeps and forgets run at once (an outage makes few).
func (r *OwedReleases) keep(o owedRelease) bool {
	id := owedID(o.hold, o.amountsOnly)
	r.mu.Lock()
	prev, had := r.owed[id]
	if !had && len(r.owed) >= r.opts.Max {
		r.mu.Unlock()
		r.opts.Logger.Warn("too many limiter releases owed; this slot frees itself when its window passes",
			"key", o.hold.Key.String(), "requestId", o.hold.Member, "max", r.opts.Max)
		return false
	}
	if had {
		o.at = prev.at
	}
	r.seq++
	o.seq = r.seq
	r.owed[id] = o
	if r.opts.Dir != "" && !had {
		j := journaledRelease{Hold: journalHold(o.hold), AmountsOnly: o.amountsOnly, AtUs: o.at.UnixMicro()}
		if err := writeFileAtomic(filepath.Join(r.opts.Dir, id+".json"), j); err != nil {
			r.opts.Logger.Warn("an owed limiter release could not be kept on disk; a restart forgets it", "requestId", o.hold.Member, "err", err)
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

// forget removes o, made or given up, and its file, under the lock, unless
// the same release was owed again since o was read (it is made in turn).
func (r *OwedReleases) forget(id string, o owedRelease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now, ok := r.owed[id]; ok && now.seq != o.seq {
		return
	}
	delete(r.owed, id)
	if r.opts.Dir != "" {
		if err := atomicfile.Remove(filepath.Join(r.opts.Dir, id+".json")); err != nil {
			r.opts.Logger.Warn("a made release's file could not be removed", "requestId", o.hold.Member, "err", err)
		}
	}
}

// Run makes the owed releases (those an earlier run kept first) until ctx
// ends: at once when one is owed, then backing off while the limiter
// still fails.
func (r *OwedReleases) Run(ctx context.Context) {
	b := workBackoff
	for {
		if r.round(ctx) {
			b.reset()
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
			}
			continue
		}
		if !sleepCtx(ctx, b.wait()) {
			return
		}
	}
}

// round tries every owed release once; it reports whether none is left.
func (r *OwedReleases) round(ctx context.Context) bool {
	r.mu.Lock()
	pending := make(map[string]owedRelease, len(r.owed))
	for id, o := range r.owed {
		pending[id] = o
	}
	r.mu.Unlock()
	for id, o := range pending {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.apply(actx, o)
		cancel()
		switch {
		case err == nil:
			r.forget(id, o)
			r.opts.Logger.Info("an owed limiter slot was given back", "key", o.hold.Key.String(), "requestId", o.hold.Member)
		case r.opts.Now().Sub(o.at) > r.opts.GiveUpAfter:
			r.forget(id, o)
			r.opts.Logger.Warn("an owed limiter release was given up; its slot frees itself when its window passes",
				"key", o.hold.Key.String(), "requestId", o.hold.Member, "err", err)
		case ctx.Err() != nil:
			return false
		default:
			return false // the limiter still fails: the rest wait too
		}
	}
	return r.Owed() == 0
}

// recover owes again the releases an earlier run kept (before any new one
// is owed: NewOwedReleases); a file that does not read is logged and left
// for a person to look at.
func (r *OwedReleases) recover() {
	if r.opts.Dir == "" {
		return
	}
	entries, err := os.ReadDir(r.opts.Dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.opts.Logger.Warn("the owed limiter releases could not be read", "dir", r.opts.Dir, "err", err)
		}
		return
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		j, h, err := readRelease(filepath.Join(r.opts.Dir, e.Name()))
		id := strings.TrimSuffix(e.Name(), ".json") // forget removes this very file
		if err != nil {
			r.opts.Logger.Warn("an owed limiter release does not read; left in place", "file", e.Name(), "err", err)
			continue
		}
		r.mu.Lock()
		r.owed[id] = owedRelease{hold: h, amountsOnly: j.AmountsOnly, at: time.UnixMicro(j.AtUs)}
		r.mu.Unlock()
		n++
	}
	if n > 0 {
		r.opts.Logger.Info("limiter releases owed by an earlier run are made again", "count", n)
	}
}

func readRelease(path string) (journaledRelease, ratelimit.Hold, error) {
	var j journaledRelease
	data, err := os.ReadFile(path)
	if err != nil {
		return j, ratelimit.Hold{}, err
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return j, ratelimit.Hold{}, err
	}
	h, err := j.Hold.hold()
	return j, h, err
}
