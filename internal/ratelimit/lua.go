package ratelimit

import "github.com/redis/go-redis/v9"

// Window kinds as the scripts receive them: bit 1 amount, bit 2 calendar.
const (
	kindCount          = 0
	kindAmount         = 1
	kindCalendar       = 2
	kindCalendarAmount = 3
	// argsPerWindow is the stride of the window arguments: kind, limit,
	// size (µs), four period boundaries (µs; zero for sliding windows) and
	// the window's Track.
	argsPerWindow = 8
)

// checkScript decides one or more requests (members, each with an amount)
// against a list of windows, atomically, in arrival order: the answer for
// each member is the one a script run for that member alone would give at
// the same instant. All KEYS share one hash tag (the channel), so the script
// is Redis Cluster safe. Time is read from Redis, never from app servers, in
// microseconds.
//
//	KEYS[i], i ≤ n       window i: a sorted set (sliding; member = requestId,
//	                     score = admit time µs) or a hash (calendar; field =
//	                     requestId, value = its amount; '#s' = use, '#p' = period)
//	KEYS[n+1...]         for each sliding amount window, in order, the hash of
//	                     its members' amounts ('#s' = their sum)
//	ARGV[1]              TTL margin in ms, past the longest a member can stay
//	ARGV[2]              0: read the time from Redis TIME (always, in production);
//	                     else the time in µs (tests drive time through it)
//	ARGV[3]              n, the number of windows; -n when each member
//	                     names its own windows among them (below)
//	KEYS[k+e]            after those (k keys), for the e-th learning window,
//	                     its learned limit: a hash {l, t, nb, e}
//	                     ('<window key>:L', learned.go)
//	KEYS[h+(j-1)c+i]     after those (h keys), for member j and the i-th
//	                     sliding count window of its own (c of them),
//	                     member j's identity there: a string, the amount
//	                     it was admitted for ('<window key>:#<member>')
//	ARGV[4+8(i-1)...]    window i: kind (1 amount, 2 calendar: bits), limit,
//	                     size µs, for a calendar window four period
//	                     boundaries b1<b2<b3<b4 around the app server's clock
//	                     (Calendar.Periods): the period is the one of
//	                     [b1,b2), [b2,b3), [b3,b4) holding Redis's now; and
//	                     its track (Track: 0 a rule's window, 1 the
//	                     request's own use of a reservation, recorded and
//	                     never refusing, 2 another name's, only read) plus
//	                     4 × p for a merchant's use of window p (1-based),
//	                     which holds every member window p holds
//	ARGV[4+8n]           r, the number of reservations, then r quadruples:
//	                     window i, the window counting the other name's use,
//	                     the reservation, and the sum S of window i's
//	                     reservations, the request's own included (Model:
//	                     window i's limit is its limit less the other names'
//	                     unmet reservations; under a limit L < S each
//	                     reservation is ⌊reservation × L / S⌋)
//	ARGV[5+8n+4r]        a, the number of learning windows, then a pairs:
//	                     the window (1-based) and its step (Learning.Step)
//	ARGV[6+8n+4r+2a...]  member, amount pairs, in arrival order; for -n,
//	                     m, the number of windows of each member, then
//	                     per member its id, its amount and its m windows
//	                     (1-based), in its own order. A batch of checks
//	                     by several merchants names each merchant's use
//	                     of a window once, and each member the windows of
//	                     its own merchant: every member's reply is the one
//	                     a call of its own windows alone would give.
//
// The rules are Model's (model.go): a window's use is the sum of its
// members' weights (1, or the amount in an amount window); a member is
// admitted only if every window already holds it or has use + weight ≤
// limit, and is then added to every window that does not hold it. A member
// already held is not counted again (client or network retries, or the same
// member twice in one call); refused members are not recorded. A member
// held with another amount is a conflict, decided before the rest: refused,
// recorded nowhere. Each window knows the amount a member was admitted for:
// a calendar window's hash holds it (its weight is 1 in a count window), a
// sliding amount window's amounts hash too, and a sliding count window has
// an identity key per member, written when the member is added and living
// as long as it stays (plus the margin); it is read only for a member the
// window holds, so one left behind by a release is harmless.
//
// The Redis work is per call, not per member: TIME once; per window a trim
// (sliding: ZREMRANGEBYSCORE, and for amounts the weights of the members
// leaving; calendar: one HGET of the period, DEL when a new one started),
// the use, one ZMSCORE or HMGET for the members already in, the oldest
// members that must leave for a retry-after, and, when something was
// admitted, one ZADD or HSET, one HINCRBY and one expiry. So a call
// carrying a batch of members (RedisStoreOptions.Coalesce) costs Redis
// little more than a call for one.
//
// Learned limits (learned.go) replace a learning window's limit by its
// effective limit: 0 before the not-before, else min(limit, l + ⌊(now −
// t) / size⌋ × step) while now < e (a state past e is deleted). A refusal
// by such a window waits for its members to leave under the limit after
// the not-before, and at least until then. With no learned limit, a
// learning window costs one HMGET.
//
// Returns the call's time (µs: the Redis TIME it read, or ARGV[2]), the one
// instant every member of the call is decided at, the number of windows
// whose effective limit is below their limit and, when it is not 0, the
// effective limit of each window, then 4+n integers per member (4+m when
// members name their windows, each in its own order): {allowed, window
// index (1-based), retry-after µs for a refusal,
// or for an admission how long before the call's time the member was first
// admitted (0 for a member this call records; for a member a sliding window
// held from before, the call's time less the earliest score it has in those
// windows; 0 when only calendar windows hold it: they keep no times),
// duplicate (1), conflict (2) or exceeds a cap (3), use of window 1, …, use
// of window n}. So the reply grows by two integers per call (n more while
// a learned limit binds), nothing per member. A refusal by a window whose
// weight alone is above its limit exceeds a cap: its binding window is the
// first such window and its retry-after still the longest wait. The
// binding window is the refusing window with the longest wait, or, when
// admitted, the window with the least (effective) room left.
var checkScript = redis.NewScript(`
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local margin = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
-- n < 0: each member names its own windows among the -n (member windows)
local mapped = n < 0
if mapped then
  n = -n
end
-- reservations: res[i] = {{tracking window, reservation, sum}, ...}
local rbase = 4 + 8 * n
local res = {}
for e = 1, tonumber(ARGV[rbase]) do
  local a = rbase + 4 * (e - 1)
  local i = tonumber(ARGV[a + 1])
  res[i] = res[i] or {}
  res[i][#res[i] + 1] = {tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])}
end
-- learning windows: na (window, step) pairs after the reservations
local abase = rbase + 1 + 4 * tonumber(ARGV[rbase])
local na = tonumber(ARGV[abase])
local first = abase + 1 + 2 * na
-- win[j]: member j's windows, in its own order; who[i]: the members of
-- window i; cid[j][i]: window i's place among member j's sliding count
-- windows, which orders its identity keys
local members, amounts, win, who, cid = {}, {}, {}, {}, {}
local nco = 0
if mapped then
  local mw = tonumber(ARGV[first])
  local j = first + 1
  while j <= #ARGV do
    members[#members + 1] = ARGV[j]
    amounts[#amounts + 1] = tonumber(ARGV[j + 1])
    local w = {}
    for p = 1, mw do
      w[p] = tonumber(ARGV[j + 1 + p])
    end
    win[#win + 1] = w
    j = j + 2 + mw
  end
  for i = 1, n do
    who[i] = {}
  end
  for m = 1, #win do
    for _, i in ipairs(win[m]) do
      who[i][#who[i] + 1] = m
    end
  end
else
  for j = first, #ARGV, 2 do
    members[#members + 1] = ARGV[j]
    amounts[#amounts + 1] = tonumber(ARGV[j + 1])
  end
  local all = {}
  for i = 1, n do
    all[i] = i
  end
  for m = 1, #members do
    win[m] = all
  end
end
local nm = #members
-- names(i) returns the members of window i, and spread(i, r) spreads a
-- reply for those names over the members: every member when no member
-- names its own windows
local function names(i)
  if not mapped then
    return members
  end
  local out = {}
  for q, m in ipairs(who[i]) do
    out[q] = members[m]
  end
  return out
end
local function spread(i, r)
  if not mapped then
    return r
  end
  local out = {}
  for q, m in ipairs(who[i]) do
    out[m] = r[q]
  end
  return out
end
local kind, limits, sizes, hk, used, base, present, pstart, pend, mode, par = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
local h = n
for i = 1, n do
  local o = 4 + 8 * (i - 1)
  kind[i], limits[i], sizes[i], mode[i] = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 7])
  if mode[i] >= 4 then
    par[i], mode[i] = math.floor(mode[i] / 4), mode[i] % 4
  end
  local k = KEYS[i]
  if kind[i] >= 2 then
    local at = 0
    for b = 1, 3 do
      if now >= tonumber(ARGV[o + 2 + b]) and now < tonumber(ARGV[o + 3 + b]) then
        at = b
      end
    end
    if at == 0 then
      return redis.error_reply('ERR payserver: Redis time is more than a calendar period away from the app server clock')
    end
    pstart[i], pend[i] = ARGV[o + 2 + at], tonumber(ARGV[o + 3 + at])
    local stored = redis.call('HGET', k, '#p')
    if stored and stored ~= pstart[i] then
      redis.call('DEL', k)
    end
    used[i] = tonumber(redis.call('HGET', k, '#s') or 0)
    present[i] = spread(i, redis.call('HMGET', k, unpack(names(i))))
  else
    if kind[i] == 1 then
      h = h + 1
      hk[i] = KEYS[h]
      local gone = redis.call('ZRANGEBYSCORE', k, '-inf', now - sizes[i])
      if #gone > 0 then
        local freed = 0
        for c = 1, #gone, 1000 do
          local part = {unpack(gone, c, math.min(c + 999, #gone))}
          local ws = redis.call('HMGET', hk[i], unpack(part))
          for e = 1, #part do
            freed = freed + (tonumber(ws[e]) or 0)
          end
          redis.call('HDEL', hk[i], unpack(part))
        end
        redis.call('HINCRBY', hk[i], '#s', -freed)
        redis.call('ZREMRANGEBYSCORE', k, '-inf', now - sizes[i])
      end
      used[i] = tonumber(redis.call('HGET', hk[i], '#s') or 0)
      base[i] = redis.call('ZCARD', k)
    else
      redis.call('ZREMRANGEBYSCORE', k, '-inf', now - sizes[i])
      base[i] = redis.call('ZCARD', k)
      used[i] = base[i]
    end
    if base[i] > 0 then
      present[i] = spread(i, redis.call('ZMSCORE', k, unpack(names(i))))
    else
      present[i] = {}
    end
  end
end
-- learned limits (learned.go): eff[i] the limit now, after[i] once the
-- not-before nbf[i] has passed; nl counts the windows bound below their limit
local eff, after, nbf, nl = {}, {}, {}, 0
for i = 1, n do
  eff[i], after[i], nbf[i] = limits[i], limits[i], 0
end
for e = 1, na do
  local i, step, lk = tonumber(ARGV[abase + 2 * e - 1]), tonumber(ARGV[abase + 2 * e]), KEYS[h + e]
  local st = redis.call('HMGET', lk, 'l', 't', 'nb', 'e')
  if st[1] then
    if now >= tonumber(st[4]) then
      redis.call('DEL', lk)
    else
      local v = tonumber(st[1]) + math.floor(math.max(now - tonumber(st[2]), 0) / sizes[i]) * step
      if v < limits[i] then
        after[i] = v
      end
      eff[i] = after[i]
      if now < tonumber(st[3]) then
        eff[i], nbf[i] = 0, tonumber(st[3])
      end
      if eff[i] < limits[i] then
        nl = nl + 1
      end
    end
  end
end
h = h + na
-- the identity keys of the sliding count windows: member j's keys, one
-- per sliding count window of its own, in its own order
for j = 1, nm do
  if j == 1 or mapped then
    local c, at = 0, {}
    for _, i in ipairs(win[j]) do
      if kind[i] == 0 then
        c = c + 1
        at[i] = c
      end
    end
    cid[j], nco = at, c
  else
    cid[j] = cid[1]
  end
end
local idbase = h
local function idkey(j, i)
  return KEYS[idbase + (j - 1) * nco + cid[j][i]]
end
-- holds reports whether window i held member j before this call: it
-- recorded it, or it counts a merchant's use of a window that did
local function holds(i, j)
  return present[i][j] or (par[i] ~= nil and present[par[i]][j])
end
-- amountIn returns the amount member j is held for in window i, which holds it
local function amountIn(i, j)
  if kind[i] >= 2 then
    return tonumber(present[i][j])
  elseif kind[i] == 1 then
    return tonumber(redis.call('HGET', hk[i], members[j]))
  end
  return tonumber(redis.call('GET', idkey(j, i)))
end
-- wait returns how long until window i takes weight w more: until the next
-- period (calendar); else until enough of the members that were in before
-- this call have left (members added by this call leave last, at now+size).
local cached = {}
local function wait(i, w, lim)
  if kind[i] >= 2 then
    return pend[i] - now
  end
  if kind[i] == 0 and cached[i] then
    return cached[i]
  end
  local out = sizes[i]
  local need = used[i] + w - lim
  if w <= lim then
    if kind[i] == 0 then
      local r = need - 1
      if r < base[i] then
        local e = redis.call('ZRANGE', KEYS[i], r, r, 'WITHSCORES')
        out = tonumber(e[2]) + sizes[i] - now
      end
      if not res[i] then
        cached[i] = out
      end
    else
      -- the oldest members, 8 first, then four times more each read: a
      -- payment's amount is most often freed by the first few
      local freed, from, step = 0, 0, 8
      while from < base[i] and freed < need do
        local to = math.min(from + step - 1, base[i] - 1)
        step = math.min(step * 4, 512)
        local es = redis.call('ZRANGE', KEYS[i], from, to, 'WITHSCORES')
        local names = {}
        for e = 1, #es, 2 do
          names[#names + 1] = es[e]
        end
        local ws = redis.call('HMGET', hk[i], unpack(names))
        for e = 1, #names do
          freed = freed + (tonumber(ws[e]) or 0)
          if freed >= need then
            out = tonumber(es[2 * e]) + sizes[i] - now
            break
          end
        end
        from = to + 1
      end
    end
  end
  return out
end
-- limitOf is base (window i's effective limit) less the other names' unmet
-- reservations, each shrunk to its part of base when base is below their
-- sum. Only a learned limit is below the sum (a document keeps its
-- reservations within the limit), and learning windows count, so the
-- product stays below 10^14: exact in a double.
local function limitOf(i, base)
  local l = base
  if res[i] then
    for _, e in ipairs(res[i]) do
      local r = e[2]
      if base < e[3] then
        r = math.floor(r * math.max(base, 0) / e[3])
      end
      local unmet = r - used[e[1]]
      if unmet > 0 then
        l = l - unmet
      end
    end
  end
  return l
end
local zadd, hset, total = {}, {}, {}
for i = 1, n do
  zadd[i], hset[i], total[i] = {'NX'}, {}, 0
end
local out, seen, idset = {now, nl}, {}, {}
if nl > 0 then
  for i = 1, n do
    out[2 + i] = eff[i]
  end
end
local o = #out
for j = 1, nm do
  local member = members[j]
  local bind, longest, dup, exceed, since = 0, 0, 0, 0, now
  local wj = win[j]
  -- identity first: a member held with another amount is a conflict
  for _, i in ipairs(wj) do
    local was = nil
    if mode[i] == 2 then
      was = nil
    elseif seen[member] then
      was = seen[member]
    elseif present[i][j] then
      was = amountIn(i, j)
    end
    if was and was ~= amounts[j] then
      bind, dup = i, 2
      break
    end
  end
  for _, i in ipairs(wj) do
    if dup == 2 then
      break
    end
    local w = 1
    if kind[i] % 2 == 1 then
      w = amounts[j]
    end
    local lim = 0
    if mode[i] == 0 then
      lim = limitOf(i, eff[i])
    end
    if mode[i] == 2 then
      -- another name's use: read, never recorded, never refusing
    elseif holds(i, j) or seen[member] then
      dup = 1
      -- a sliding window's score is when it recorded the member
      if kind[i] < 2 and present[i][j] then
        local at = tonumber(present[i][j])
        if at < since then
          since = at
        end
      end
    elseif mode[i] == 0 and used[i] + w > lim then
      -- the wait under the limit once the not-before has passed, and at
      -- least until then
      local t, la = 0, limitOf(i, after[i])
      if used[i] + w > la then
        t = wait(i, w, la)
      end
      if now < nbf[i] and nbf[i] - now > t then
        t = nbf[i] - now
      end
      if w > limits[i] and exceed == 0 then
        bind, exceed = i, 3
      end
      if bind == 0 or (t > longest and exceed == 0) then
        bind = i
      end
      if t > longest then
        longest = t
      end
    end
  end
  if dup == 2 then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, bind, 0, 2
  elseif bind > 0 then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, bind, longest, exceed
  else
    local room = nil
    for _, i in ipairs(wj) do
      if mode[i] ~= 2 and not (holds(i, j) or seen[member]) then
        local w = 1
        if kind[i] % 2 == 1 then
          w = amounts[j]
        end
        used[i] = used[i] + w
        total[i] = total[i] + w
        if kind[i] == 0 then
          idset[#idset + 1] = {idkey(j, i), amounts[j], sizes[i] / 1000 + margin}
        end
        if kind[i] < 2 then
          local z = zadd[i]
          z[#z + 1], z[#z + 2] = now, member
        end
        if kind[i] ~= 0 then
          local s = hset[i]
          s[#s + 1], s[#s + 2] = member, amounts[j]
        end
      end
      -- room is negative where a lowered limit is under the members in
      local left = eff[i] - used[i]
      if mode[i] == 0 and (room == nil or left < room) then
        room, bind = left, i
      end
    end
    seen[member] = amounts[j]
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, bind, now - since, dup
  end
  -- the binding window and the uses in the member's own order
  if mapped then
    for p, i in ipairs(wj) do
      if i == out[o + 2] then
        out[o + 2] = p
        break
      end
    end
  end
  for p, i in ipairs(wj) do
    out[o + 4 + p] = used[i]
  end
  o = o + 4 + #wj
end
for i = 1, n do
  if #zadd[i] > 1 or #hset[i] > 0 then
    local k = KEYS[i]
    if kind[i] >= 2 then
      local s = hset[i]
      s[#s + 1], s[#s + 2] = '#p', pstart[i]
      redis.call('HSET', k, unpack(s))
      redis.call('HINCRBY', k, '#s', total[i])
      redis.call('PEXPIRE', k, math.floor((pend[i] - now) / 1000) + margin)
    else
      local ttl = sizes[i] / 1000 + margin
      redis.call('ZADD', k, unpack(zadd[i]))
      redis.call('PEXPIRE', k, ttl)
      if kind[i] == 1 then
        redis.call('HSET', hk[i], unpack(hset[i]))
        redis.call('HINCRBY', hk[i], '#s', total[i])
        redis.call('PEXPIRE', hk[i], ttl)
      end
    end
  end
end
for _, e in ipairs(idset) do
  redis.call('SET', e[1], e[2], 'PX', e[3])
end
return out
`)

