package ratelimit

import "github.com/redis/go-redis/v9"

// checkScript admits or refuses one request against every window of one key,
// atomically. All KEYS share one hash tag, so the script is Redis Cluster
// safe. Time is read from Redis, never from app servers, in microseconds.
//
//	KEYS[i]            sorted set of window i; member = requestId, score = admit time (µs)
//	ARGV[1]            member (requestId)
//	ARGV[2]            TTL in ms for every key: the longest window
//	ARGV[2i+1], [2i+2] limit and size (µs) of window i
//
// A window holds the admissions with score in (now-size, now]. The request is
// admitted only if every window holds fewer than its limit; then it is added
// to every window. A requestId that is already in a full window was admitted
// before and is admitted again without a second count, so client or network
// retries never double-count. Refused requests are not recorded.
//
// Returns {allowed, count, window index (1-based), retry-after µs, duplicate}
// where count is the occupancy of the binding window: the window that refused
// with the longest wait, or the admitted window with the least room left.
var checkScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local member = ARGV[1]
local n = #KEYS
local counts = {}
local bind, retry = 0, 0
for i = 1, n do
  local limit = tonumber(ARGV[2 * i + 1])
  local size = tonumber(ARGV[2 * i + 2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - size)
  local c = redis.call('ZCARD', KEYS[i])
  counts[i] = c
  if c >= limit then
    if redis.call('ZSCORE', KEYS[i], member) then
      return {1, c, i, 0, 1}
    end
    local oldest = redis.call('ZRANGE', KEYS[i], c - limit, c - limit, 'WITHSCORES')
    local wait = tonumber(oldest[2]) + size - now
    if bind == 0 or wait > retry then
      bind, retry = i, wait
    end
  end
end
if bind > 0 then
  return {0, counts[bind], bind, retry, 0}
end
local dup, room, count = 0, -1, 0
for i = 1, n do
  local added = redis.call('ZADD', KEYS[i], 'NX', now, member)
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
  if added == 0 then dup = 1 end
  local c = counts[i] + added
  local left = tonumber(ARGV[2 * i + 1]) - c
  if room < 0 or left < room then
    room, bind, count = left, i, c
  end
end
return {1, count, bind, 0, dup}
`)

// releaseScript removes a member from every window of one key.
var releaseScript = redis.NewScript(`
local removed = 0
for i = 1, #KEYS do
  removed = removed + redis.call('ZREM', KEYS[i], ARGV[1])
end
return removed
`)

// usageScript counts, without changing anything, the members in each window
// of one key. ARGV[i] is the size (µs) of window i. Returns the counts.
var usageScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('ZCOUNT', KEYS[i], now - tonumber(ARGV[i]) + 1, '+inf')
end
return out
`)
