// Package redisstore keeps the limiter's windows in Redis (standalone or
// Cluster): a ratelimit.Store that decides each check with one atomic Lua
// call, at Redis's time. One sorted set per bizType+channel window, whose
// members are requestIds and whose scores are their admission times, or a
// hash per calendar window (check.lua). The rules are ratelimit.Model's,
// and the property tests hold every script to it.
//
// It also keeps what a shared store keeps beside the windows: the learned
// limits (ratelimit.Learner, learn.go) and the windows each key has had
// (ratelimit.WindowRegistry, registry.go). Concurrent checks of one key
// can share one script call (coalesce.go).
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
)

// defaultKeyPrefix starts every Redis key the limiter writes.
const defaultKeyPrefix = "payserver:rl:"

// Store keeps one sorted set per key and window in Redis (standalone or
// Cluster) and checks them with one Lua call.
type Store struct {
	client redis.UniversalClient
	prefix string
	// now, when set, is the time the scripts decide at (Options.Now).
	now func() time.Time
	// co, when set, coalesces concurrent checks of one key into one call
	// (see Options.Coalesce).
	co *coalescer
}

// The limiter finds what a store keeps beyond its windows by type
// assertion: a method whose signature drifted would turn a feature off
// without a word.
var (
	_ ratelimit.Store          = (*Store)(nil)
	_ ratelimit.WindowKeyer    = (*Store)(nil)
	_ ratelimit.Learner        = (*Store)(nil)
	_ ratelimit.WindowRegistry = (*Store)(nil)
	_ ratelimit.KeysReader     = (*Store)(nil)
)

// Options configures a Store. The zero value is a plain client,
// defaultKeyPrefix and Redis's time.
type Options struct {
	// Prefix starts every key. Empty means defaultKeyPrefix.
	Prefix string
	// Coalesce sends the checks of one key that arrive while a call for that
	// key is in flight to Redis together, as ONE script call that decides
	// them in arrival order exactly as that many single calls at the same
	// instant would (see checkScript): same atomicity and exactness, a
	// fraction of the Redis work and round trips per check under
	// concurrency. An idle key's check is sent at once, so it adds no
	// latency when there is no concurrency. The checks of one call are
	// decided at one instant, the call's Redis TIME: its admissions share
	// it (ratelimit.StoreResult.At).
	Coalesce bool
	// MaxBatch bounds the checks in one coalesced call. Zero means 128.
	MaxBatch int
	// Now, when set, is the time every script decides at, in whole
	// microseconds, in place of Redis TIME; calendar periods are found
	// around it too. Nil (production) means Redis's time, with calendar
	// periods around the app server's clock. Tests set it to drive time.
	Now func() time.Time
}

// New returns a store on client configured by opts.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil redis client")
	}
	s := &Store{client: client, prefix: opts.Prefix, now: opts.Now}
	if s.prefix == "" {
		s.prefix = defaultKeyPrefix
	}
	if opts.Coalesce {
		s.co = newCoalescer(s, opts.MaxBatch)
	}
	return s, nil
}

