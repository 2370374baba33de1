package ratelimit

import "github.com/redis/go-redis/v9"

// checkScript decides one or more requests (members) of one key against every
// window of that key, atomically, in arrival order: the answer for each
// member is the one a script run for that member alone would give at the
// same instant. All KEYS share one hash tag, so the script is Redis Cluster
// safe. Time is read from Redis, never from app servers, in microseconds.
//
//	KEYS[i]              sorted set of window i; member = requestId, score = admit time (µs)
//	ARGV[1]              TTL in ms for every key: the longest window plus a margin
//	                     (ttlMargin), so that no key expires while a member is in it
//	ARGV[2]              0: read the time from Redis TIME (always, in production);
//	                     else the time in µs (tests drive time through it)
//	ARGV[2i+1], ARGV[2i+2] limit and size (µs) of window i
//	ARGV[2n+3...]        the members (requestIds), in arrival order; n = #KEYS
//
// The rules are Model's (model.go): a window holds the admissions with score
// in (now-size, now]; a member is admitted only if every window has room or
// already holds it, and is then added to every window that does not hold it.
// A member already held is not counted again (client or network retries,
// or the same member twice in one call); refused members are not recorded.
//
// The Redis work is per call, not per member: TIME once; per window one
// ZREMRANGEBYSCORE, ZCARD and ZMSCORE (which members are already in), at
// most one ZRANGE (the oldest member that must leave, for the retry-after),
// and, when something was admitted, one variadic ZADD and one PEXPIRE. So a
// call carrying a batch of members (RedisStoreOptions.Coalesce) costs Redis
// little more than a call for one.
//
// Returns 4+n integers per member: {allowed, window index (1-based),
// retry-after µs, duplicate, count of window 1, …, count of window n}. The
// binding window is the refusing window with the longest wait, or, when
// admitted, the window with the least room left.
var checkScript = redis.NewScript(`
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = #KEYS
local first = 2 * n + 3
local limits, sizes, counts, base, present, wait, add, nadd = {}, {}, {}, {}, {}, {}, {}, {}
for i = 1, n do
  limits[i] = tonumber(ARGV[2 * i + 1])
  sizes[i] = tonumber(ARGV[2 * i + 2])
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
  local bind, longest, dup = 0, 0, 0
  for i = 1, n do
    if present[i][j] or seen[member] then
      dup = 1
    elseif counts[i] >= limits[i] then
      local w = retry(i)
      if bind == 0 or w > longest then
        bind, longest = i, w
      end
    end
  end
  if bind > 0 then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, bind, longest, 0
  else
    local room = nil
    for i = 1, n do
      if not (present[i][j] or seen[member]) then
        counts[i] = counts[i] + 1
        local a, na = add[i], nadd[i]
        a[na + 1], a[na + 2], nadd[i] = now, member, na + 2
      end
      -- room is negative where a lowered limit is under the members in
      local left = limits[i] - counts[i]
      if room == nil or left < room then
        room, bind = left, i
      end
    end
    seen[member] = true
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, bind, 0, dup
  end
  for i = 1, n do
    out[o + 4 + i] = counts[i]
  end
  o = o + 4 + n
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
// of one key. ARGV[1] is the time as for checkScript (0: Redis TIME);
// ARGV[i+1] is the size (µs) of window i. Returns the counts.
var usageScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('ZCOUNT', KEYS[i], now - tonumber(ARGV[i + 1]) + 1, '+inf')
end
return out
`)
