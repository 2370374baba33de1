package ratelimit

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"payserver/internal/testutil"
)

// The property tests run random sequences of operations on the Model and on
// every store, and require the same answers: admissions, binding windows,
// counts of every window, duplicates and retry-after (exactly: all stores
// work in whole microseconds, the precision of Redis TIME).
//
// Sequences run PAYSERVER_PROPERTY_CHECKS times per store (default 1000;
// `-rapid.checks=N` overrides). A failure prints the minimal sequence and a
// seed; replay it with `go test -run 'TestStoresAgreeWithModel/redis'
// -rapid.seed=SEED ./internal/ratelimit/` (rapid also saves it under
// testdata/rapid for -rapid.failfile).

// modelTarget is one store driven with explicit time.
type modelTarget interface {
	// checkBatch decides members in order at now, in one store call where
	// the store has batches.
	checkBatch(t *rapid.T, k Key, ws []Window, members []string, now time.Time) []StoreResult
	release(t *rapid.T, k Key, ws []Window, member string)
	usage(t *rapid.T, k Key, ws []Window, now time.Time) []int64
}

// redisTarget runs the check script on a Redis server with the time passed
// in (ARGV[2]), the only difference from production, where Redis reads TIME.
type redisTarget struct{ s *RedisStore }

func (r redisTarget) checkBatch(t *rapid.T, k Key, ws []Window, members []string, now time.Time) []StoreResult {
	res, err := r.s.runCheck(context.Background(), r.s.keys(k, ws), checkArgsAt(micros(now), ws, members...))
	if err != nil {
		t.Fatalf("check script: %v", err)
	}
	out := make([]StoreResult, len(members))
	if err := parseCheckReply(res, len(ws), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (r redisTarget) release(t *rapid.T, k Key, ws []Window, member string) {
	if err := r.s.Release(context.Background(), k, ws, member); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func (r redisTarget) usage(t *rapid.T, k Key, ws []Window, now time.Time) []int64 {
	got, err := r.s.usageAt(context.Background(), micros(now), k, ws)
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	return got
}

// localTarget runs the in-process store with a settable clock.
type localTarget struct {
	s   *LocalStore
	now *time.Time
}

func (l localTarget) checkBatch(t *rapid.T, k Key, ws []Window, members []string, now time.Time) []StoreResult {
	*l.now = now
	out := make([]StoreResult, len(members))
	for i, m := range members {
		res, err := l.s.Check(context.Background(), k, ws, m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = res
	}
	return out
}

func (l localTarget) release(t *rapid.T, k Key, ws []Window, member string) {
	if err := l.s.Release(context.Background(), k, ws, member); err != nil {
		t.Fatal(err)
	}
}

func (l localTarget) usage(t *rapid.T, k Key, ws []Window, now time.Time) []int64 {
	*l.now = now
	got, err := l.s.Usage(context.Background(), k, ws)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

type namedTarget struct {
	name string
	make func(t *testing.T) modelTarget
}

func modelTargets() []namedTarget {
	redisOn := func(c redis.UniversalClient) modelTarget {
		s, _ := NewRedisStore(c, "test:model:")
		return redisTarget{s}
	}
	return []namedTarget{
		{"redis", func(t *testing.T) modelTarget { return redisOn(testutil.MustRedis(t)) }},
		{"cluster", func(t *testing.T) modelTarget { return redisOn(testutil.MustCluster(t)) }},
		{"embedded", func(t *testing.T) modelTarget {
			_, c := testutil.MustMiniredis(t)
			return redisOn(c)
		}},
		{"local", func(t *testing.T) modelTarget {
			now := time.Unix(0, 0)
			return localTarget{s: NewLocalStore(func() time.Time { return now }), now: &now}
		}},
	}
}

// propertyChecks sets rapid's number of sequences from
// PAYSERVER_PROPERTY_CHECKS (default 1000) unless -rapid.checks was given.
func propertyChecks(t *testing.T) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if set {
		return
	}
	n := "1000"
	if v := os.Getenv("PAYSERVER_PROPERTY_CHECKS"); v != "" {
		n = v
	}
	if _, err := strconv.Atoi(n); err != nil {
		t.Fatalf("PAYSERVER_PROPERTY_CHECKS=%q: %v", n, err)
	}
	if err := flag.Set("rapid.checks", n); err != nil {
		t.Fatal(err)
	}
}

// TestStoresAgreeWithModel: every store gives the model's answers on random
// sequences of checks (alone and in batches, members repeated across and
// within calls), releases, time moving by random amounts and exactly onto
// window edges (±1 µs), and limits and windows changing.
func TestStoresAgreeWithModel(t *testing.T) {
	propertyChecks(t)
	for _, nt := range modelTargets() {
		t.Run(nt.name, func(t *testing.T) {
			target := nt.make(t)
			rapid.Check(t, func(rt *rapid.T) { runModelSequence(rt, target) })
		})
	}
}

var modelSizes = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, time.Minute}

// genWindows draws 1 to 3 windows of distinct sizes, shortest first, with
// small limits so that windows fill often (0 now and then).
func genWindows(t *rapid.T) []Window {
	sizes := rapid.SliceOfNDistinct(rapid.SampledFrom(modelSizes), 1, 3, rapid.ID[time.Duration]).Draw(t, "sizes")
	slices.Sort(sizes)
	ws := make([]Window, len(sizes))
	for i, s := range sizes {
		limit := rapid.Int64Range(1, 4).Draw(t, "limit")
		if rapid.IntRange(0, 19).Draw(t, "closed") == 0 {
			limit = 0
		}
		ws[i] = Window{Limit: limit, Size: s}
	}
	return ws
}

func runModelSequence(t *rapid.T, target modelTarget) {
	k := Key{BizType: testutil.UniqueName("P"), Channel: "MODEL"}
	model := NewModel()
	ws := genWindows(t)
	// A fixed epoch plus a random offset; whole microseconds.
	now := time.UnixMicro(1_800_000_000_000_000 + rapid.Int64Range(0, 1_000_000).Draw(t, "start"))
	member := rapid.SampledFrom([]string{"m0", "m1", "m2", "m3", "m4", "m5"})

	compare := func(what string, got, want []StoreResult) {
		for i := range want {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("%s at %d µs, windows %v: member %d\n got %+v\nwant %+v (model)", what, micros(now), ws, i, got[i], want[i])
			}
		}
	}
	t.Repeat(map[string]func(*rapid.T){
		"check": func(t *rapid.T) {
			m := member.Draw(t, "member")
			compare("check "+m, target.checkBatch(t, k, ws, []string{m}, now), []StoreResult{model.Check(k, ws, m, now)})
		},
		"batch": func(t *rapid.T) {
			ms := rapid.SliceOfN(member, 2, 8).Draw(t, "members")
			compare(fmt.Sprintf("batch %v", ms), target.checkBatch(t, k, ws, ms, now), model.CheckBatch(k, ws, ms, now))
		},
		"release": func(t *rapid.T) {
			m := member.Draw(t, "member")
			target.release(t, k, ws, m)
			model.Release(k, ws, m)
		},
		"advance": func(t *rapid.T) {
			now = now.Add(time.Duration(rapid.Int64Range(0, 3_000_000).Draw(t, "µs")) * time.Microsecond)
		},
		// edge moves time to the instant a member leaves a window, or 1 µs
		// either side of it.
		"edge": func(t *rapid.T) {
			i := rapid.IntRange(0, len(ws)-1).Draw(t, "window")
			q := model.windows[windowID{k, ws[i].Size}]
			if q == nil || q.len() == 0 {
				t.Skip("empty window")
			}
			e := q.get(rapid.IntRange(0, q.len()-1).Draw(t, "entry"))
			at := time.UnixMicro(e.at + ws[i].Size.Microseconds() + rapid.Int64Range(-1, 1).Draw(t, "δ"))
			if at.Before(now) {
				t.Skip("in the past")
			}
			now = at
		},
		"limits": func(t *rapid.T) { ws = genWindows(t) },
		"": func(t *rapid.T) {
			got, want := target.usage(t, k, ws, now), model.Usage(k, ws, now)
			if !slices.Equal(got, want) {
				t.Fatalf("usage at %d µs, windows %v: got %v, want %v (model)", micros(now), ws, got, want)
			}
		},
	})
}
