package redisstore

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// The model against the store with batches and limits big enough that a
// slice's hash of amounts fills, so that records go to bursts' hashes and
// spills (identity.lua), with releases and retries in later slices, on
// windows from 10 ms to 7 days. After each run every member a window
// holds has a findable record and every hash of records has a TTL.
func TestBigBatchesAgreeWithModel(t *testing.T) {
	t.Run("redis", func(t *testing.T) { bigBatches(t, testutil.MustRedis(t)) })
	t.Run("cluster", func(t *testing.T) { bigBatches(t, testutil.MustCluster(t)) })
	t.Run("embedded", func(t *testing.T) { _, c := testutil.MustMiniredis(t); bigBatches(t, c) })
}

func bigBatches(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		at := time.UnixMicro(1_795_000_000_000_000 + rng.Int63n(1<<30))
		s, _ := New(c, Options{Prefix: "test:fz:", Now: func() time.Time { return at }})
		model := ratelimit.NewModel()
		k := ratelimit.Key{BizType: "P", Channel: testutil.UniqueName("FZ")}
		sizes := []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute, 24 * time.Hour, 7 * 24 * time.Hour}
		var wins []ratelimit.Window
		for n := 1 + rng.Intn(2); n > 0; n-- {
			wins = append(wins, ratelimit.Window{Limit: int64(100 + rng.Intn(600)), Size: sizes[rng.Intn(len(sizes))]})
		}
		if len(wins) == 2 && wins[0].Size == wins[1].Size {
			wins = wins[:1]
		}
		ws := ratelimit.KeyWindows(k, wins)
		pool := 400 + rng.Intn(400)
		amount := map[string]int64{}
		for step := 0; step < 60; step++ {
			switch rng.Intn(6) {
			case 0:
				at = at.Add(time.Duration(rng.Intn(4000)) * time.Microsecond)
			case 1:
				at = at.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)
			}
			if rng.Intn(4) == 0 {
				for r := rng.Intn(60); r > 0; r-- {
					m := fmt.Sprintf("m%d", rng.Intn(pool))
					var got, want bool
					var err error
					switch rng.Intn(3) {
					case 0:
						got, err = s.Release(ctx, ws, m)
						want = model.Release(ws, m)
					default:
						a := amount[m] + int64(rng.Intn(2))
						got, err = s.ReleaseIfAmount(ctx, ws, m, a)
						want = model.ReleaseIfAmount(ws, m, a)
					}
					if err != nil || got != want {
						t.Fatalf("seed %d step %d: release %s: %v %v, model %v", seed, step, m, got, err, want)
					}
				}
				continue
			}
			var checks []BatchCheck
			for j := 1 + rng.Intn(250); j > 0; j-- {
				m := fmt.Sprintf("m%d", rng.Intn(pool))
				a, ok := amount[m]
				if !ok || rng.Intn(5) == 0 {
					a = int64(1 + rng.Intn(3))
				}
				amount[m] = a
				checks = append(checks, BatchCheck{Windows: ws, Member: m, Amount: a})
			}
			for len(checks) > 0 {
				got, err := s.CheckBatch(ctx, checks)
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				for i, g := range got {
					ch := checks[i]
					w := model.Check(ws, ch.Member, ch.Amount, at)
					if g.Allowed != w.Allowed || g.Duplicate != w.Duplicate || g.Conflict != w.Conflict || g.Count != w.Count {
						t.Fatalf("seed %d step %d (%v): %s for %d: got allowed %v dup %v conflict %v count %d; model %v %v %v %d",
							seed, step, wins, ch.Member, ch.Amount, g.Allowed, g.Duplicate, g.Conflict, g.Count, w.Allowed, w.Duplicate, w.Conflict, w.Count)
					}
				}
				checks = checks[len(got):]
			}
		}
		// every member held has a findable record; every hash has a TTL
		for _, w := range ws {
			wk := s.RedisKey(w)
			missing, err := unrecordedScript.Run(ctx, c, []string{wk}, w.Size.Microseconds()).Int64()
			if err != nil || missing != 0 {
				t.Fatalf("seed %d: %s: %d members without a record (%v)", seed, wk, missing, err)
			}
			var node redis.Cmdable = c
			if cc, ok := c.(*redis.ClusterClient); ok {
				node, _ = cc.MasterForKey(ctx, wk)
			}
			ids := node.Keys(ctx, wk+":#~*").Val()
			if len(ids) == 0 && c.ZCard(ctx, wk).Val() > 0 {
				t.Fatalf("seed %d: no hashes found for %s", seed, wk)
			}
			for _, id := range ids {
				if ttl := c.PTTL(ctx, id).Val(); ttl < 0 {
					t.Fatalf("seed %d: %s has no TTL", seed, id)
				}
			}
		}
	}
}

// unrecordedScript counts the members of the window KEYS[1] (size ARGV[1]
// µs) whose record of their amount is not found.
var unrecordedScript = redis.NewScript(identityLua + `
local size = tonumber(ARGV[1])
local zs = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local missing = 0
for e = 1, #zs, 2 do
  if idFind(KEYS[1], size, zs[e + 1], zs[e]) == nil then
    missing = missing + 1
  end
end
return missing
`)
