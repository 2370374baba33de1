package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// nearMaxMemory bounds how long a refusal is remembered, whatever its
// retry-after: room can come back before it (a release, a NOT_SENT payment,
// a routed payment moving on, on any instance), which only Redis sees. A
// saturated key then costs one store call per instance per nearMaxMemory,
// and a calendar window refused until midnight is asked again every second.
const nearMaxMemory = time.Second

// nearCache remembers, per key, a refusal by a full count window, so that
// refusals of a saturated key cost no store call. Every entry carries the
// limits version it was decided under and serves only that version: a
// refusal decided before a limits change, even one that lands after it,
// never refuses a request under the new limits. A refusal decided while a
// release made room (a call in flight across it: a coalesced call of the
// key, or one beside it) is not remembered either.
type nearCache struct {
	m sync.Map // Key -> *nearEntry
	// releases maps each channel to the count of its forgetChannel calls
	// so far (*atomic.Uint64): a refusal whose check began before one may
	// have been decided before the room it made. Per channel, because a
	// release makes room only in its channel's windows: failing over from
	// one channel must not send another's refusals back to Redis.
	releases sync.Map
}

// releasesOf returns channel's release counter.
func (c *nearCache) releasesOf(channel string) *atomic.Uint64 {
	if n, ok := c.releases.Load(channel); ok {
		return n.(*atomic.Uint64)
	}
	n, _ := c.releases.LoadOrStore(channel, new(atomic.Uint64))
	return n.(*atomic.Uint64)
}

type nearEntry struct {
	version uint64
	// d is the refusal as the store decided it; its RetryAfter counts from
	// decided.
	d       Decision
	decided time.Time
	until   time.Time // when the entry stops serving
}

// refusal returns the remembered refusal of key under version at now, if
// one is still in force: the store's decision (rule, scope, windows), its
// retry-after counted from now.
func (c *nearCache) refusal(key Key, version uint64, now time.Time) (Decision, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		return Decision{}, false
	}
	e := v.(*nearEntry)
	wait := e.decided.Add(e.d.RetryAfter).Sub(now)
	if now.Before(e.until) && wait > 0 && e.version == version {
		d := e.d
		d.RetryAfter, d.Source, d.Duplicate = wait, SourceNearCache, false
		return d, true
	}
	c.m.CompareAndDelete(key, v)
	return Decision{}, false
}

// epoch is taken for channel before a check is sent; remember is given it.
func (c *nearCache) epoch(channel string) uint64 { return c.releasesOf(channel).Load() }

// remember stores refusal d of key, decided under version at now, for at
// most nearMaxMemory, unless a release happened since epoch (read before
// the check was sent): that refusal may predate the room the release made.
func (c *nearCache) remember(d Decision, version, epoch uint64, now time.Time) {
	releases := c.releasesOf(d.Key.Channel)
	if releases.Load() != epoch {
		return
	}
	e := &nearEntry{version: version, d: d, decided: now, until: now.Add(min(d.RetryAfter, nearMaxMemory))}
	c.m.Store(d.Key, e)
	// A release between the check above and the Store: forgetChannel may
	// have swept before the Store, so take the entry back. One after this
	// load sweeps after the Store and drops it itself.
	if releases.Load() != epoch {
		c.m.CompareAndDelete(d.Key, e)
	}
}

// clear drops everything (a new limits version).
func (c *nearCache) clear() { c.m.Clear() }

// forgetChannel drops the refusals of every key on channel: a release frees
// room in its key's windows and in its channel's channel-wide windows,
// which other bizTypes on that channel share.
func (c *nearCache) forgetChannel(channel string) {
	c.releasesOf(channel).Add(1) // before the sweep: see remember
	c.m.Range(func(k, _ any) bool {
		if k.(Key).Channel == channel {
			c.m.Delete(k)
		}
		return true
	})
}
