package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultKeyPrefix starts every Redis key the limiter writes.
const defaultKeyPrefix = "payserver:rl:"

// RedisStore keeps one sorted set per key and window in Redis (standalone or
// Cluster) and checks them with one Lua call.
type RedisStore struct {
	client redis.UniversalClient
	prefix string
	// co, when set, coalesces concurrent checks of one key into one call
	// (see RedisStoreOptions.Coalesce).
	co *coalescer
}

// RedisStoreOptions configures a RedisStore. The zero value is a plain
// client and defaultKeyPrefix.
type RedisStoreOptions struct {
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
	// it (StoreResult.At).
	Coalesce bool
	// MaxBatch bounds the checks in one coalesced call. Zero means 128.
	MaxBatch int
}

// NewRedisStore returns a store on client that uses the plain client. An
// empty prefix means defaultKeyPrefix.
func NewRedisStore(client redis.UniversalClient, prefix string) (*RedisStore, error) {
	return NewRedisStoreWithOptions(client, RedisStoreOptions{Prefix: prefix})
}

// NewRedisStoreWithOptions returns a store on client configured by opts.
func NewRedisStoreWithOptions(client redis.UniversalClient, opts RedisStoreOptions) (*RedisStore, error) {
	if client == nil {
		return nil, errors.New("ratelimit: nil redis client")
	}
	s := &RedisStore{client: client, prefix: opts.Prefix}
	if s.prefix == "" {
		s.prefix = defaultKeyPrefix
	}
	if opts.Coalesce {
		s.co = newCoalescer(s, opts.MaxBatch)
	}
	return s, nil
}

// RedisKey returns the Redis key of window w: prefix{CHANNEL}:BIZTYPE:ID,
// the prefix followed by WindowKey(w). The channel sits in a hash tag, so
// every window of one channel, its channel-wide key's included, lives in
// one Cluster slot and one script call can check them together; codes are
// drawn from [A-Z0-9_] (and "*"), and IDs hold no ':', so no two windows
// share a key. A sliding window's key holds a sorted set (member: the
// requestId, score: its admission time in µs); a calendar window's, a hash
// (field: the requestId, value: its amount).
func (s *RedisStore) RedisKey(w KeyWindow) string { return windowKey(s.prefix, w) }

// WindowKey implements WindowKeyer: the window's Redis key (RedisKey).
func (s *RedisStore) WindowKey(w KeyWindow) string { return windowKey(s.prefix, w) }

func windowKey(prefix string, w KeyWindow) string {
	return prefix + "{" + w.Key.Channel + "}:" + w.Key.BizType + ":" + w.ID()
}

