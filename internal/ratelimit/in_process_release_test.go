package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// twoInstances are two limiters on one shared store, A:B at 10 a minute:
// up always reaches it, cutOff through cut, which fails while told to.
func twoInstances(t *testing.T) (clock *testutil.Clock, up *ratelimit.Limiter, cut *switchStore, cutOff *ratelimit.Limiter) {
	t.Helper()
	const doc = "limits:\n  A:B: [{limit: 10, window: 1m}]\n"
	clock = testutil.NewClock(time.Unix(1_800_000_000, 0))
	shared := ratelimit.NewLocalStore(clock.Now)
	up, err := ratelimit.New(shared, ratelimit.Options{Now: clock.Now, DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	up.SetConfig(mustConfig(t, doc))
	cut = &switchStore{LocalStore: shared}
	cutOff, err = ratelimit.New(cut, ratelimit.Options{Now: clock.Now, DisableNearCache: true, Policy: ratelimit.PolicyLocal})
	if err != nil {
		t.Fatal(err)
	}
	cutOff.SetConfig(mustConfig(t, doc))
	return clock, up, cut, cutOff
}

// TestInProcessAdmissionReleasesOnlyInProcess: an admission one instance
// decided in process while it could not reach the shared store is given
// back from its in-process windows only. The shared store's record of the
// same member is another instance's admission (here for another amount,
// whose order the channel may have paid), and releasing the first must not
// take it away. Released from the shared store too, the paid payment's
// slot was freed: a later release (owed until the store answered) removed
// a member the loser never recorded there.
func TestInProcessAdmissionReleasesOnlyInProcess(t *testing.T) {
	clock, up, cut, cutOff := twoInstances(t)
	ctx := context.Background()
	winner, err := up.Check(ctx, ratelimit.Request{Key: keyAB, Member: "R", Amount: 1, Currency: "CNY"})
	if err != nil || !winner.Allowed || winner.Source != ratelimit.SourceRedis {
		t.Fatalf("the winner through the shared store: %+v, %v", winner, err)
	}
	cut.failing.Store(true)
	loser, err := cutOff.Check(ctx, ratelimit.Request{Key: keyAB, Member: "R", Amount: 2, Currency: "CNY"})
	if err != nil || !loser.Allowed || loser.Source != ratelimit.SourceLocal {
		t.Fatalf("the loser in process: %+v, %v", loser, err)
	}
	cut.failing.Store(false)
	clock.Advance(time.Minute / 2) // past the breaker's cool-down
	if d, err := cutOff.Check(ctx, ratelimit.Request{Key: keyAB, Member: "other", Amount: 1, Currency: "CNY"}); err != nil || d.Source != ratelimit.SourceRedis {
		t.Fatalf("the cut-off instance back on the shared store: %+v, %v", d, err)
	}
	if err := cutOff.Release(ctx, loser.Hold); err != nil {
		t.Fatal(err)
	}
	_, counts, err := up.Usage(ctx, keyAB)
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != 2 {
		t.Fatalf("the shared window holds %d, want 2: the winner's R and other (the loser's in-process admission was released from the shared store)", counts[0])
	}
}

// TestInProcessDuplicateReleasesEverywhere: a member the shared store
// admitted, checked again in process while the store is down, is a
// duplicate of that admission (the in-process windows hold its copy), not
// an admission of its own: releasing it gives the shared record back too.
// And a hold released Everywhere (a payment that can never call the
// channel under the key) leaves no record of the member anywhere.
func TestInProcessDuplicateReleasesEverywhere(t *testing.T) {
	const doc = "limits:\n  A:B: [{limit: 10, window: 1m}]\n"
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	cut := &switchStore{LocalStore: ratelimit.NewLocalStore(clock.Now)}
	l, err := ratelimit.New(cut, ratelimit.Options{Now: clock.Now, DisableNearCache: true, Policy: ratelimit.PolicyLocal})
	if err != nil {
		t.Fatal(err)
	}
	l.SetConfig(mustConfig(t, doc))
	ctx := context.Background()
	if d, err := l.Check(ctx, ratelimit.Request{Key: keyAB, Member: "R", Amount: 1, Currency: "CNY"}); err != nil || !d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("admitted by the shared store: %+v, %v", d, err)
	}
	cut.failing.Store(true)
	dup, err := l.Check(ctx, ratelimit.Request{Key: keyAB, Member: "R", Amount: 1, Currency: "CNY"})
	if err != nil || !dup.Allowed || dup.Source != ratelimit.SourceLocal || !dup.Duplicate {
		t.Fatalf("checked again in process: %+v, %v; want an in-process duplicate", dup, err)
	}
	fresh, err := l.Check(ctx, ratelimit.Request{Key: keyAB, Member: "S", Amount: 1, Currency: "CNY"})
	if err != nil || !fresh.Allowed || fresh.Source != ratelimit.SourceLocal || fresh.Duplicate {
		t.Fatalf("a new member in process: %+v, %v", fresh, err)
	}
	cut.failing.Store(false)
	clock.Advance(time.Minute / 2)
	// S's slot as a routed payment's left candidate would be: released
	// everywhere. Put a record of S in the shared store first, as another
	// instance's duplicate of the same payment would have.
	if _, err := cut.LocalStore.Check(ctx, ratelimit.KeyWindows(keyAB, mustConfig(t, doc).Rules[keyAB].Windows), "S", 1); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, dup.Hold); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, fresh.Hold.Everywhere()); err != nil {
		t.Fatal(err)
	}
	if _, counts, err := l.Usage(ctx, keyAB); err != nil || counts[0] != 0 {
		t.Fatalf("the shared window holds %v (%v), want 0: R's duplicate and S released everywhere", counts, err)
	}
}

