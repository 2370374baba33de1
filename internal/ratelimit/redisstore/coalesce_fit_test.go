package redisstore

import (
	"testing"
	"time"

	"payserver/internal/ratelimit"

	"payserver/internal/batch"
)

// TestFitNeverSendsOneKeyTwice: one call carries checks of several
// merchants, each merchant's use of a window once; a merchant whose limit
// changed between two checks (the same Redis key, two windows) waits for
// the next call.
func TestFitNeverSendsOneKeyTwice(t *testing.T) {
	k := ratelimit.Key{BizType: "P", Channel: "C"}
	w := ratelimit.Window{Limit: 5, Size: time.Second}
	ml := &ratelimit.Merchants{PerMerchant: 2, Overrides: map[string]int64{"B": 3}}
	ml2 := &ratelimit.Merchants{PerMerchant: 2, Overrides: map[string]int64{"B": 1}}
	mk := func(ml *ratelimit.Merchants, m string) *batch.Call[checkArg, ratelimit.StoreResult] {
		return &batch.Call[checkArg, ratelimit.StoreResult]{Arg: checkArg{windows: []ratelimit.KeyWindow{{Key: k, Window: w}, merchantWindow(k, w, ml, m)}}}
	}
	cases := []struct {
		calls []*batch.Call[checkArg, ratelimit.StoreResult]
		want  int
	}{
		{[]*batch.Call[checkArg, ratelimit.StoreResult]{mk(ml, "A"), mk(ml, "B"), mk(ml, "A"), mk(ml, "C")}, 4},
		{[]*batch.Call[checkArg, ratelimit.StoreResult]{mk(ml, "A"), mk(ml2, "A")}, 2}, // same limit for A: same window
		{[]*batch.Call[checkArg, ratelimit.StoreResult]{mk(ml, "B"), mk(ml2, "B")}, 1}, // B's limit changed: same key, two windows
		{[]*batch.Call[checkArg, ratelimit.StoreResult]{mk(ml, "A"), mk(ml, "B"), mk(ml2, "B")}, 2},
	}
	for i, c := range cases {
		if got := fit(c.calls); got != c.want {
			t.Errorf("case %d: fit %d, want %d", i, got, c.want)
		}
		ws, _ := oneCall(c.calls[:c.want])
		keys := map[ratelimit.Key]map[string]bool{}
		for _, w := range ws {
			if keys[w.Key] == nil {
				keys[w.Key] = map[string]bool{}
			}
			if keys[w.Key][w.ID()] {
				t.Errorf("case %d: window %s of %s twice in one call", i, w.ID(), w.Key)
			}
			keys[w.Key][w.ID()] = true
		}
	}
}

// merchantWindow is merchant's use of window w of key k under the merchant
// limits ml, as the limiter makes it (ml gives every merchant a limit).
func merchantWindow(k ratelimit.Key, w ratelimit.Window, ml *ratelimit.Merchants, merchant string) ratelimit.KeyWindow {
	w.Limit = ml.LimitOf(merchant)
	return ratelimit.KeyWindow{Key: ratelimit.MerchantKey(k, merchant), Window: w, Merchant: merchant}
}