// keys returns the KEYS of a script call for windows: each window's key,
// then the amounts hash of each sliding amount window.
func (s *RedisStore) keys(windows []KeyWindow) []string {
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

// checkKeys returns the KEYS of a check of members: keys(windows), the
// learned-limit hash of each learning window (learnedKey), then for each
// member, the member's identity key in each sliding count window (the
// window's key + ":#" + member; ":v" ends the amounts hashes, ":L" the
// learned-limit hashes, and window keys have no ':' after the ID).
func (s *RedisStore) checkKeys(windows []KeyWindow, members ...checkMember) []string {
	return s.checkKeysOwn(windows, nil, members)
}

// checkKeysOwn is checkKeys for members that name their own windows
// (own[j]: member j's windows, as indexes into windows, in its order; nil
// when every member has all of them): a member's identity keys are those
// of its own sliding count windows, in its own order.
func (s *RedisStore) checkKeysOwn(windows []KeyWindow, own [][]int, members []checkMember) []string {
	keys := s.keys(windows)
	for i, w := range windows {
		if w.learns() {
			keys = append(keys, learnedKey(keys[i]))
		}
	}
	for j, m := range members {
		for p := range ownLen(windows, own) {
			i := ownWindow(own, j, p)
			if w := windows[i]; !w.Amount && !w.IsCalendar() {
				keys = append(keys, keys[i]+":#"+m.id)
			}
		}
	}
	return keys
}

// ownLen is the number of windows of each member: all of windows, or as
// many as each member names (own).
func ownLen(windows []KeyWindow, own [][]int) int {
	if own == nil {
		return len(windows)
	}
	return len(own[0])
}

// ownWindow is the index in the call's windows of member j's p-th window.
func ownWindow(own [][]int, j, p int) int {
	if own == nil {
		return p
	}
	return own[j][p]
}

// Check implements Store with one EVALSHA (EVAL after NOSCRIPT,
// transparently), shared with the concurrent checks of the same windows
// when the store coalesces.
func (s *RedisStore) Check(ctx context.Context, windows []KeyWindow, member string, amount int64) (StoreResult, error) {
	if len(windows) == 0 {
		return StoreResult{Allowed: true}, nil
	}
	var res StoreResult
	var err error
	if s.co != nil {
		res, err = s.co.check(ctx, windows, member, amount)
	} else {
		res, err = s.checkOne(ctx, windows, member, amount)
	}
	if err != nil && neverReachedRedis(err) {
		err = fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return res, err
}

// neverReachedRedis reports whether a failed call provably did not run the
// script: no connection (dial error, pool exhausted, client closed) or an
// error reply, which Redis gives before running it.
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
// zero without RedisStoreOptions.Coalesce.
func (s *RedisStore) CoalesceStats() (calls, checks uint64) {
	if s.co == nil {
		return 0, 0
	}
	return s.co.stats()
}

// checkOne checks one member in one script call.
func (s *RedisStore) checkOne(ctx context.Context, windows []KeyWindow, member string, amount int64) (StoreResult, error) {
	m := checkMember{member, amount}
	res, err := s.runCheck(ctx, windows, s.checkKeys(windows, m), checkArgs(windows, m))
	if err != nil {
		return StoreResult{}, err
	}
	var out [1]StoreResult
	if err := parseCheckReply(res, len(windows), out[:]); err != nil {
		return StoreResult{}, err
	}
	return out[0], nil
}

// ttlMargin is added to the time a member can stay in a window for the
// keys' TTL. A key must not expire while its newest member is still in a
// window: with Redis, a TTL equal to the window is exact, but the embedded
// server counts TTLs down in one-second ticks (miniredis FastForward), so a
// key could vanish up to a tick early and admit a whole limit again.
const ttlMargin = 2 * time.Second

// checkMember is one member of a check and what it pays.
type checkMember struct {
	id     string
	amount int64
}

// checkArgs returns checkScript's ARGV for members, with the time read from
// Redis and calendar periods around the app server's clock.
func checkArgs(windows []KeyWindow, members ...checkMember) []any {
	return checkArgsAt(0, time.Now(), windows, members...)
}

// checkArgsAt is checkArgs with the time: 0 for Redis TIME (production), or
// µs since the epoch (property tests drive time through it); periodsAt is
// the time the calendar periods are computed around.
func checkArgsAt(nowMicros int64, periodsAt time.Time, windows []KeyWindow, members ...checkMember) []any {
	return checkArgsOwn(nowMicros, periodsAt, windows, nil, members)
}

// checkArgsOwn is checkArgsAt for members that name their own windows
// (own, as for checkKeysOwn; nil when every member has all of them).
func checkArgsOwn(nowMicros int64, periodsAt time.Time, windows []KeyWindow, own [][]int, members []checkMember) []any {
	n := len(windows)
	per := 2
	if own != nil {
		n, per = -n, 2+len(own[0])
	}
	args := make([]any, 0, 5+argsPerWindow*len(windows)+per*len(members))
	args = append(args, ttlMargin.Milliseconds(), nowMicros, n)
	args = appendWindowArgs(args, periodsAt, windows)
	args = appendReservedArgs(args, windows)
	args = appendLearningArgs(args, windows)
	if own != nil {
		args = append(args, len(own[0]))
	}
	for j, m := range members {
		args = append(args, m.id, m.amount)
		if own != nil {
			for _, i := range own[j] {
				args = append(args, i+1)
			}
		}
	}
	return args
}

// appendWindowArgs appends the scripts' arguments for each window: kind,
// limit, size (µs), four calendar period boundaries (µs), and its track
// plus 4 × the 1-based index of the window whose merchant's use it counts
// (merchantParents; 0 for none).
func appendWindowArgs(args []any, periodsAt time.Time, windows []KeyWindow) []any {
	parent := merchantParents(windows)
	for i, w := range windows {
		track := int(w.Track)
		if parent != nil {
			track += 4 * (parent[i] + 1)
		}
		kind := windowKind(w)
		if w.IsCalendar() {
			b := w.Calendar.Periods(periodsAt)
			args = append(args, kind, w.Limit, 0, micros(b[0]), micros(b[1]), micros(b[2]), micros(b[3]), track)
			continue
		}
		args = append(args, kind, w.Limit, w.Size.Microseconds(), 0, 0, 0, 0, track)
	}
	return args
}

// appendReservedArgs appends the check script's reservations: their
// number, then for each the window it applies to, the window counting the
// other name's use (both 1-based), the reservation and the sum of the
// window's reservations.
func appendReservedArgs(args []any, windows []KeyWindow) []any {
	n := 0
	for _, w := range windows {
		n += len(w.Reserved)
	}
	args = append(args, n)
	for i, w := range windows {
		total := w.OwnReserve
		for _, r := range w.Reserved {
			total += r.Amount
		}
		for _, r := range w.Reserved {
			args = append(args, i+1, r.Index+1, r.Amount, total)
		}
	}
	return args
}

// appendLearningArgs appends the check script's learning windows: their
// number, then for each the window (1-based) and its step.
func appendLearningArgs(args []any, windows []KeyWindow) []any {
	n := 0
	for _, w := range windows {
		if w.learns() {
			n++
		}
	}
	args = append(args, n)
	for i, w := range windows {
		if w.learns() {
			args = append(args, i+1, w.Learn.Step)
		}
	}
	return args
}

// parseCheckReply fills out, one result per member, from checkScript's
// reply: the call's time (µs), the number of windows bound by a learned
// limit and, when not 0, every window's effective limit, then 4+windows
// integers per member.
func parseCheckReply(res []int64, windows int, out []StoreResult) error {
	return parseCheckReplyOwn(res, windows, nil, out)
}

// parseCheckReplyOwn is parseCheckReply for members that name their own
// windows (own, as for checkKeysOwn): each member's result is for its own
// windows, in its own order.
func parseCheckReplyOwn(res []int64, n int, own [][]int, out []StoreResult) error {
	windows := n
	if own != nil {
		windows = len(own[0])
	}
	per := 4 + windows
	head := 2
	if len(res) >= 2 && res[1] > 0 {
		head += n
	}
	if len(res) != head+per*len(out) {
		return fmt.Errorf("ratelimit: script replied %d values for %d checks", len(res), len(out))
	}
	now := res[0]
	var limits []int64
	if head > 2 {
		limits = res[2:head:head]
	}
	for i := range out {
		r := res[head+per*i : head+per*(i+1)]
		if r[1] < 1 || int(r[1]) > windows {
			return fmt.Errorf("ratelimit: unexpected script reply %v", r)
		}
		counts := r[4:per:per]
		lim := limits
		if own != nil && limits != nil {
			lim = make([]int64, windows)
			for p, w := range own[i] {
				lim[p] = limits[w]
			}
		}
		out[i] = StoreResult{
			Allowed:    r[0] == 1,
			Window:     int(r[1]) - 1,
			Count:      counts[r[1]-1],
			Counts:     counts,
			Duplicate:  r[3] == 1,
			Conflict:   r[3] == 2,
			ExceedsCap: r[3] == 3,
			Limits:     lim,
			Now:        time.UnixMicro(now),
		}
		if out[i].Allowed {
			// r[2] is how long before now the member was first admitted.
			out[i].At = time.UnixMicro(now - r[2])
		} else {
			out[i].RetryAfter = time.Duration(r[2]) * time.Microsecond
		}
	}
	return nil
}

// runCheck runs the check script for windows with Script.Run: EVALSHA,
// and EVAL after NOSCRIPT. keys and args are checkKeys' and checkArgs'
// for windows; a plain key's check runs plainCheckScript, which reads
// them the same way.
func (s *RedisStore) runCheck(ctx context.Context, windows []KeyWindow, keys []string, args []any) ([]int64, error) {
	if plainWindows(windows) {
		res, err := plainCheckScript.Run(ctx, s.client, keys, args...).Int64Slice()
		if err != nil || len(res) != 2 || res[1] != -1 {
			return res, err
		}
		// A learned limit is in force: the plain script changed nothing,
		// and the general one applies it.
	}
	return checkScript.Run(ctx, s.client, keys, args...).Int64Slice()
}

// plainWindows reports whether windows are one sliding count window of a
// rule's own, with no reservation: plainCheckScript's (which hands a
// window under a learned limit to checkScript).
func plainWindows(windows []KeyWindow) bool {
	if len(windows) != 1 {
		return false
	}
	w := windows[0]
	return !w.Amount && !w.IsCalendar() && w.Track == TrackNone && len(w.Reserved) == 0
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, windows []KeyWindow, member string) (bool, error) {
	if len(windows) == 0 {
		return false, nil
	}
	args := make([]any, 0, 2+len(windows))
	args = append(args, len(windows))
	for _, w := range windows {
		args = append(args, windowKind(w))
	}
	removed, err := releaseScript.Run(ctx, s.client, s.keys(windows), append(args, member)...).Int64()
	return removed > 0, err
}

// ReleaseIfAmount implements Store with one script call: the release
// script given the amount, and the member's identity key in each sliding
// count window (checkKeys), which is where such a window keeps the amount
// a member was admitted for.
func (s *RedisStore) ReleaseIfAmount(ctx context.Context, windows []KeyWindow, member string, amount int64) (bool, error) {
	if len(windows) == 0 {
		return false, nil
	}
	keys := s.keys(windows)
	for i, w := range windows {
		if !w.Amount && !w.IsCalendar() {
			keys = append(keys, keys[i]+":#"+member)
		}
	}
	args := make([]any, 0, 3+len(windows))
	args = append(args, len(windows))
	for _, w := range windows {
		args = append(args, windowKind(w))
	}
	removed, err := releaseScript.Run(ctx, s.client, keys, append(args, member, amount)...).Int64()
	return removed > 0, err
}

// windowKind is w's kind as the scripts receive it.
func windowKind(w KeyWindow) int {
	kind := kindCount
	if w.Amount {
		kind |= kindAmount
	}
	if w.IsCalendar() {
		kind |= kindCalendar
	}
	return kind
}

// Usage implements Store.
func (s *RedisStore) Usage(ctx context.Context, windows []KeyWindow) ([]int64, error) {
	if len(windows) == 0 {
		return nil, nil
	}
	return s.usageAt(ctx, 0, time.Now(), windows)
}

// usageAt is Usage at a time: 0 for Redis TIME, else µs since the epoch;
// periodsAt as for checkArgsAt.
func (s *RedisStore) usageAt(ctx context.Context, nowMicros int64, periodsAt time.Time, windows []KeyWindow) ([]int64, error) {
	args := make([]any, 0, 2+argsPerWindow*len(windows))
	args = appendWindowArgs(append(args, nowMicros, len(windows)), periodsAt, windows)
	return usageScript.Run(ctx, s.client, s.keys(windows), args...).Int64Slice()
}

// Warm loads the limiter's scripts on every node that can hold a key (each
// master of a Cluster), which also opens a connection to each. Called before
// the first check, it spares the first checks after a start a connection
// set-up and a NOSCRIPT round trip, which on a loaded machine can outlast
// the check's deadline and send a fresh instance, with no history, into
// degraded decisions. An error is worth a warning, not a refusal to start:
// the limiter degrades and recovers on its own.
func (s *RedisStore) Warm(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, sc := range []*redis.Script{checkScript, plainCheckScript, releaseScript, usageScript, learnScript} {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return fmt.Errorf("ratelimit: load scripts: %w", err)
			}
		}
		return nil
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	}
	return load(ctx, s.client)
}

