package ratelimit

import "github.com/redis/go-redis/v9"

// checkScript decides one or more requests (members) of one key against every
// window of that key, atomically, in arrival order: the answer for each
// member is the one a script run for that member alone would give at the
// same instant. All KEYS share one hash tag, so the script is Redis Cluster
// safe. Time is read from Redis, never from app servers, in microseconds.
//
//	KEYS[i]              sorted set of window i; member = requestId, score = admit time (µs)
//	ARGV[1]              TTL in ms for every key: the longest window
//	ARGV[2i], ARGV[2i+1] limit and size (µs) of window i
//	ARGV[2n+2...]        the members (requestIds), in arrival order; n = #KEYS
//
// A window holds the admissions with score in (now-size, now]. A member is
// admitted only if every window holds fewer than its limit; then it is added
// to every window. A member that is already in a full window was admitted
// before and is admitted again without a second count, so client or network
// retries never double-count; the same holds for a member that appears twice
// in one call. Refused members are not recorded.
//
// The Redis work is per call, not per member: TIME once; per window one
// ZREMRANGEBYSCORE, ZCARD and ZMSCORE (which members are already in), at
// most one ZRANGE (the oldest member that must leave, for the retry-after),
// and, when something was admitted, one variadic ZADD and one PEXPIRE. So a
// call carrying a batch of members (RedisStoreOptions.Coalesce) costs Redis
// little more than a call for one.
//
// Returns 5 integers per member: {allowed, count, window index (1-based),
// retry-after µs, duplicate}, where count is the occupancy of the binding
// window: the window that refused with the longest wait, or the admitted
// window with the least room left.
var checkScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local first = 2 * n + 2
local limits, sizes, counts, base, present, wait, add, nadd = {}, {}, {}, {}, {}, {}, {}, {}
for i = 1, n do
  limits[i] = tonumber(ARGV[2 * i])
  sizes[i] = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - sizes[i])
  counts[i] = redis.call('ZCARD', KEYS[i])
  base[i] = counts[i]
  if counts[i] > 0 then
    present[i] = redis.call('ZMSCORE', KEYS[i], unpack(ARGV, first))
  else
    present[i] = {}
  end
  add[i], nadd[i] = {'NX'}, 1
end
-- retry returns how long until window i, full, has room: until the member
-- of rank count-limit leaves. Members added by this call rank after every
-- member already there and were added at now.
local function retry(i)
  if wait[i] == nil then
    local r = counts[i] - limits[i]
    if r < base[i] then
      local oldest = redis.call('ZRANGE', KEYS[i], r, r, 'WITHSCORES')
      wait[i] = tonumber(oldest[2]) + sizes[i] - now
    else
      wait[i] = sizes[i]
    end
  end
  return wait[i]
end
local out, o, seen = {}, 0, {}
for j = 1, #ARGV - first + 1 do
  local member = ARGV[first + j - 1]
  local bind, longest, dupfull = 0, 0, 0
  for i = 1, n do
    if counts[i] >= limits[i] then
      if present[i][j] or seen[member] then
        dupfull = i
        break
      end
      local w = retry(i)
      if bind == 0 or w > longest then
        bind, longest = i, w
      end
    end
  end
  if dupfull > 0 then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, counts[dupfull], dupfull, 0, 1
  elseif bind > 0 then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, counts[bind], bind, longest, 0
  else
    local dup, room, count = 0, -1, 0
    for i = 1, n do
      if present[i][j] or seen[member] then
        dup = 1
      else
        counts[i] = counts[i] + 1
        local a, na = add[i], nadd[i]
        a[na + 1], a[na + 2], nadd[i] = now, member, na + 2
      end
      local left = limits[i] - counts[i]
      if room < 0 or left < room then
        room, bind, count = left, i, counts[i]
      end
    end
    seen[member] = true
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, count, bind, 0, dup
  end
  o = o + 5
end
for i = 1, n do
  if nadd[i] > 1 then
    redis.call('ZADD', KEYS[i], unpack(add[i]))
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
return out
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
