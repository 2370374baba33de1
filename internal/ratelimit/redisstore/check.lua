local now = readNow(ARGV[2])
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
-- window i
local members, amounts, win, who = {}, {}, {}, {}
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
  return (idFind(KEYS[i], sizes[i], present[i][j], members[j]))
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
local zadd, hset, ids, total = {}, {}, {}, {}
for i = 1, n do
  zadd[i], hset[i], ids[i], total[i] = {'NX'}, {}, {}, 0
end
local out, seen = {now, nl}, {}
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
  -- identity first: a member held with another amount is a conflict. A
  -- window's own record comes first: an earlier member of this call with
  -- the same id (seen) was checked in its own merchant's windows, and a
  -- record this window held before the call may be of another amount.
  for _, i in ipairs(wj) do
    local was = nil
    if mode[i] == 2 then
      was = nil
    elseif present[i][j] then
      was = amountIn(i, j)
    elseif seen[member] then
      was = seen[member]
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
          local d = ids[i]
          d[#d + 1], d[#d + 2] = member, amounts[j]
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
-- the amounts first: recording them is what can fail while the slot moves
for i = 1, n do
  if kind[i] == 0 and #ids[i] > 0 then
    idRecord(KEYS[i], sizes[i], now, margin, ids[i], base[i])
  end
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
return out