// Ping implements Store.
func (s *RedisStore) Ping(ctx context.Context) error {
	return s.client.Ping(ctx).Err()
}

// learnedKey is the Redis key of the learned limit of the window whose key
// is windowKey: a hash {l, t, nb, e} (learned.go), in the window's slot.
func learnedKey(windowKey string) string { return windowKey + ":L" }

// The operations of learnScript.
const (
	learnThrottle = 1
	learnRead     = 2
	learnReset    = 3
)

// Throttle implements Learner with one learnScript call, at Redis's time.
func (s *RedisStore) Throttle(ctx context.Context, windows []KeyWindow, retryAfter time.Duration) error {
	_, err := s.learnAt(ctx, 0, learnThrottle, windows, retryAfter)
	return err
}

// Learned implements Learner.
func (s *RedisStore) Learned(ctx context.Context, windows []KeyWindow) ([]LearnedLimit, error) {
	return s.learnAt(ctx, 0, learnRead, windows, 0)
}

// ResetLearned implements Learner.
func (s *RedisStore) ResetLearned(ctx context.Context, windows []KeyWindow) error {
	_, err := s.learnAt(ctx, 0, learnReset, windows, 0)
	return err
}

// learnAt runs learnScript: op on the learning windows of windows, at
// nowMicros (0: Redis TIME), and returns the learned limits in force after
// it.
func (s *RedisStore) learnAt(ctx context.Context, nowMicros int64, op int, windows []KeyWindow, retryAfter time.Duration) ([]LearnedLimit, error) {
	ws := learningOnly(windows)
	if len(ws) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, 2*len(ws))
	args := make([]any, 0, 5+5*len(ws))
	args = append(args, nowMicros, op, ttlMargin.Milliseconds(), retryAfter.Microseconds(), len(ws))
	for _, w := range ws {
		k := s.RedisKey(w)
		keys = append(keys, k, learnedKey(k))
		args = append(args, w.Size.Microseconds(), w.Limit, w.Learn.Step, w.Learn.Decrease, w.Learn.Floor)
	}
	res, err := learnScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 1+4*len(ws) {
		return nil, fmt.Errorf("ratelimit: learn script replied %d values for %d windows", len(res), len(ws))
	}
	var out []LearnedLimit
	for i, w := range ws {
		r := res[1+4*i : 1+4*(i+1)]
		if r[0] >= 0 {
			out = append(out, learnedLimit(w, learnedState{l: r[0], t: r[1], nb: r[2], e: r[3]}, res[0]))
		}
	}
	return out, nil
}
