package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/batch"
	"payserver/internal/testutil"
)

// TestCoalescedMerchantCallsAgreeWithModel: the windows of real requests
// (applicable: their own key and the channel-wide key with reservations,
// merchant limits on both, learned limits after throttles), several
// merchants and bizTypes, split into calls as the coalescer splits them
// (fit) and sent as it sends them (oneCall): each member's answer is the
// model's for its own windows, member by member in arrival order.
func TestCoalescedMerchantCallsAgreeWithModel(t *testing.T) {
	var mixed, mixedReserved, learnedBound int
	defer func() {
		t.Logf("calls of several merchants %d, %d of them with reservations; answers under a learned limit %d", mixed, mixedReserved, learnedBound)
	}()
	testutil.PropertyChecks(t, 200)
	_, c := testutil.MustMiniredis(t)
	s, _ := NewRedisStore(c, "test:cm:")
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
		now := rapid.SampledFrom(modelStarts).Draw(t, "start")
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
				var calls []*batch.Call[checkArg, StoreResult]
				var reqs []Request
				for i := 0; i < n; i++ {
					r := req(t)
					r.Key = k
					ws := applicable(cfg, r, now)
					if len(ws) == 0 {
						continue
					}
					reqs = append(reqs, r)
					calls = append(calls, &batch.Call[checkArg, StoreResult]{Arg: checkArg{windows: ws, member: checkMember{r.Member, r.Amount}}})
				}
				for len(calls) > 0 {
					f := fit(calls)
					part := calls[:f]
					var got []StoreResult
					if f == 1 {
						res, err := s.runCheck(context.Background(), part[0].Arg.windows, s.checkKeys(part[0].Arg.windows, part[0].Arg.member), checkArgsAt(micros(now), now, part[0].Arg.windows, part[0].Arg.member))
						if err != nil {
							t.Fatal(err)
						}
						got = make([]StoreResult, 1)
						if err := parseCheckReply(res, len(part[0].Arg.windows), got); err != nil {
							t.Fatalf("one: %v: %v res %v", err, part[0].Arg.windows, res)
						}
					} else {
						ws, ow := oneCall(part)
						if ow != nil {
							mixed++
							for _, w := range ws {
								if len(w.Reserved) > 0 {
									mixedReserved++
									break
								}
							}
						}
						ms := make([]checkMember, len(part))
						for i, c := range part {
							ms[i] = c.Arg.member
						}
						res, err := s.runCheck(context.Background(), ws, s.checkKeysOwn(ws, ow, ms), checkArgsOwn(micros(now), now, ws, ow, ms))
						if err != nil {
							t.Fatal(err)
						}
						got = make([]StoreResult, len(part))
						if err := parseCheckReplyOwn(res, len(ws), ow, got); err != nil {
							t.Fatalf("%v: union %v own %v res %v", err, ws, ow, res)
						}
					}
					for i := range got {
						if f > 1 && got[i].Limits != nil {
							learnedBound++
						}
					}
					for i, c := range part {
						want := model.Check(c.Arg.windows, c.Arg.member.id, c.Arg.member.amount, now)
						if fmt.Sprint(got[i]) != fmt.Sprint(want) {
							t.Fatalf("fit %d: member %d %v windows %v\n got %+v\nwant %+v", f, i, reqs[i], c.Arg.windows, got[i], want)
						}
					}
					calls, reqs = calls[f:], reqs[f:]
				}
			},
			"advance": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.Int64Range(1, 3_000_000).Draw(t, "d")) * time.Microsecond)
			},
			"throttle": func(t *rapid.T) {
				ws := applicable(cfg, Request{Key: own}, now)
				ra := time.Duration(rapid.Int64Range(0, 2_000_000).Draw(t, "ra")) * time.Microsecond
				if _, err := s.learnAt(context.Background(), micros(now), learnThrottle, ws, ra); err != nil {
					t.Fatal(err)
				}
				model.Throttle(ws, now, ra)
			},
		})
	})
}
