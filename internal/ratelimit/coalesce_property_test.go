package ratelimit_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/ratelimit/redisstore/redisstoretest"
	"payserver/internal/testutil"
)

// concurrentCheck is one check of a concurrent run and the store's answer.
type concurrentCheck struct {
	member string
	res    ratelimit.StoreResult
}

// agreeWithModelInSomeOrder checks that the answers of checks that ran
// concurrently, all within one window and with no release, are the model's
// for some serial order of them: the order in which the answers say Redis
// decided (members admitted first, then their repeats, then the refusals),
// replayed through the model at one instant. Any correct atomic store gives
// answers that fit that order whatever order its calls really ran in; it
// fails when a member is counted twice, more members are admitted than the
// limits allow, or a member is refused while the windows had room.
func agreeWithModelInSomeOrder(ws []ratelimit.KeyWindow, checks []concurrentCheck) error {
	rank := func(r ratelimit.StoreResult) int {
		switch {
		case r.Allowed && !r.Duplicate:
			return 0
		case r.Allowed:
			return 1
		}
		return 2
	}
	order := append([]concurrentCheck(nil), checks...)
	sort.SliceStable(order, func(i, j int) bool { return rank(order[i].res) < rank(order[j].res) })
	model, now := ratelimit.NewModel(), time.Now()
	for i, c := range order {
		want := model.Check(ws, c.member, 0, now)
		if c.res.Allowed != want.Allowed || c.res.Duplicate != want.Duplicate {
			return fmt.Errorf("check %d of %d in the order, member %s: store allowed %v duplicate %v, model allowed %v duplicate %v",
				i, len(order), c.member, c.res.Allowed, c.res.Duplicate, want.Allowed, want.Duplicate)
		}
	}
	return nil
}

// runConcurrentChecks runs each caller's members in turn, all callers at
// once, and returns every check with its answer.
func runConcurrentChecks(s ratelimit.Store, ws []ratelimit.KeyWindow, callers [][]string) ([]concurrentCheck, error) {
	out := make([][]concurrentCheck, len(callers))
	errs := make([]error, len(callers))
	var wg sync.WaitGroup
	for i, members := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range members {
				res, err := s.Check(context.Background(), ws, m, 0)
				if err != nil {
					errs[i] = err
					return
				}
				out[i] = append(out[i], concurrentCheck{m, res})
			}
		}()
	}
	wg.Wait()
	var all []concurrentCheck
	for i := range out {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, out[i]...)
	}
	return all, nil
}

// drawConcurrentRun draws windows of a fresh key (its own and its
// channel-wide key's count windows, small limits) and callers whose members
// come from a small pool, so that one requestId often sits in two calls in
// flight at once and in one batch twice.
func drawConcurrentRun(t *rapid.T) ([]ratelimit.KeyWindow, [][]string) {
	own := newKey()
	wide := ratelimit.Key{BizType: "*", Channel: own.Channel + testutil.UniqueName("W")}
	own.Channel = wide.Channel
	ws := []ratelimit.KeyWindow{{Key: own, Window: ratelimit.Window{Limit: rapid.Int64Range(1, 12).Draw(t, "limit"), Size: time.Minute}}}
	if rapid.Bool().Draw(t, "wide") {
		ws = append(ws, ratelimit.KeyWindow{Key: wide, Window: ratelimit.Window{Limit: rapid.Int64Range(1, 12).Draw(t, "wideLimit"), Size: time.Minute}})
	}
	pool := rapid.IntRange(1, 24).Draw(t, "pool")
	callers := make([][]string, rapid.IntRange(2, 32).Draw(t, "callers"))
	for i := range callers {
		callers[i] = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string {
			return fmt.Sprint("m", rapid.IntRange(0, pool-1).Draw(t, "member"))
		}), 1, 4).Draw(t, "members")
	}
	return ws, callers
}

// TestCoalescedConcurrentChecksAgreeWithModel: checks of one key from many
// callers at once, members repeated within and across concurrent calls,
// through the coalescer (batches split small), on Redis and Cluster: the
// answers are the model's for some serial order, and each window holds as
// many members as were admitted.
func TestCoalescedConcurrentChecksAgreeWithModel(t *testing.T) {
	testutil.PropertyChecks(t, 200)
	for name, mk := range map[string]func(t *testing.T) ratelimit.Store{
		"redis": func(t *testing.T) ratelimit.Store {
			return mustStoreWith(t, testutil.MustRedis(t), redisstore.Options{Coalesce: true, MaxBatch: 4})
		},
		"cluster": func(t *testing.T) ratelimit.Store {
			return mustStoreWith(t, testutil.MustCluster(t), redisstore.Options{Coalesce: true, MaxBatch: 4})
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			rapid.Check(t, func(rt *rapid.T) {
				ws, callers := drawConcurrentRun(rt)
				checks, err := runConcurrentChecks(s, ws, callers)
				if err != nil {
					rt.Fatal(err)
				}
				if err := agreeWithModelInSomeOrder(ws, checks); err != nil {
					rt.Fatal(err)
				}
				admitted := map[string]bool{}
				for _, c := range checks {
					if c.res.Allowed {
						admitted[c.member] = true
					}
				}
				usage, err := s.Usage(context.Background(), ws)
				if err != nil {
					rt.Fatal(err)
				}
				for i, u := range usage {
					if u != int64(len(admitted)) {
						rt.Fatalf("window %d holds %d, want the %d members admitted", i, u, len(admitted))
					}
				}
			})
		})
	}
}

// TestConcurrentModelCheckHasTeeth: the same check fails on the naive
// three-command store, which over-admits under concurrency.
func TestConcurrentModelCheckHasTeeth(t *testing.T) {
	naive := &redisstoretest.NaiveStore{Client: testutil.MustRedis(t), Prefix: "test:naive:"}
	ws := ratelimit.KeyWindows(newKey(), []ratelimit.Window{{Limit: 5, Size: time.Minute}})
	for round := range 20 {
		callers := make([][]string, 64)
		for i := range callers {
			callers[i] = []string{fmt.Sprint("r", round, "c", i)}
		}
		checks, err := runConcurrentChecks(naive, ws, callers)
		if err != nil {
			t.Fatal(err)
		}
		if err := agreeWithModelInSomeOrder(ws, checks); err != nil {
			t.Logf("round %d: %v", round, err)
			return
		}
		ws = ratelimit.KeyWindows(newKey(), []ratelimit.Window{{Limit: 5, Size: time.Minute}})
	}
	t.Fatal("the naive store agreed with the model in 20 rounds of 64 concurrent checks; the check has no teeth")
}
