package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/testutil"
)

// TestCoalescedMerchantCallsAgreeWithModel: the windows of real requests
// (applicable: their own key and the channel-wide key with reservations,
// merchant limits on both, learned limits after throttles), several
// merchants and bizTypes, split into calls and sent as the coalescer
// splits and sends them (the Redis store's CheckBatch): each member's
// answer is the model's for its own windows, member by member in arrival
// order.
func TestCoalescedMerchantCallsAgreeWithModel(t *testing.T) {
	var mixed, mixedReserved, learnedBound int
	defer func() {
		t.Logf("calls of several merchants %d, %d of them with reservations; answers under a learned limit %d", mixed, mixedReserved, learnedBound)
	}()
	testutil.PropertyChecks(t, 200)
	var now time.Time
	s := redisServer(t, "embedded").New(t, "test:cm:", &now)
	rapid.Check(t, func(t *rapid.T) {
		own := Key{BizType: testutil.UniqueName("P"), Channel: testutil.UniqueName("C")}
		other := Key{BizType: testutil.UniqueName("Q"), Channel: own.Channel}
		wide := ChannelWide(own.Channel)
		genRule := func(wideKey bool) Rule {
			var r Rule
			n := rapid.IntRange(1, 2).Draw(t, "n")
			seen := map[string]bool{}
			for i := 0; i < n; i++ {
				w := genWindow(t)
				if w.Limit == 0 || seen[w.ID()] {
					continue
				}
				seen[w.ID()] = true
				r.Windows = append(r.Windows, w)
				var ml *Merchants
				if rapid.Bool().Draw(t, "ml") {
					ml = &Merchants{PerMerchant: rapid.Int64Range(1, w.Limit).Draw(t, "per")}
				}
				r.Merchants = append(r.Merchants, ml)
				var rv map[string]int64
				if wideKey && rapid.Bool().Draw(t, "reserve") {
					rv = map[string]int64{other.BizType: rapid.Int64Range(0, w.Limit).Draw(t, "rv")}
					if rapid.Bool().Draw(t, "own reserve") {
						rv[own.BizType] = rapid.Int64Range(0, w.Limit).Draw(t, "orv")
					}
				}
				r.Reserve = append(r.Reserve, rv)
			}
			return r
		}
		cfg := &Config{Rules: map[Key]Rule{own: genRule(false), wide: genRule(true)}}
		if len(applicable(cfg, Request{Key: own, Amount: 1}, time.Now())) == 0 {
			t.Skip("no windows")
		}
		model := NewModel()
		now = rapid.SampledFrom(modelStarts).Draw(t, "start")
		merchants := []string{"", "M1", "M2", "M3"}
		req := func(t *rapid.T) Request {
			k := own
			if rapid.IntRange(0, 3).Draw(t, "other key") == 0 {
				k = other
			}
			return Request{Key: k, Member: fmt.Sprintf("m%d", rapid.IntRange(0, 5).Draw(t, "member")),
				Amount: rapid.Int64Range(1, 6).Draw(t, "amount"), Merchant: rapid.SampledFrom(merchants).Draw(t, "merchant")}
		}
		t.Repeat(map[string]func(*rapid.T){
			"batch": func(t *rapid.T) {
				k := own
				if rapid.Bool().Draw(t, "other") {
					k = other
				}
				n := rapid.IntRange(2, 8).Draw(t, "size")
				var checks []BatchCheck
				var reqs []Request
				for i := 0; i < n; i++ {
					r := req(t)
					r.Key = k
					ws := applicable(cfg, r, now)
					if len(ws) == 0 {
						continue
					}
					reqs = append(reqs, r)
					checks = append(checks, BatchCheck{Windows: ws, Member: r.Member, Amount: r.Amount})
				}
				for len(checks) > 0 {
					got, err := s.CheckBatch(context.Background(), checks)
					if err != nil {
						t.Fatal(err)
					}
					f := len(got)
					part := checks[:f]
					if f > 1 && slices.ContainsFunc(part, func(c BatchCheck) bool { return !slices.EqualFunc(c.Windows, part[0].Windows, KeyWindow.Same) }) {
						mixed++
						if slices.ContainsFunc(part, func(c BatchCheck) bool {
							return slices.ContainsFunc(c.Windows, func(w KeyWindow) bool { return len(w.Reserved) > 0 })
						}) {
							mixedReserved++
						}
					}
					for i := range got {
						if f > 1 && got[i].Limits != nil {
							learnedBound++
						}
					}
					for i, c := range part {
						want := model.Check(c.Windows, c.Member, c.Amount, now)
						if fmt.Sprint(got[i]) != fmt.Sprint(want) {
							t.Fatalf("fit %d: member %d %v windows %v\n got %+v\nwant %+v", f, i, reqs[i], c.Windows, got[i], want)
						}
					}
					checks, reqs = checks[f:], reqs[f:]
				}
			},
			"advance": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.Int64Range(1, 3_000_000).Draw(t, "d")) * time.Microsecond)
			},
			"throttle": func(t *rapid.T) {
				ws := applicable(cfg, Request{Key: own}, now)
				ra := time.Duration(rapid.Int64Range(0, 2_000_000).Draw(t, "ra")) * time.Microsecond
				if err := s.Throttle(context.Background(), ws, ra); err != nil {
					t.Fatal(err)
				}
				model.Throttle(ws, now, ra)
			},
		})
	})
}
