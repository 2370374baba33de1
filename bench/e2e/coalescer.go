package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"payserver/internal/ratelimit"
)

// coalescer is a prototype, measured by "batching -coalesce", of the "small
// coalescer" the issue allows when AutoPipeline is not enough: the checks of
// one key that arrive while a batch is in flight go to Redis together as ONE
// script call, which reads TIME and trims and counts each window once per
// batch instead of once per check, then decides the members in arrival order
// exactly as that many single checks at the same instant would. It is not
// wired into payserver; see docs/PERFORMANCE.md, "End-to-end".
type coalescer struct {
	client redis.UniversalClient
	prefix string
	max    int

	mu    sync.Mutex
	queue map[ratelimit.Key]*keyQueue
}

type keyQueue struct {
	windows []ratelimit.Window
	pending []*waiter
	busy    bool
}

type waiter struct {
	member string
	done   chan struct{}
	res    ratelimit.StoreResult
	err    error
}

func newCoalescer(c redis.UniversalClient, prefix string, maxBatch int) *coalescer {
	return &coalescer{client: c, prefix: prefix, max: maxBatch, queue: map[ratelimit.Key]*keyQueue{}}
}

func (c *coalescer) redisKey(k ratelimit.Key, w ratelimit.Window) string {
	return c.prefix + "{" + k.BizType + ":" + k.Channel + "}:" + strconv.FormatInt(w.Size.Milliseconds(), 10)
}

// Check implements ratelimit.Store.Check. The first caller of an idle key
// sends its batch at once; callers arriving meanwhile queue and leave with
// the next batch.
func (c *coalescer) Check(ctx context.Context, k ratelimit.Key, windows []ratelimit.Window, member string) (ratelimit.StoreResult, error) {
	w := &waiter{member: member, done: make(chan struct{})}
	c.mu.Lock()
	q := c.queue[k]
	if q == nil {
		q = &keyQueue{windows: windows}
		c.queue[k] = q
	}
	q.pending = append(q.pending, w)
	start := !q.busy
	q.busy = true
	c.mu.Unlock()
	if start {
		go c.flush(k, q)
	}
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		return ratelimit.StoreResult{}, ctx.Err()
	}
}

func (c *coalescer) flush(k ratelimit.Key, q *keyQueue) {
	for {
		c.mu.Lock()
		batch := q.pending
		if len(batch) > c.max {
			batch = batch[:c.max]
		}
		q.pending = q.pending[len(batch):]
		if len(batch) == 0 {
			q.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.run(k, q.windows, batch)
	}
}

func (c *coalescer) run(k ratelimit.Key, windows []ratelimit.Window, batch []*waiter) {
	keys := make([]string, len(windows))
	args := make([]any, 0, 2+2*len(windows)+len(batch))
	args = append(args, windows[len(windows)-1].Size.Milliseconds(), len(windows))
	for i, w := range windows {
		keys[i] = c.redisKey(k, w)
		args = append(args, w.Limit, w.Size.Microseconds())
	}
	for _, w := range batch {
		args = append(args, w.member)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	res, err := batchScript.Run(ctx, c.client, keys, args...).Int64Slice()
	cancel()
	if err == nil && len(res) != 5*len(batch) {
		err = fmt.Errorf("batch script: %d values for %d checks", len(res), len(batch))
	}
	for i, w := range batch {
		if err != nil {
			w.err = err
		} else {
			r := res[5*i : 5*i+5]
			w.res = ratelimit.StoreResult{Allowed: r[0] == 1, Count: r[1], Window: int(r[2]) - 1,
				RetryAfter: time.Duration(r[3]) * time.Microsecond, Duplicate: r[4] == 1}
		}
		close(w.done)
	}
}

// Release, Usage and Ping are not measured; the prototype refuses them.
func (c *coalescer) Release(context.Context, ratelimit.Key, []ratelimit.Window, string) error {
	return fmt.Errorf("coalescer prototype: no Release")
}

func (c *coalescer) Usage(context.Context, ratelimit.Key, []ratelimit.Window) ([]int64, error) {
	return nil, fmt.Errorf("coalescer prototype: no Usage")
}

func (c *coalescer) Ping(ctx context.Context) error { return c.client.Ping(ctx).Err() }

// batchScript is checkScript (internal/ratelimit/lua.go) for many members
// of one key at one instant: TIME, ZREMRANGEBYSCORE and ZCARD once per
// window and batch, then each member in order with the same rules (count <
// limit in every window admits; a member already in a full window is
// admitted again as a duplicate; refusals are not recorded), PEXPIRE once.
//
//	KEYS[i]                 window i
//	ARGV[1]                 TTL ms (the longest window)
//	ARGV[2]                 n, the number of windows
//	ARGV[2i+1], ARGV[2i+2]  limit and size (µs) of window i
//	ARGV[2n+3...]           members
//
// Returns 5 integers per member, as checkScript.
var batchScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[2])
local counts, limits, sizes = {}, {}, {}
for i = 1, n do
  limits[i] = tonumber(ARGV[2 * i + 1])
  sizes[i] = tonumber(ARGV[2 * i + 2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - sizes[i])
  counts[i] = redis.call('ZCARD', KEYS[i])
end
local out = {}
local added_any = false
for a = 2 * n + 3, #ARGV do
  local member = ARGV[a]
  local bind, retry, dupfull = 0, 0, false
  for i = 1, n do
    local c = counts[i]
    if c >= limits[i] then
      if redis.call('ZSCORE', KEYS[i], member) then
        dupfull = true
        table.insert(out, 1); table.insert(out, c); table.insert(out, i); table.insert(out, 0); table.insert(out, 1)
        break
      end
      local oldest = redis.call('ZRANGE', KEYS[i], c - limits[i], c - limits[i], 'WITHSCORES')
      local wait = tonumber(oldest[2]) + sizes[i] - now
      if bind == 0 or wait > retry then bind, retry = i, wait end
    end
  end
  if not dupfull then
    if bind > 0 then
      table.insert(out, 0); table.insert(out, counts[bind]); table.insert(out, bind); table.insert(out, retry); table.insert(out, 0)
    else
      local dup, room, count, b = 0, -1, 0, 0
      for i = 1, n do
        local added = redis.call('ZADD', KEYS[i], 'NX', now, member)
        if added == 0 then dup = 1 else added_any = true end
        counts[i] = counts[i] + added
        local left = limits[i] - counts[i]
        if room < 0 or left < room then room, b, count = left, i, counts[i] end
      end
      table.insert(out, 1); table.insert(out, count); table.insert(out, b); table.insert(out, 0); table.insert(out, dup)
    end
  end
end
if added_any then
  for i = 1, n do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
end
return out
`)
