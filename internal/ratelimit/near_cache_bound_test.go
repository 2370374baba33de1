package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// Merchant IDs come from clients: a client naming a new merchant in every
// request, each refused by its merchant's limit, must not grow the
// near-cache without bound. Past nearMaxMerchants it remembers no more
// merchants' refusals (a key's still), until a sweep of the entries past
// their time makes room.
func TestTheNearCacheKeepsABoundedNumberOfMerchants(t *testing.T) {
	var c nearCache
	k := Key{BizType: "A", Channel: "B"}
	now := time.Unix(1_800_000_000, 0)
	held := func(merchant string, at time.Time) bool {
		_, ok := c.lookup(nearID{key: k, merchant: merchant}, 1, at)
		return ok
	}
	refuse := func(merchant string, at time.Time) {
		c.remember(Decision{Key: k, Merchant: merchant, RetryAfter: time.Minute}, 1, c.epoch(k.Channel), at)
	}
	entries := func() (n int) {
		c.m.Range(func(any, any) bool { n++; return true })
		return n
	}
	for i := range nearMaxMerchants + 100 {
		refuse(fmt.Sprintf("M%d", i), now)
	}
	if n := entries(); n != nearMaxMerchants || c.merchants.Load() != nearMaxMerchants {
		t.Fatalf("%d entries, %d counted as merchants', after %d merchants refused; want %d", n, c.merchants.Load(), nearMaxMerchants+100, nearMaxMerchants)
	}
	if held(fmt.Sprintf("M%d", nearMaxMerchants), now) {
		t.Fatal("a merchant refused past the bound was remembered")
	}
	if !held("M0", now) {
		t.Fatal("a merchant refused within the bound was not remembered")
	}
	refuse("", now)
	if !held("", now) {
		t.Fatal("the key's refusal was not remembered past the merchants' bound")
	}

	// Within nearMaxMemory nothing is past its time: still full.
	refuse("LATE", now.Add(nearMaxMemory/2))
	if held("LATE", now.Add(nearMaxMemory/2)) {
		t.Fatal("a merchant refused past the bound, before any entry's time ended, was remembered")
	}
	// Once the entries' time has passed, the next merchant's refusal sweeps
	// them and is remembered.
	later := now.Add(nearMaxMemory)
	refuse("NEXT", later)
	if !held("NEXT", later) {
		t.Fatal("a merchant refused after the entries' time was not remembered")
	}
	if n := entries(); n != 1 || c.merchants.Load() != 1 {
		t.Fatalf("%d entries, %d counted as merchants', after the sweep; want NEXT's alone", n, c.merchants.Load())
	}
	// A release on the channel ends every entry of it at once; the next
	// sweep drops them.
	c.forgetChannel(k.Channel)
	if held("NEXT", later) {
		t.Fatal("a merchant's refusal served after a release on its channel")
	}
	refuse("", later)
	c.forgetChannel(k.Channel)
	c.sweep(later.Add(nearMaxMemory / 2))
	if n := entries(); n != 1 || c.merchants.Load() != 0 {
		t.Fatalf("a sweep right after the last one: %d entries, %d counted as merchants'; want the key's entry alone, swept later", n, c.merchants.Load())
	}
	c.sweep(later.Add(nearMaxMemory))
	if n := entries(); n != 0 {
		t.Fatalf("%d entries after a sweep past a release on their channel, want none", n)
	}
}

// Keys come from requests too (a channel-wide rule applies to any
// bizType): past nearSweepAt entries, the refusals that no longer serve
// (past their time, or a release on their channel) and that nobody asks
// for again are swept, at most once per nearMaxMemory.
func TestTheNearCacheSweepsRefusalsThatNoLongerServe(t *testing.T) {
	var c nearCache
	now := time.Unix(1_800_000_000, 0)
	refuse := func(k Key, at time.Time) {
		c.remember(Decision{Key: k, RetryAfter: time.Minute}, 1, c.epoch(k.Channel), at)
	}
	for i := range 2 * nearSweepAt {
		refuse(Key{BizType: fmt.Sprintf("K%d", i), Channel: "B"}, now)
	}
	c.forgetChannel("B")
	refuse(Key{BizType: "K", Channel: "C"}, now.Add(nearMaxMemory/2))
	if n := c.entries.Load(); n != 2*nearSweepAt+1 {
		t.Fatalf("%d entries within a second of the first sweep, want %d", n, 2*nearSweepAt+1)
	}
	refuse(Key{BizType: "K2", Channel: "C"}, now.Add(nearMaxMemory/2+nearMaxMemory))
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	// B's are past a release, C's first past its time: K2 is left.
	if n != 1 || c.entries.Load() != 1 {
		t.Fatalf("%d entries (%d counted) after the sweep, want K2's alone", n, c.entries.Load())
	}
}