// at returns the time of a script call as the scripts take it: 0 for Redis
// TIME, or µs since the epoch (Options.Now); and the time calendar periods
// are found around.
func (s *Store) at() (nowMicros int64, periodsAt time.Time) {
	if s.now == nil {
		return 0, time.Now()
	}
	t := s.now()
	return micros(t), t
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// RedisKey returns the Redis key of window w: prefix{CHANNEL}:BIZTYPE:ID,
// the prefix followed by ratelimit.WindowKey(w). The channel sits in a hash tag, so
// every window of one channel, its channel-wide key's included, lives in
// one Cluster slot and one script call can check them together; codes are
// drawn from [A-Z0-9_] (and "*"), and IDs hold no ':', so no two windows
// share a key. A sliding window's key holds a sorted set (member: the
// requestId, score: its admission time in µs); a calendar window's, a hash
// (field: the requestId, value: its amount).
func (s *Store) RedisKey(w ratelimit.KeyWindow) string { return s.prefix + ratelimit.WindowKey(w) }

// WindowKey implements ratelimit.WindowKeyer: the window's Redis key
// (RedisKey).
func (s *Store) WindowKey(w ratelimit.KeyWindow) string { return s.RedisKey(w) }

// keys returns the KEYS of a script call for windows: each window's key,
// then the amounts hash of each sliding amount window.
func (s *Store) keys(windows []ratelimit.KeyWindow) []string {
	keys := make([]string, len(windows), len(windows)+1)
	for i, w := range windows {
		keys[i] = s.RedisKey(w)
	}
	for i, w := range windows {
		if w.Amount && !w.IsCalendar() {
			keys = append(keys, keys[i]+":v")
		}
	}
	return keys
}

// Check implements ratelimit.Store with one EVALSHA (EVAL after NOSCRIPT,
// transparently), shared with the concurrent checks of the same windows
// when the store coalesces.
func (s *Store) Check(ctx context.Context, windows []ratelimit.KeyWindow, member string, amount int64) (ratelimit.StoreResult, error) {
	if len(windows) == 0 {
		return ratelimit.StoreResult{Allowed: true}, nil
	}
	var res ratelimit.StoreResult
	var err error
	if s.co != nil {
		res, err = s.co.check(ctx, windows, member, amount)
	} else {
		res, err = s.checkOne(ctx, windows, member, amount)
	}
	if err != nil && neverReachedRedis(err) {
		err = fmt.Errorf("%w: %w", ratelimit.ErrNotSent, err)
	}
	return res, err
}

// neverReachedRedis reports whether a failed call provably recorded
// nothing: no connection (dial error, pool exhausted, client closed) or an
// error reply. Redis gives one before running the script (a moved or
// moving slot, OOM at its first write, NOSCRIPT), and the check scripts
// give one only before they record anything (TRYAGAIN when a hash of
// amounts is not on the node, identity.lua; a calendar period too far
// from the app server's clock).
func neverReachedRedis(err error) bool {
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// CoalesceStats returns how many script calls the coalescer sent and how
// many checks they decided; checks/calls is the mean batch size. Both are
// zero without Options.Coalesce.
func (s *Store) CoalesceStats() (calls, checks uint64) {
	if s.co == nil {
		return 0, 0
	}
	return s.co.stats()
}

// Release implements ratelimit.Store.
func (s *Store) Release(ctx context.Context, windows []ratelimit.KeyWindow, member string) (bool, error) {
	if len(windows) == 0 {
		return false, nil
	}
	removed, err := releaseScript.Run(ctx, s.client, s.keys(windows), releaseArgs(windows, member)...).Int64()
	return removed > 0, err
}

// ReleaseIfAmount implements ratelimit.Store with one script call: the
// release script given the amount, which each window compares with its
// own record of the member's amount.
func (s *Store) ReleaseIfAmount(ctx context.Context, windows []ratelimit.KeyWindow, member string, amount int64) (bool, error) {
	if len(windows) == 0 {
		return false, nil
	}
	removed, err := releaseScript.Run(ctx, s.client, s.keys(windows), append(releaseArgs(windows, member), amount)...).Int64()
	return removed > 0, err
}

// releaseArgs are releaseScript's ARGV for member in windows, without an
// amount: n, each window's kind, each window's size (µs), the member.
func releaseArgs(windows []ratelimit.KeyWindow, member string) []any {
	args := make([]any, 0, 3+2*len(windows))
	args = append(args, len(windows))
	for _, w := range windows {
		args = append(args, windowKind(w))
	}
	for _, w := range windows {
		args = append(args, w.Size.Microseconds())
	}
	return append(args, member)
}

// Usage implements ratelimit.Store.
func (s *Store) Usage(ctx context.Context, windows []ratelimit.KeyWindow) ([]int64, error) {
	if len(windows) == 0 {
		return nil, nil
	}
	nowMicros, periodsAt := s.at()
	return s.usageAt(ctx, nowMicros, periodsAt, windows)
}

// usageAt is Usage at a time: 0 for Redis TIME, else µs since the epoch;
// periodsAt as for checkArgsAt.
func (s *Store) usageAt(ctx context.Context, nowMicros int64, periodsAt time.Time, windows []ratelimit.KeyWindow) ([]int64, error) {
	return usageScript.Run(ctx, s.client, s.keys(windows), usageArgs(nowMicros, periodsAt, windows)...).Int64Slice()
}

// usageArgs are the arguments of a usageScript call of windows.
func usageArgs(nowMicros int64, periodsAt time.Time, windows []ratelimit.KeyWindow) []any {
	args := make([]any, 0, 2+argsPerWindow*len(windows))
	return appendWindowArgs(append(args, nowMicros, len(windows)), periodsAt, windows)
}

// UsageOfKeys implements ratelimit.KeysReader: Usage of each group,
// pipelined per node (pipelined).
func (s *Store) UsageOfKeys(ctx context.Context, groups [][]ratelimit.KeyWindow) ([][]int64, []error) {
	nowMicros, periodsAt := s.at()
	cmds := s.pipelined(ctx, usageScript, groups, func(g []ratelimit.KeyWindow) ([]string, []any) {
		return s.keys(g), usageArgs(nowMicros, periodsAt, g)
	})
	out, errs := make([][]int64, len(groups)), make([]error, len(groups))
	for i, c := range cmds {
		if c != nil {
			out[i], errs[i] = c.Int64Slice()
		}
	}
	return out, errs
}

// pipelined runs script once for each group that is not empty, with the
// keys and arguments call gives the group, and returns each call's
// command: nil for an empty group. The calls go in one pipeline per node
// (each Cluster master, or the one server), the nodes' at once, so that a
// slow or failing node fails its own keys' calls only. A node that lost
// its scripts (a restart, a failover to a replica that never loaded them)
// answers NOSCRIPT: the script is loaded there once and its calls sent
// again in a second pipeline. On a Cluster, the calls a node did not run
// (it redirected them as its slot moves, was failing over or loading, or
// could not be reached) go once more through the cluster client, which
// follows redirects and finds a new master; a script's own error stays.
func (s *Store) pipelined(ctx context.Context, script *redis.Script, groups [][]ratelimit.KeyWindow, call func(g []ratelimit.KeyWindow) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(groups))
	keys, args := make([][]string, len(groups)), make([][]any, len(groups))
	byNode := map[scriptNode][]int{}
	for i, g := range groups {
		if len(g) > 0 {
			keys[i], args[i] = call(g)
			n := s.nodeFor(ctx, keys[i][0])
			byNode[n] = append(byNode[n], i)
		}
	}
	var wg sync.WaitGroup
	for n, calls := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipelineOn(ctx, n, script, calls, keys, args, cmds)
		}()
	}
	wg.Wait()
	if _, ok := s.client.(*redis.ClusterClient); !ok {
		return cmds
	}
	var again []int
	for i, c := range cmds {
		if c != nil && notRunByNode(c.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 && ctx.Err() == nil {
		pipelineOn(ctx, s.client, script, again, keys, args, cmds)
	}
	return cmds
}

// notRunByNode reports whether err, a call's error from its node's
// pipeline, says the node did not run it: a redirect, a cluster state
// that is changing, a node loading its data, or no answer at all. An error
// the script itself returned is the answer.
func notRunByNode(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true // no answer: the connection, or the deadline
	}
	for _, p := range []string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// scriptNode is a client of one node, or the store's client.
type scriptNode interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// nodeFor is the client of the node that holds key: its Cluster master,
// else the store's client.
func (s *Store) nodeFor(ctx context.Context, key string) scriptNode {
	if c, ok := s.client.(*redis.ClusterClient); ok {
		if n, err := c.MasterForKey(ctx, key); err == nil {
			return n
		}
	}
	return s.client
}

// pipelineOn sends the calls at the indexes given to node in one pipeline,
// setting their commands in cmds, and again those answered NOSCRIPT once
// the script is loaded there.
func pipelineOn(ctx context.Context, node scriptNode, script *redis.Script, calls []int, keys [][]string, args [][]any, cmds []*redis.Cmd) {
	send := func(calls []int) {
		// Each command carries its own error; Pipelined's is the first.
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range calls {
				cmds[i] = script.EvalSha(ctx, p, keys[i], args[i]...)
			}
			return nil
		})
	}
	send(calls)
	var lost []int
	for _, i := range calls {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 && script.Load(ctx, node).Err() == nil {
		send(lost)
	}
}

// Warm loads the limiter's scripts on every node that can hold a key (each
// master of a Cluster), which also opens a connection to each. Called before
// the first check, it spares the first checks after a start a connection
// set-up and a NOSCRIPT round trip, which on a loaded machine can outlast
// the check's deadline and send a fresh instance, with no history, into
// degraded decisions. An error is worth a warning, not a refusal to start:
// the limiter degrades and recovers on its own.
func (s *Store) Warm(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, sc := range []*redis.Script{checkScript, plainCheckScript, releaseScript, usageScript, learnScript} {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return fmt.Errorf("redisstore: load scripts: %w", err)
			}
		}
		return nil
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	}
	return load(ctx, s.client)
}

// Ping implements ratelimit.Store.
func (s *Store) Ping(ctx context.Context) error {
	return s.client.Ping(ctx).Err()
}
