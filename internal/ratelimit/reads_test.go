package ratelimit_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/ratelimit/redisstore"
	"payserver/internal/testutil"
)

// TestUsageOfAndLearnedOfReadEveryKey: on every store, UsageOf and
// LearnedOf answer each of many keys (more than one in-process read) with
// what was admitted into it and what its channel taught it, in the order
// asked, an unlimited key and a repeated key included.
func TestUsageOfAndLearnedOfReadEveryKey(t *testing.T) {
	// beforeRead, when a case sets it, runs after the admissions and
	// before the reads.
	var beforeRead func()
	for _, c := range []struct {
		name  string
		store func(t *testing.T) ratelimit.Store
	}{
		{"local", func(*testing.T) ratelimit.Store { return ratelimit.NewLocalStore(nil) }},
		{"durable", func(t *testing.T) ratelimit.Store {
			s, err := ratelimit.OpenDurableStore(filepath.Join(t.TempDir(), "limiter.journal"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"redis", func(t *testing.T) ratelimit.Store {
			s, err := redisstore.New(testutil.MustRedis(t), redisstore.Options{Prefix: "test:reads:"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"redis, its scripts flushed before the reads", func(t *testing.T) ratelimit.Store {
			client := testutil.MustRedis(t)
			s, err := redisstore.New(client, redisstore.Options{Prefix: "test:reads-flushed:"})
			if err != nil {
				t.Fatal(err)
			}
			beforeRead = func() {
				if err := client.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			return s
		}},
		{"cluster, one master's scripts flushed before the reads", func(t *testing.T) ratelimit.Store {
			client := testutil.MustCluster(t)
			s, err := redisstore.New(client, redisstore.Options{Prefix: "test:reads-flushed:"})
			if err != nil {
				t.Fatal(err)
			}
			beforeRead = func() {
				n, err := client.MasterForKey(context.Background(), "{ALIPAY}")
				if err != nil {
					t.Fatal(err)
				}
				if err := n.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			return s
		}},
		{"cluster", func(t *testing.T) ratelimit.Store {
			s, err := redisstore.New(testutil.MustCluster(t), redisstore.Options{Prefix: "test:reads:"})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"miniredis", func(t *testing.T) ratelimit.Store {
			_, client := testutil.MustMiniredis(t)
			s, err := redisstore.New(client, redisstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			beforeRead = nil
			l, err := ratelimit.New(c.store(t), ratelimit.Options{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// 600 keys: more than one in-process read (512 keys), and more than
			// one pipeline (256).
			const n = 600
			prefix := testutil.UniqueName("R")
			rule, cfg, keys := readKeys(prefix, n)
			unlimited := ratelimit.Key{BizType: prefix + "FREE", Channel: "ALIPAY"}
			l.SetConfig(cfg)
			admitted := func(i int) int64 { return int64(i % 4) }
			throttled := func(i int) bool { return i%50 == 7 }
			for i, k := range keys {
				var last ratelimit.Hold
				for j := int64(0); j < admitted(i); j++ {
					d, err := l.Allow(context.Background(), k, fmt.Sprintf("m%d", j))
					if err != nil || !d.Allowed {
						t.Fatalf("admit %s: %+v, %v", k, d, err)
					}
					last = d.Hold
				}
				if throttled(i) {
					if err := l.Throttled(context.Background(), last, 0); err != nil {
						t.Fatal(err)
					}
				}
			}

			asked := append(append([]ratelimit.Key{}, keys...), unlimited, keys[3])
			source := func(i int) int { // the index in keys of asked[i]
				if i == n+1 {
					return 3
				}
				return i
			}
			if beforeRead != nil {
				beforeRead()
			}
			usage := l.UsageOf(context.Background(), asked)
			learned := l.LearnedOf(context.Background(), asked)
			if len(usage) != len(asked) || len(learned) != len(asked) {
				t.Fatalf("%d usages and %d learned for %d keys", len(usage), len(learned), len(asked))
			}
			for i, k := range asked {
				u, ls := usage[i], learned[i]
				if u.Err != nil || ls.Err != nil {
					t.Fatalf("%s: usage error %v, learned error %v", k, u.Err, ls.Err)
				}
				if k == unlimited {
					if !u.Rule.IsUnlimited() || u.Counts != nil || ls.Limits != nil {
						t.Errorf("%s (unlimited) = %+v, %+v; want an unlimited rule, no counts, no learned limit", k, u, ls)
					}
					continue
				}
				at := source(i)
				if want := []int64{admitted(at), admitted(at)}; !reflect.DeepEqual(u.Counts, want) || !reflect.DeepEqual(u.Rule, rule) {
					t.Errorf("%s: counts %v under %+v, want %v under the key's rule", k, u.Counts, u.Rule, want)
				}
				switch {
				case throttled(at) && (len(ls.Limits) != 1 || ls.Limits[0].Key != k || ls.Limits[0].Window != rule.Windows[0]):
					t.Errorf("%s (throttled) learned %+v, want one learned limit on its minute window", k, ls.Limits)
				case !throttled(at) && len(ls.Limits) != 0:
					t.Errorf("%s (never throttled) learned %+v, want none", k, ls.Limits)
				}
			}
		})
	}
}

// TestUsageOfAfterItsContextEnded: keys read after the context ended
// carry its error, not a count.
func TestUsageOfAfterItsContextEnded(t *testing.T) {
	l, err := ratelimit.New(ratelimit.NewLocalStore(nil), ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := ratelimit.Key{BizType: "ONLINE_PAY", Channel: "ALIPAY"}
	l.SetConfig(&ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{k: {Windows: []ratelimit.Window{{Limit: 5, Size: time.Second}}}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, u := range l.UsageOf(ctx, []ratelimit.Key{k}) {
		if u.Err == nil || u.Counts != nil {
			t.Errorf("key %d read after the context ended: %+v, want its error", i, u)
		}
	}
	for i, ls := range l.LearnedOf(ctx, []ratelimit.Key{k}) {
		if ls.Err == nil {
			t.Errorf("learned limits of key %d read after the context ended: %+v, want its error", i, ls)
		}
	}
}

// readKeys returns n keys on ALIPAY named from prefix, each with rule (a
// learning minute window and a day), and the limits that give it them.
func readKeys(prefix string, n int) (ratelimit.Rule, *ratelimit.Config, []ratelimit.Key) {
	rule := ratelimit.Rule{Windows: []ratelimit.Window{
		{Limit: 100, Size: time.Minute},
		{Limit: 1000, Calendar: ratelimit.Calendar{Unit: ratelimit.CalendarDay, Zone: time.UTC}},
	}}
	cfg := &ratelimit.Config{Rules: map[ratelimit.Key]ratelimit.Rule{}}
	keys := make([]ratelimit.Key, n)
	for i := range keys {
		keys[i] = ratelimit.Key{BizType: fmt.Sprintf("%s%05d", prefix, i), Channel: "ALIPAY"}
		cfg.Rules[keys[i]] = rule
	}
	return rule, cfg, keys
}

// keyByKey hides a store's KeysReader: the limiter reads it key by key,
// readParallelism keys at a time.
type keyByKey struct{ ratelimit.Store }

func (s keyByKey) Learned(ctx context.Context, windows []ratelimit.KeyWindow) ([]ratelimit.LearnedLimit, error) {
	return s.Store.(ratelimit.Learner).Learned(ctx, windows)
}
func (s keyByKey) Throttle(ctx context.Context, windows []ratelimit.KeyWindow, retryAfter time.Duration) error {
	return s.Store.(ratelimit.Learner).Throttle(ctx, windows, retryAfter)
}
func (s keyByKey) ResetLearned(ctx context.Context, windows []ratelimit.KeyWindow) error {
	return s.Store.(ratelimit.Learner).ResetLearned(ctx, windows)
}

// BenchmarkUsageOfPipelinedRatio reads the use (UsageOf) and the learned
// limits (LearnedOf) of PAYSERVER_BENCH_KEYS keys (default 1,000), each
// with a learning minute window and a day, on Redis: pipelined against key
// by key, interleaved call by call, and reports the time of each read of
// all the keys and their ratio (under 1: pipelined is faster).
func BenchmarkUsageOfPipelinedRatio(b *testing.B) {
	n := 1000
	if v := os.Getenv("PAYSERVER_BENCH_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	s, err := redisstore.New(testutil.MustRedis(b), redisstore.Options{Prefix: "bench:reads:"})
	if err != nil {
		b.Fatal(err)
	}
	_, cfg, keys := readKeys(testutil.UniqueName("B"), n)
	var limiters [2]*ratelimit.Limiter
	for i, st := range []ratelimit.Store{s, keyByKey{s}} {
		if limiters[i], err = ratelimit.New(st, ratelimit.Options{Timeout: 5 * time.Second}); err != nil {
			b.Fatal(err)
		}
		limiters[i].SetConfig(cfg)
	}
	for i, k := range keys {
		if _, err := limiters[0].Allow(context.Background(), k, fmt.Sprint("m", i)); err != nil {
			b.Fatal(err)
		}
	}
	read := func(l *ratelimit.Limiter) time.Duration {
		t0 := time.Now()
		for _, u := range l.UsageOf(context.Background(), keys) {
			if u.Err != nil {
				b.Fatal(u.Err)
			}
		}
		for _, ls := range l.LearnedOf(context.Background(), keys) {
			if ls.Err != nil {
				b.Fatal(ls.Err)
			}
		}
		return time.Since(t0)
	}
	var piped, each time.Duration
	rounds := 0
	for b.Loop() {
		if rounds%2 == 0 {
			piped += read(limiters[0])
			each += read(limiters[1])
		} else {
			each += read(limiters[1])
			piped += read(limiters[0])
		}
		rounds++
	}
	b.ReportMetric(float64(piped.Microseconds())/float64(rounds), "pipelined-µs/read")
	b.ReportMetric(float64(each.Microseconds())/float64(rounds), "keybykey-µs/read")
	b.ReportMetric(float64(piped)/float64(each), "pipelined/keybykey")
}

// TestUsageOfAPausedClusterNodeFailsOnlyItsKeys: a Cluster master that
// stops answering fails the reads of the keys it holds, and only theirs:
// the keys of the other masters are read (each node has a pipeline of its
// own). Every key answers its count or an error, never another count.
func TestUsageOfAPausedClusterNodeFailsOnlyItsKeys(t *testing.T) {
	seed := testutil.MustCluster(t)
	// As payserver's client: a read gives up after its timeout.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seed.Options().Addrs, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, redisstore.Options{Prefix: "test:reads-paused:"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, ratelimit.Options{}) // the default timeout: 500 ms for a read of many keys
	if err != nil {
		t.Fatal(err)
	}
	// 16 channels, so that every master holds some keys.
	_, cfg, keys := readKeys(testutil.UniqueName("P"), 480)
	channels := map[ratelimit.Key]ratelimit.Rule{}
	for i, k := range keys {
		rule := cfg.Rules[k]
		keys[i].Channel = fmt.Sprintf("CH%02d", i%16)
		channels[keys[i]] = rule
	}
	l.SetConfig(&ratelimit.Config{Rules: channels})
	admitted := func(i int) int64 { return int64(i%3 + 1) }
	for i, k := range keys {
		for j := range admitted(i) {
			if d, err := l.Allow(context.Background(), k, fmt.Sprint("m", j)); err != nil || !d.Allowed {
				t.Fatalf("admit %s: %+v, %v", k, d, err)
			}
		}
	}
	paused, err := c.MasterForKey(context.Background(), "{"+keys[0].Channel+"}")
	if err != nil {
		t.Fatal(err)
	}
	if err := paused.Do(context.Background(), "CLIENT", "PAUSE", 1200, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { time.Sleep(1300 * time.Millisecond) }) // the pause ends before the next test
	usage := l.UsageOf(context.Background(), keys)
	var onPaused, failedElsewhere int
	for i, k := range keys {
		n, err := c.MasterForKey(context.Background(), "{"+k.Channel+"}")
		if err != nil {
			t.Fatal(err)
		}
		here := n.Options().Addr == paused.Options().Addr
		if here {
			onPaused++
		}
		u := usage[i]
		switch {
		case u.Err != nil && !here:
			failedElsewhere++
		case u.Err == nil && !reflect.DeepEqual(u.Counts, []int64{admitted(i), admitted(i)}):
			t.Errorf("%s: counts %v, want %d in each window", k, u.Counts, admitted(i))
		}
	}
	if onPaused == 0 || onPaused == len(keys) {
		t.Fatalf("%d of %d keys on the paused master: the test needs keys on it and elsewhere", onPaused, len(keys))
	}
	if failedElsewhere > 0 {
		t.Errorf("%d keys of the masters still answering failed with the paused one's (%d keys there)", failedElsewhere, onPaused)
	}
}

// TestUsageOfFollowsASlotThatMoved: a key whose slot moved to another
// master after the client last read the cluster's layout is answered
// MOVED by its old master; its read goes again through the cluster client,
// which follows the redirect, and the key answers its count.
func TestUsageOfFollowsASlotThatMoved(t *testing.T) {
	ctx := context.Background()
	c := testutil.MustCluster(t)
	s, err := redisstore.New(c, redisstore.Options{Prefix: "test:reads-moved:"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(s, ratelimit.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, cfg, keys := readKeys(testutil.UniqueName("MV"), 20)
	moved := map[ratelimit.Key]ratelimit.Rule{}
	channel := testutil.UniqueName("MOVE")
	for i, k := range keys {
		rule := cfg.Rules[k]
		keys[i].Channel = channel
		moved[keys[i]] = rule
	}
	l.SetConfig(&ratelimit.Config{Rules: moved})
	for _, k := range keys {
		if d, err := l.Allow(ctx, k, "m"); err != nil || !d.Allowed {
			t.Fatalf("admit %s: %+v, %v", k, d, err)
		}
	}
	// Move the channel's slot to another master, behind the client's back.
	tag := "{" + channel + "}"
	slot := c.ClusterKeySlot(ctx, tag).Val()
	src, err := c.MasterForKey(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var others []string // ForEachMaster calls its function on every master at once
	_ = c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
		if addr := n.Options().Addr; addr != src.Options().Addr {
			mu.Lock()
			others = append(others, addr)
			mu.Unlock()
		}
		return nil
	})
	if len(others) == 0 {
		t.Fatal("the cluster has one master")
	}
	dst := redis.NewClient(&redis.Options{Addr: others[0]})
	t.Cleanup(func() { _ = dst.Close() })
	srcID, dstID := src.ClusterMyID(ctx).Val(), dst.ClusterMyID(ctx).Val()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	host, port, _ := net.SplitHostPort(dst.Options().Addr)
	for {
		ks := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Val()
		if len(ks) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range ks {
			args = append(args, k)
		}
		must(src.Do(ctx, args...).Err())
	}
	_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
	})
	for i, u := range l.UsageOf(ctx, keys) {
		if u.Err != nil || !reflect.DeepEqual(u.Counts, []int64{1, 1}) {
			t.Errorf("%s after its slot moved: counts %v, error %v; want 1 in each window", keys[i], u.Counts, u.Err)
		}
	}
}