// plainCheckScript is checkScript for the plainest key: one sliding count
// window of a rule's own (no reservation), called with checkScript's KEYS
// and ARGV (ARGV[5] its limit, ARGV[6] its size, ARGV[13] 1 when the
// window learns, with its learned-limit hash at KEYS[2], then members).
// A learning window costs one HGET while no learned limit is in force (a
// state that ended is deleted, as checkScript does); while one is, the
// script changes nothing and answers {now, -1}, and the store asks
// checkScript, which applies it. It follows the same rules and gives the same reply, and
// does only what such a window needs: TIME, the trim, ZCARD, one ZMSCORE
// when the window holds anyone, a GET of the identity of a member it holds,
// one ZRANGE for a refusal's retry-after, and, when something was
// admitted, one ZADD, one PEXPIRE and one SET per member admitted. A key
// pays for the features it uses: none of checkScript's tables of windows,
// reservations and learned limits are built (bench/limiter's store-open).
// The property tests check both scripts against the model
// (TestStoresAgreeWithModel draws the plain key a quarter of the time).
var plainCheckScript = redis.NewScript(`
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local k, lim, size = KEYS[1], tonumber(ARGV[5]), tonumber(ARGV[6])
-- na: 1 when the window learns; its learned-limit hash is then KEYS[2],
-- and the identity keys and members come one later
local na = tonumber(ARGV[13])
if na > 0 then
  local e = redis.call('HGET', KEYS[2], 'e')
  if e then
    if now < tonumber(e) then
      return {now, -1}
    end
    redis.call('DEL', KEYS[2])
  end
end
redis.call('ZREMRANGEBYSCORE', k, '-inf', now - size)
local base = redis.call('ZCARD', k)
local used = base
local members = {}
for j = 14 + 2 * na, #ARGV, 2 do
  members[#members + 1] = ARGV[j]
end
local present = {}
if base > 0 then
  present = redis.call('ZMSCORE', k, unpack(members))
end
local out, seen, add, ids, retry = {now, 0}, {}, {'NX'}, {}, nil
for j = 1, #members do
  local m, amount = members[j], tonumber(ARGV[13 + 2 * na + 2 * j])
  local was = seen[m]
  if was == nil and present[j] then
    was = tonumber(redis.call('GET', KEYS[1 + na + j]))
  end
  local o = #out
  if was and was ~= amount then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 1, 0, 2
  elseif present[j] or seen[m] then
    local since = now
    if present[j] and tonumber(present[j]) < now then
      since = tonumber(present[j])
    end
    seen[m] = amount
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, 1, now - since, 1
  elseif used + 1 > lim then
    local t, exceed = size, 0
    if lim < 1 then
      exceed = 3
    else
      if retry == nil then
        retry = size
        local r = used - lim
        if r < base then
          local e = redis.call('ZRANGE', k, r, r, 'WITHSCORES')
          retry = tonumber(e[2]) + size - now
        end
      end
      t = retry
    end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 1, t, exceed
  else
    used = used + 1
    add[#add + 1], add[#add + 2] = now, m
    ids[#ids + 1] = {KEYS[1 + na + j], amount}
    seen[m] = amount
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, 1, 0, 0
  end
  out[o + 5] = used
end
if #add > 1 then
  local ttl = size / 1000 + tonumber(ARGV[1])
  redis.call('ZADD', k, unpack(add))
  redis.call('PEXPIRE', k, ttl)
  for _, e in ipairs(ids) do
    redis.call('SET', e[1], e[2], 'PX', ttl)
  end
end
return out
`)

