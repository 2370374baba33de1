-- A sliding count window keeps the amount each member was admitted for in
-- hashes beside its sorted set (field: the member, value: the amount),
-- named after the window's key and found from the member's score alone.
-- Each hash takes up to idMax records (a quarter of Redis's default
-- hash-max-listpack-entries, so that it stays compact and a lookup or an
-- insert scans little), then the next one down takes them:
--   1. the slice's: '<window key>:#~<slice>', a slice being the largest
--      power of two of µs at most size / 16384, and at least 1,024 µs: so
--      that members spread over a long window spread over about 16,384
--      hashes, the members of one call share one, and a short window's
--      calls within a millisecond share one too;
--   2. a burst's: '<window key>:#~<slice>.<fine slice>', a fine slice
--      being a slice / 64, for a burst that admits more within one slice;
--   3. a spill: '<burst's hash>:<0..63>', by the member's last bytes, for
--      more still within one fine slice (past 64 × idMax, a spill keeps
--      taking records, in Redis's larger encoding).
-- Every hash of a slice expires once every member it can hold has left the
-- window (plus the TTL margin); a release deletes the member's record.
--
-- These hashes are not among the script's KEYS (their names come from
-- scores it reads): they carry the window key's hash tag, so they are in
-- its Cluster slot. While that slot moves between nodes, the node may not
-- hold one of them; every access to them is therefore protected, and one
-- that fails ends the script with a TRYAGAIN error before it records
-- anything (what idRecord wrote in this call is deleted first), so that
-- the client sends the call again.
local idMax = 128
-- idWritten: the hashes and fields idRecord wrote in this call
local idWritten = {}
-- idCall is redis.call for a hash of amounts: its error ends the script
-- with TRYAGAIN, after deleting what idRecord wrote in this call
local function idCall(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    for _, w in ipairs(idWritten) do
      redis.pcall('HDEL', w[1], unpack(w[2]))
    end
    error({err = 'TRYAGAIN payserver: a hash of amounts is not on this node (' .. r.err .. ')'})
  end
  return r
end
local function idSlice(size)
  local q = size / 16384
  if q < 2048 then
    return 1024
  end
  local s = 2 ^ math.floor(math.log(q) / math.log(2))
  if s > q then
    s = s / 2
  elseif s * 2 <= q then
    s = s * 2
  end
  return s
end
-- idHash is the slice's hash of window k for score at, s the slice
local function idHash(k, s, at)
  return k .. ':#~' .. string.format('%.0f', math.floor(at / s))
end
-- idBurst is the burst's hash under the slice's hash b for score at
local function idBurst(b, s, at)
  return b .. '.' .. string.format('%.0f', math.floor(at / (s / 64)))
end
-- idSpill is the spill of burst's hash f for member m
local function idSpill(f, m)
  local n, h = #m, 0
  for p = math.max(n - 2, 1), n do
    h = h * 31 + string.byte(m, p)
  end
  return f .. ':' .. (h % 64)
end
-- idFind returns the amount member m, held by window k (size µs) with
-- score at, was admitted for, and the hash holding it; nil when its record
-- is gone
local function idFind(k, size, at, m)
  at = tonumber(at)
  local s = idSlice(size)
  local b = idHash(k, s, at)
  local v = idCall('HGET', b, m)
  if v then
    return tonumber(v), b
  end
  local f = idBurst(b, s, at)
  v = idCall('HGET', f, m)
  if v then
    return tonumber(v), f
  end
  local sk = idSpill(f, m)
  v = idCall('HGET', sk, m)
  if v then
    return tonumber(v), sk
  end
  return nil, nil
end
-- idNames returns the members of fields (member, amount, ...)
local function idNames(fields)
  local names = {}
  for p = 1, #fields, 2 do
    names[#names + 1] = fields[p]
  end
  return names
end
-- idRecord records fields (member, amount, ...) admitted into window k
-- (size µs, held members before this call) at now, each hash with a TTL
-- until the last member of its slice can leave, plus margin (ms). A call
-- records amounts before anything else it admits.
local function idRecord(k, size, now, margin, fields, held)
  local s = idSlice(size)
  local ttl = math.ceil((math.floor(now / s + 1) * s - now + size) / 1000) + margin
  local b = idHash(k, s, now)
  local c = #fields / 2
  -- a slice's hash holds only members the window holds: no more than
  -- held before this call
  if held + c <= idMax then
    idCall('HSET', b, unpack(fields))
    idWritten[#idWritten + 1] = {b, idNames(fields)}
    redis.call('PEXPIRE', b, ttl)
    return
  end
  local f = idBurst(b, s, now)
  -- order: the hashes to write, to: their fields, fresh: those HLEN found
  -- empty, which need their TTL (the others have it: every writer of a
  -- slice sets the same expiry)
  local order, to, fresh, e = {}, {}, {}, 1
  for _, h in ipairs({b, f}) do
    local l = idCall('HLEN', h)
    local room = math.min(idMax - l, (#fields - e + 1) / 2)
    if room > 0 then
      order[#order + 1], to[h], fresh[h] = h, {unpack(fields, e, e + 2 * room - 1)}, l == 0
      e = e + 2 * room
    end
    if e > #fields then
      break
    end
  end
  for p = e, #fields, 2 do
    local sk = idSpill(f, fields[p])
    if not to[sk] then
      order[#order + 1], to[sk], fresh[sk] = sk, {}, true
    end
    local t = to[sk]
    t[#t + 1], t[#t + 2] = fields[p], fields[p + 1]
  end
  for _, h in ipairs(order) do
    idCall('HSET', h, unpack(to[h]))
    idWritten[#idWritten + 1] = {h, idNames(to[h])}
    if fresh[h] then
      redis.call('PEXPIRE', h, ttl)
    end
  end
end