// TestInProcessRetryReleasesOnlyInProcess: a retry of this instance's own
// in-process admission (a duplicate of a member the in-process windows
// hold as decided there, not as a copy of a shared admission) is released
// from the in-process windows only, as the first admission would be. The
// shared store's record of the same member is another instance's
// admission, which may be a paid payment's slot. Released from the shared
// store, a retry that lost its claim to another amount took the paid
// winner's slot away.
func TestInProcessRetryReleasesOnlyInProcess(t *testing.T) {
	clock, up, cut, cutOff := twoInstances(t)
	ctx := context.Background()
	if w, err := up.Check(ctx, ratelimit.Request{Key: keyAB, Member: "dup", Amount: 4604, Currency: "CNY"}); err != nil || !w.Allowed || w.Source != ratelimit.SourceRedis {
		t.Fatalf("the winner through the shared store: %+v, %v", w, err)
	}
	cut.failing.Store(true)
	first, err := cutOff.Check(ctx, ratelimit.Request{Key: keyAB, Member: "dup", Amount: 4607, Currency: "CNY"})
	if err != nil || !first.Allowed || first.Source != ratelimit.SourceLocal || first.Duplicate {
		t.Fatalf("the loser's first attempt in process: %+v, %v", first, err)
	}
	retry, err := cutOff.Check(ctx, ratelimit.Request{Key: keyAB, Member: "dup", Amount: 4607, Currency: "CNY"})
	if err != nil || !retry.Allowed || retry.Source != ratelimit.SourceLocal || !retry.Duplicate {
		t.Fatalf("the loser's retry in process: %+v, %v; want an in-process duplicate", retry, err)
	}
	cut.failing.Store(false)
	clock.Advance(time.Minute / 2) // past the breaker's cool-down
	if d, err := cutOff.Check(ctx, ratelimit.Request{Key: keyAB, Member: "other", Amount: 1, Currency: "CNY"}); err != nil || d.Source != ratelimit.SourceRedis {
		t.Fatalf("the cut-off instance back on the shared store: %+v, %v", d, err)
	}
	if err := cutOff.Release(ctx, retry.Hold); err != nil {
		t.Fatal(err)
	}
	_, counts, err := up.Usage(ctx, keyAB)
	if err != nil {
		t.Fatal(err)
	}
	if counts[0] != 2 {
		t.Fatalf("the shared window holds %d, want 2: the winner's dup and other (the retry of an in-process admission was released from the shared store)", counts[0])
	}
}

// TestReleaseBeforeTheLimitsIsNotMade: a hold whose windows are unknown
// (an owed release read back at start) released before the first limits
// document is loaded has no windows to leave: that is an error, so that the
// release stays owed, not a release made. Answered nil, the owed release
// was forgotten as made, and the member stayed in its day window.
func TestReleaseBeforeTheLimitsIsNotMade(t *testing.T) {
	store := ratelimit.NewLocalStore(nil)
	l, err := ratelimit.New(store, ratelimit.Options{DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	key := ratelimit.Key{BizType: "B", Channel: "ALIPAY"}
	if err := l.Release(context.Background(), ratelimit.HoldOf(key, "m")); !errors.Is(err, ratelimit.ErrNotLoaded) {
		t.Fatalf("release before the limits: %v, want ErrNotLoaded", err)
	}
	if err := l.ReleaseAmount(context.Background(), ratelimit.HoldOf(key, "m")); !errors.Is(err, ratelimit.ErrNotLoaded) {
		t.Fatalf("amount release before the limits: %v, want ErrNotLoaded", err)
	}
}

// TestReleaseAfterALimitsChangeLeavesNoMember: a member acquired under one
// document and released by key and member alone (its windows unknown, as
// the limits API releases) just after a change that moved its calendar
// window leaves the window it was admitted into too. Released from the
// new document's windows only, it stayed in the old day window, held by
// nobody, and a later document bringing that window back counted it.
func TestReleaseAfterALimitsChangeLeavesNoMember(t *testing.T) {
	const midnight, ten = "limits:\n  A:B: [{limit: 5, calendar: day}]\n", "limits:\n  A:B: [{limit: 5, calendar: day, cutoff: \"10:00\"}]\n"
	store := ratelimit.NewLocalStore(nil)
	l, err := ratelimit.New(store, ratelimit.Options{DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	old := mustConfig(t, midnight)
	l.SetConfig(old)
	ctx := context.Background()
	if d, err := l.Check(ctx, ratelimit.Request{Key: keyAB, Member: "#api:c:q1"}); err != nil || !d.Allowed {
		t.Fatalf("acquire: %+v, %v", d, err)
	}
	l.SetConfig(mustConfig(t, ten))
	if err := l.Release(ctx, ratelimit.HoldOf(keyAB, "#api:c:q1")); err != nil {
		t.Fatal(err)
	}
	use, err := store.Usage(ctx, ratelimit.KeyWindows(keyAB, old.Rules[keyAB].Windows))
	if err != nil || use[0] != 0 {
		t.Fatalf("the old day window holds %v (%v), want 0: the released member stayed in it", use, err)
	}
}
