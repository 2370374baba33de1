package ratelimit

import (
	"sync"
	"time"
)

// nearCache remembers, per key, a window known to be full until an instant,
// so that refusals of a saturated key cost no store call. Every entry carries
// the limits version it was decided under and serves only that version: a
// refusal decided before a limits change, even one that lands after it,
// never refuses a request under the new limits.
type nearCache struct {
	m sync.Map // Key -> nearEntry
}

type nearEntry struct {
	version uint64
	until   time.Time
	limit   int64
	window  time.Duration
	count   int64
}

// refusal returns the remembered refusal of key under version at now, if
// one is still in force.
func (c *nearCache) refusal(key Key, version uint64, now time.Time) (Decision, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		return Decision{}, false
	}
	e := v.(nearEntry)
	if wait := e.until.Sub(now); wait > 0 && e.version == version {
		return Decision{Key: key, Limit: e.limit, Window: e.window, Count: e.count, RetryAfter: wait, Source: SourceNearCache}, true
	}
	c.m.CompareAndDelete(key, v)
	return Decision{}, false
}

// remember stores refusal d of key, decided under version at now.
func (c *nearCache) remember(d Decision, version uint64, now time.Time) {
	c.m.Store(d.Key, nearEntry{version: version, until: now.Add(d.RetryAfter), limit: d.Limit, window: d.Window, count: d.Count})
}

// forget drops what is remembered of key (its window has room again).
func (c *nearCache) forget(key Key) { c.m.Delete(key) }

// clear drops everything (a new limits version).
func (c *nearCache) clear() { c.m.Clear() }
