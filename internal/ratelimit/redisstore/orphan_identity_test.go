package redisstore

import (
	"context"
	"testing"
	"time"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// A merchant's use of a window can keep a record its window no longer
// holds: a release given the key's windows only (a document without
// merchant limits, or windows read from the registry) leaves it. One call
// then carries two checks of that member, the first in another merchant's
// windows, the second in the merchant's whose use holds the old record at
// another amount. The second is a conflict there, as the model says: the
// call must read that window's own record, not take the amount the first
// check of the call was admitted at.
func TestOneCallReadsEachWindowsOwnRecordOfAMember(t *testing.T) {
	ctx := context.Background()
	s, err := New(testutil.MustRedis(t), Options{Prefix: "test:orphan:"})
	if err != nil {
		t.Fatal(err)
	}
	k := ratelimit.Key{BizType: "P", Channel: testutil.UniqueName("C")}
	w := ratelimit.Window{Limit: 4, Calendar: dayUTC}
	ml := &ratelimit.Merchants{PerMerchant: 10}
	key := ratelimit.KeyWindow{Key: k, Window: w}
	of := func(m string) []ratelimit.KeyWindow { return []ratelimit.KeyWindow{key, merchantWindow(k, w, ml, m)} }
	model := ratelimit.NewModel()
	now := time.Now()

	// m0 admitted for 2 under M2, then released from the key's window only.
	if res, err := s.Check(ctx, of("M2"), "m0", 2); err != nil || !res.Allowed {
		t.Fatalf("first admission: %+v, %v", res, err)
	}
	model.Check(of("M2"), "m0", 2, now)
	if _, err := s.Release(ctx, []ratelimit.KeyWindow{key}, "m0"); err != nil {
		t.Fatal(err)
	}
	model.Release([]ratelimit.KeyWindow{key}, "m0")

	got, err := s.CheckBatch(ctx, []BatchCheck{{Windows: of("M1"), Member: "m0", Amount: 1}, {Windows: of("M2"), Member: "m0", Amount: 1}})
	if err != nil || len(got) != 2 {
		t.Fatalf("batch: %d results, %v", len(got), err)
	}
	for i, ws := range [][]ratelimit.KeyWindow{of("M1"), of("M2")} {
		want := model.Check(ws, "m0", 1, now)
		if got[i].Allowed != want.Allowed || got[i].Conflict != want.Conflict || got[i].Duplicate != want.Duplicate {
			t.Errorf("check %d (m0 for 1): allowed %v, conflict %v, duplicate %v; the model says allowed %v, conflict %v, duplicate %v",
				i, got[i].Allowed, got[i].Conflict, got[i].Duplicate, want.Allowed, want.Conflict, want.Duplicate)
		}
	}
}
