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

// nearMaxMerchants bounds the merchants' refusals remembered at once (a
// refusal per key and merchant): merchant IDs come from clients. Past it,
// a remember of a new one remembers nothing while the bound still holds
// after a sweep. Concurrent remembers may pass it by a few.
const nearMaxMerchants = 10_000

// nearSweepAt is how many entries the near-cache holds before a remember
// sweeps the entries that no longer serve (past their time or a release on
// their channel, which a lookup of them would drop), at most once per
// nearMaxMemory: an entry never asked for again stays until a sweep.
const nearSweepAt = 1_000

// nearCache remembers, per key, a refusal by a full count window, so that
// refusals of a saturated key cost no store call; and per key and
// merchant, a refusal by a merchant's full use of a count window, which
// refuses that merchant's requests only. Every entry carries the
// limits version it was decided under and serves only that version: a
// refusal decided before a limits change, even one that lands after it,
// never refuses a request under the new limits. A refusal decided while a
// release made room (a call in flight across it: a coalesced call of the
// key, or one beside it) is not remembered either.
type nearCache struct {
	m sync.Map // nearID -> *nearEntry
	// releases maps each channel to the count of its forgetChannel calls
	// so far (*atomic.Uint64): a refusal whose check began before one may
	// have been decided before the room it made. Per channel, because a
	// release makes room only in its channel's windows: failing over from
	// one channel must not send another's refusals back to Redis.
	releases sync.Map
	// entries counts the entries in m, and merchants the merchants' among
	// them; swept is when the last sweep began (UnixNano).
	entries, merchants atomic.Int64
	swept              atomic.Int64
}

// releasesOf returns channel's release counter.
func (c *nearCache) releasesOf(channel string) *atomic.Uint64 {
	if n, ok := c.releases.Load(channel); ok {
		return n.(*atomic.Uint64)
	}
	n, _ := c.releases.LoadOrStore(channel, new(atomic.Uint64))
	return n.(*atomic.Uint64)
}

// nearID names a remembered refusal: a key's (merchant ""), served to
// every request of the key, or a merchant's, served to that merchant's.
type nearID struct {
	key      Key
	merchant string
}

type nearEntry struct {
	version uint64
	// epoch is its channel's count of releases (releases) when its check
	// was sent: a release on the channel since then ends it.
	epoch    uint64
	releases *atomic.Uint64
	// d is the refusal as the store decided it; its RetryAfter counts from
	// decided.
	d       Decision
	decided time.Time
	until   time.Time // when the entry stops serving
}

// refusal returns the remembered refusal of a request of key by merchant
// (the merchant its merchants' windows count, or "" when none does) under
// version at now, if one is still in force: the key's, else the
// merchant's; the store's decision (rule, scope, windows), its retry-after
// counted from now.
func (c *nearCache) refusal(key Key, merchant string, version uint64, now time.Time) (Decision, bool) {
	if d, ok := c.lookup(nearID{key: key}, version, now); ok || merchant == "" {
		return d, ok
	}
	return c.lookup(nearID{key: key, merchant: merchant}, version, now)
}

// lookup returns id's refusal, if one is still in force under version at
// now, and drops one that is not.
func (c *nearCache) lookup(id nearID, version uint64, now time.Time) (Decision, bool) {
	v, ok := c.m.Load(id)
	if !ok {
		return Decision{}, false
	}
	e := v.(*nearEntry)
	wait := e.decided.Add(e.d.RetryAfter).Sub(now)
	if now.Before(e.until) && wait > 0 && e.version == version && e.epoch == e.releases.Load() {
		d := e.d
		// The check's own time, not the refusal's it repeats: checkOnce
		// stamps it.
		d.RetryAfter, d.Source, d.Duplicate, d.DecidedAt = wait, SourceNearCache, false, time.Time{}
		return d, true
	}
	c.drop(id, v)
	return Decision{}, false
}

// drop deletes id's entry if it is still v.
func (c *nearCache) drop(id nearID, v any) {
	if !c.m.CompareAndDelete(id, v) {
		return
	}
	c.entries.Add(-1)
	if id.merchant != "" {
		c.merchants.Add(-1)
	}
}

// sweep drops the entries past their time or a release on their channel,
// unless a sweep began less than nearMaxMemory before now (a clock that
// stepped back does not hold sweeps off).
func (c *nearCache) sweep(now time.Time) {
	last := c.swept.Load()
	if since := now.UnixNano() - last; since >= 0 && since < int64(nearMaxMemory) || !c.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	c.m.Range(func(k, v any) bool {
		id, e := k.(nearID), v.(*nearEntry)
		if !now.Before(e.until) || e.epoch != e.releases.Load() {
			c.drop(id, v)
		}
		return true
	})
}

// epoch is taken for channel before a check is sent; remember is given it.
func (c *nearCache) epoch(channel string) uint64 { return c.releasesOf(channel).Load() }

// remember stores refusal d of its key (of its merchant, when a
// merchant's limit refused), decided under version at now, for at most
// nearMaxMemory and until the next release on its channel, unless a
// release happened since epoch (read before the check was sent): that
// refusal may predate the room the release made.
func (c *nearCache) remember(d Decision, version, epoch uint64, now time.Time) {
	releases := c.releasesOf(d.Key.Channel)
	if releases.Load() != epoch {
		return
	}
	id := nearID{key: d.Key, merchant: d.Merchant}
	if c.entries.Load() >= nearSweepAt {
		c.sweep(now)
	}
	if id.merchant != "" && c.merchants.Load() >= nearMaxMerchants {
		if _, known := c.m.Load(id); !known {
			return
		}
	}
	e := &nearEntry{version: version, epoch: epoch, releases: releases, d: d, decided: now, until: now.Add(min(d.RetryAfter, nearMaxMemory))}
	if _, had := c.m.Swap(id, e); !had {
		c.entries.Add(1)
		if id.merchant != "" {
			c.merchants.Add(1)
		}
	}
}

// clear drops everything (a new limits version).
func (c *nearCache) clear() {
	c.m.Range(func(k, v any) bool {
		c.drop(k.(nearID), v)
		return true
	})
}

// forgetChannel ends the refusals of every key on channel: a release frees
// room in its key's windows and in its channel's channel-wide windows,
// which other bizTypes on that channel share. It counts the release, and
// every entry remembered before it stops serving (a lookup or a sweep
// drops it): a release costs the same however many refusals are
// remembered.
func (c *nearCache) forgetChannel(channel string) { c.releasesOf(channel).Add(1) }
