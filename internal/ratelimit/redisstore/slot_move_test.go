package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
	"payserver/internal/testutil"
)

// While a channel's Cluster slot moves to another node, the node it leaves
// may not hold a hash of amounts a check needs (here the hash of a new
// slice: the window's sorted set is still on the source). The check must
// then record nothing, and say so with an error the store marks as never
// sent (TRYAGAIN, which the client also retries), never admit the member
// without its record and answer an error that reads as never sent.
func TestACheckDuringASlotsMoveRecordsNothingOrAll(t *testing.T) {
	ctx := context.Background()
	c := testutil.MustCluster(t)
	t0 := time.UnixMicro(1 << 23 * 214_000_000) // a multiple of 2^23 µs
	at := t0
	s, err := New(c, Options{Prefix: "test:mig:", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	k := ratelimit.Key{BizType: "P", Channel: testutil.UniqueName("MIG")}
	w1 := ratelimit.KeyWindows(k, []ratelimit.Window{{Limit: 100, Size: 24 * time.Hour}}) // slice 2^22 µs
	wk1 := s.RedisKey(w1[0])
	if r, err := s.Check(ctx, w1, "a", 5); err != nil || !r.Allowed {
		t.Fatalf("a: %+v %v", r, err)
	}

	// The slot's master (src) starts moving it to another master (dst).
	slot := int(c.ClusterKeySlot(ctx, wk1).Val())
	src, err := c.MasterForKey(ctx, wk1)
	if err != nil {
		t.Fatal(err)
	}
	// ForEachMaster calls its func on every master at once.
	var mu sync.Mutex
	var dst *redis.Client
	_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Options().Addr != src.Options().Addr && dst == nil {
			dst = m
		}
		return nil
	})
	id := func(n *redis.Client) string { return n.Do(ctx, "CLUSTER", "MYID").Val().(string) }
	srcID, dstID := id(src), id(dst)
	must := func(cmd *redis.Cmd) {
		t.Helper()
		if cmd.Err() != nil {
			t.Fatalf("%v: %v", cmd.Args(), cmd.Err())
		}
	}
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID))
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID))
	t.Cleanup(func() {
		// delete what the test left on dst, then give the slot back to src
		keys, _ := dst.Do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, 1000).StringSlice()
		for _, key := range keys {
			_, _ = dst.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "ASKING")
				p.Del(ctx, key)
				return nil
			})
		}
		for _, n := range []*redis.Client{src, dst} {
			_ = n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", srcID).Err()
		}
		for _, n := range []*redis.Client{src, dst} {
			_ = n.Do(ctx, "CLUSTER", "SETSLOT", slot, "STABLE").Err()
		}
	})

	at = t0.Add(1 << 23 * time.Microsecond)
	before := src.ZCard(ctx, wk1).Val()
	r, err := s.Check(ctx, w1, "b", 7)
	after := src.ZCard(ctx, wk1).Val()
	if err == nil {
		if !r.Allowed || after != before+1 {
			t.Fatalf("b admitted without error: %+v, members %d -> %d", r, before, after)
		}
		if v := src.HGet(ctx, fmt.Sprintf("%s:#~%d", wk1, at.UnixMicro()>>22), "b").Val(); v != "7" {
			t.Fatalf("b admitted, its record %q, want 7", v)
		}
		return
	}
	if !errors.Is(err, ratelimit.ErrNotSent) || !strings.Contains(err.Error(), "TRYAGAIN") || after != before {
		t.Fatalf("check of b during the move: %v (ErrNotSent %v); members %d -> %d; want TRYAGAIN, not sent, nothing recorded",
			err, errors.Is(err, ratelimit.ErrNotSent), before, after)
	}
}