// learnScript reads or changes the learned limits of learning windows
// (learned.go), atomically, with the time from Redis.
//
//	KEYS[2j-1], KEYS[2j]  window j: its sorted set, its learned-limit hash
//	                      {l, t, nb, e} ('<window key>:L')
//	ARGV[1]               0: the time from Redis TIME; else µs (tests)
//	ARGV[2]               1 throttle, 2 read, 3 reset (delete)
//	ARGV[3]               TTL margin in ms, past a state's end
//	ARGV[4]               the channel's retry-after in µs (throttle)
//	ARGV[5]               a, the number of windows, then 5 per window:
//	                      size µs, limit, step, decrease (millionths), floor
//
// A throttle sets each window's state to the model's (Model.Throttle): with
// u = ZCOUNT of (now − size, now] and v the value of a state in force,
// l = max(floor, min(v, ⌊u × decrease / 10⁶⌋)), nb = max(now + retry-after,
// nb), e = max(nb, now + ⌈(limit − l) / step⌉ × size), and a TTL to e plus
// the margin; it deletes the state when l ≥ limit and nb ≤ now. Returns
// the time, then {l, t, nb, e} per window as it is after the call (l = -1:
// none in force; a read deletes nothing).
var learnScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local op, margin, ra = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {now}
for j = 1, tonumber(ARGV[5]) do
  local o = 6 + 5 * (j - 1)
  local size, limit, step, dec, floor = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
  local zk, lk = KEYS[2 * j - 1], KEYS[2 * j]
  local st = {}
  if op == 3 then
    redis.call('DEL', lk)
  else
    st = redis.call('HMGET', lk, 'l', 't', 'nb', 'e')
    if st[1] and now >= tonumber(st[4]) then
      st = {}
    end
  end
  if op == 1 then
    local l = math.floor(redis.call('ZCOUNT', zk, now - size + 1, '+inf') * dec / 1000000)
    local nb = now + math.max(ra, 0)
    if st[1] then
      local v = tonumber(st[1]) + math.floor(math.max(now - tonumber(st[2]), 0) / size) * step
      l = math.min(l, v)
      nb = math.max(nb, tonumber(st[3]))
    end
    l = math.max(l, floor)
    if l >= limit and nb <= now then
      redis.call('DEL', lk)
      st = {}
    else
      local e = nb
      if l < limit then
        e = math.max(e, now + math.floor((limit - l + step - 1) / step) * size)
      end
      redis.call('HSET', lk, 'l', l, 't', now, 'nb', nb, 'e', e)
      redis.call('PEXPIRE', lk, math.ceil((e - now) / 1000) + margin)
      st = {l, now, nb, e}
    end
  end
  if st[1] then
    for f = 1, 4 do
      out[#out + 1] = tonumber(st[f])
    end
  else
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = -1, 0, 0, 0
  end
end
return out
`)

// releaseScript removes a member from every window given, with its weight.
// KEYS as checkScript's; ARGV[1] = n, ARGV[1+i] = kind of window i,
// ARGV[n+2] = the member. With ARGV[n+3], an amount, it removes the member
// only from the windows that hold it for that amount (Store.ReleaseIfAmount):
// a calendar window's hash and a sliding amount window's amounts hash hold
// it, and a sliding count window's identity key, whose KEYS follow the
// amounts hashes (one per sliding count window, in order; checkKeys). A
// window holding the member for another amount, or a sliding count window
// whose identity key is gone, keeps it. Returns the number of windows that
// held it and were released.
var releaseScript = redis.NewScript(`
local n = tonumber(ARGV[1])
local member = ARGV[n + 2]
local want = ARGV[n + 3] and tonumber(ARGV[n + 3])
local na = 0
for i = 1, n do
  if tonumber(ARGV[1 + i]) == 1 then
    na = na + 1
  end
end
local h, c, removed = n, n + na, 0
for i = 1, n do
  local kind, k = tonumber(ARGV[1 + i]), KEYS[i]
  if kind >= 2 then
    local w = redis.call('HGET', k, member)
    if w and (want == nil or tonumber(w) == want) then
      if kind == 2 then
        w = 1
      end
      redis.call('HDEL', k, member)
      redis.call('HINCRBY', k, '#s', -tonumber(w))
      removed = removed + 1
    end
  elseif kind == 1 then
    h = h + 1
    local w = redis.call('HGET', KEYS[h], member)
    if (want == nil or tonumber(w) == want) and redis.call('ZREM', k, member) == 1 then
      redis.call('HDEL', KEYS[h], member)
      redis.call('HINCRBY', KEYS[h], '#s', -(tonumber(w) or 0))
      removed = removed + 1
    end
  else
    c = c + 1
    if want == nil or tonumber(redis.call('GET', KEYS[c])) == want then
      removed = removed + redis.call('ZREM', k, member)
    end
  end
end
return removed
`)

// usageScript reads, without changing anything, the use of each window.
// KEYS as checkScript's; ARGV[1] is the time as checkScript's ARGV[2],
// ARGV[2] = n, then the window arguments as checkScript's. Returns the uses.
var usageScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = tonumber(ARGV[2])
local out, h = {}, n
for i = 1, n do
  local o = 3 + 8 * (i - 1)
  local kind, size, k = tonumber(ARGV[o]), tonumber(ARGV[o + 2]), KEYS[i]
  if kind >= 2 then
    out[i] = 0
    for b = 1, 3 do
      if now >= tonumber(ARGV[o + 2 + b]) and now < tonumber(ARGV[o + 3 + b]) and redis.call('HGET', k, '#p') == ARGV[o + 2 + b] then
        out[i] = tonumber(redis.call('HGET', k, '#s') or 0)
      end
    end
  elseif kind == 1 then
    h = h + 1
    local sum = tonumber(redis.call('HGET', KEYS[h], '#s') or 0)
    local gone = redis.call('ZRANGEBYSCORE', k, '-inf', now - size)
    for c = 1, #gone, 1000 do
      local ws = redis.call('HMGET', KEYS[h], unpack(gone, c, math.min(c + 999, #gone)))
      for e = 1, #ws do
        sum = sum - (tonumber(ws[e]) or 0)
      end
    end
    out[i] = sum
  else
    out[i] = redis.call('ZCOUNT', k, now - size + 1, '+inf')
  end
end
return out
`)
