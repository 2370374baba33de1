package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// TestInProcessAdmissionReleasesOnlyInProcess: an admission one instance
// decided in process while it could not reach the shared store is given
// back from its in-process windows only. The shared store's record of the
// same member is another instance's admission (here for another amount,
// whose order the channel may have paid), and releasing the first must not
// take it away. Released from the shared store too, the paid payment's
// slot was freed: a later release (owed until the store answered) removed
// a member the loser never recorded there.
func TestInProcessAdmissionReleasesOnlyInProcess(t *testing.T) {
	const doc = "limits:\n  A:B: [{limit: 10, window: 1m}]\n"
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	shared := ratelimit.NewLocalStore(clock.Now)
	up, err := ratelimit.New(shared, ratelimit.Options{Now: clock.Now, DisableNearCache: true})
	if err != nil {
		t.Fatal(err)
	}
	up.SetConfig(mustConfig(t, doc))
	cut := &switchStore{LocalStore: shared}
	cutOff, err := ratelimit.New(cut, ratelimit.Options{Now: clock.Now, DisableNearCache: true, Policy: ratelimit.PolicyLocal})
	if err != nil {
		t.Fatal(err)
	}
	cutOff.SetConfig(mustConfig(t, doc))
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
