package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// idMax is identity.lua's idMax: the most records a slice's hash takes.
const idMax = 128

// A sliding count window keeps the amounts its members were admitted for
// without a Redis key per member: the members of one slice of admission
// time share a hash beside the window, a burst beyond what one hash keeps
// compact spills over 64 more, every record is found again (a conflict for
// another amount, a duplicate for its own), and a release deletes it. The
// model is the oracle for every answer.
func TestAmountsLiveInTheWindowsOwnHashes(t *testing.T) {
	ctx := context.Background()
	c := testutil.MustRedis(t)
	at := time.Now()
	s, err := New(c, Options{Prefix: "test:ids:", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	model := ratelimit.NewModel()
	k := ratelimit.Key{BizType: "P", Channel: testutil.UniqueName("C")}
	ws := ratelimit.KeyWindows(k, []ratelimit.Window{{Limit: 10_000, Size: 24 * time.Hour}})
	wk := s.RedisKey(ws[0])
	member := func(j int) string { return fmt.Sprintf("m%03d", j) }
	batch := func(from, to int, amount func(j int) int64) {
		t.Helper()
		var checks []BatchCheck
		for j := from; j < to; j++ {
			checks = append(checks, BatchCheck{Windows: ws, Member: member(j), Amount: amount(j)})
		}
		got, err := s.CheckBatch(ctx, checks)
		if err != nil || len(got) != len(checks) {
			t.Fatalf("batch %d..%d: %d results, %v", from, to, len(got), err)
		}
		for i, ch := range checks {
			want := model.Check(ws, ch.Member, ch.Amount, at)
			if g := got[i]; g.Allowed != want.Allowed || g.Duplicate != want.Duplicate || g.Conflict != want.Conflict || g.Count != want.Count {
				t.Fatalf("%s for %d: allowed %v, duplicate %v, conflict %v, count %d; the model says %v, %v, %v, %d",
					ch.Member, ch.Amount, g.Allowed, g.Duplicate, g.Conflict, g.Count, want.Allowed, want.Duplicate, want.Conflict, want.Count)
			}
		}
	}
	own := func(j int) int64 { return int64(100 + j) }

	// One call of 100, then one of 200, at one instant: one slice. The
	// slice's hash takes 128 records, the burst's hash the next 128, and
	// the other 44 spill.
	batch(0, 100, own)
	batch(100, 300, own)
	ids := c.Keys(ctx, wk+":#*").Val()
	held := map[string]int64{}
	for _, id := range ids {
		level := "slice"
		switch name := strings.TrimPrefix(id, wk+":#~"); {
		case strings.Contains(name, ":"):
			level = "spill"
		case strings.Contains(name, "."):
			level = "burst"
		}
		held[level] += c.HLen(ctx, id).Val()
	}
	if held["slice"] != idMax || held["burst"] != idMax || held["spill"] != 300-2*idMax || len(ids) > 2+64 {
		t.Fatalf("records in the slice's hash, the burst's and spills: %v in %d hashes; want %d, %d, %d in at most 66",
			held, len(ids), idMax, idMax, 300-2*idMax)
	}
	if all := c.Keys(ctx, "test:ids:{"+k.Channel+"}*").Val(); len(all) != 1+len(ids) {
		t.Fatalf("%d keys, want the window and its %d hashes of records", len(all), len(ids))
	}
	// Each hash lasts until the last member its slice can hold has left
	// the window, plus the margin.
	for _, id := range ids {
		if ttl, longest := c.PTTL(ctx, id).Val(), 24*time.Hour+24*time.Hour/16384+ttlMargin; ttl <= 24*time.Hour || ttl > longest {
			t.Fatalf("%s: TTL %v, want in (24h, %v]", id, ttl, longest)
		}
	}

	// Later, in other slices: every member for another amount is a
	// conflict, for its own a duplicate, wherever its record is.
	at = at.Add(time.Minute)
	batch(0, 300, func(j int) int64 { return own(j) + 1 })
	at = at.Add(time.Minute)
	batch(0, 300, own)

	// Releases, for the right amount, for a wrong one, and without one,
	// of records in the slice's hash and in spills.
	for j := 0; j < 300; j += 7 {
		var ok, want bool
		switch j % 3 {
		case 0:
			ok, err = s.Release(ctx, ws, member(j))
			want = model.Release(ws, member(j))
		case 1:
			ok, err = s.ReleaseIfAmount(ctx, ws, member(j), own(j))
			want = model.ReleaseIfAmount(ws, member(j), own(j))
		default:
			ok, err = s.ReleaseIfAmount(ctx, ws, member(j), own(j)+1)
			want = model.ReleaseIfAmount(ws, member(j), own(j)+1)
		}
		if err != nil || ok != want {
			t.Fatalf("release %d: %v, %v; the model says %v", j, ok, err, want)
		}
	}
	var left int64
	for _, id := range ids {
		left += c.HLen(ctx, id).Val()
	}
	if zc := c.ZCard(ctx, wk).Val(); left != zc {
		t.Fatalf("%d records for the window's %d members: a release must delete its record", left, zc)
	}
	// A released member comes back for another amount as a new member.
	at = at.Add(time.Minute)
	batch(0, 300, func(j int) int64 { return own(j) + 2 })
}

// A record expires with its slice once its members have left the window.
func TestARecordLeavesWithItsMember(t *testing.T) {
	mini, c := testutil.MustMiniredis(t)
	s, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	mini.SetTime(t0)
	k := ratelimit.Key{BizType: "ID", Channel: "X"}
	ws := ratelimit.KeyWindows(k, []ratelimit.Window{{Limit: 10, Size: 10 * time.Second}})
	for _, m := range []string{"a", "b"} {
		if r, err := s.Check(ctx, ws, m, 5); err != nil || !r.Allowed {
			t.Fatalf("%s: %+v, %v", m, r, err)
		}
	}
	if ids := mini.Keys(); len(ids) != 2 {
		t.Fatalf("keys %q, want the window and one hash of amounts", ids)
	}
	// The window (10 s), a slice (1,024 µs) and the margin later, both
	// the window and its records are gone.
	mini.FastForward(10*time.Second + ttlMargin + time.Second)
	if ids := mini.Keys(); len(ids) != 0 {
		t.Fatalf("keys %q left after every member left the window", ids)
	}
}
