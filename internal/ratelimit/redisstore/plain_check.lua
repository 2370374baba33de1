local now = readNow(ARGV[2])
local k, lim, size = KEYS[1], tonumber(ARGV[5]), tonumber(ARGV[6])
-- na: 1 when the window learns; its learned-limit hash is then KEYS[2],
-- and the members come one later
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
    was = (idFind(k, size, present[j], m))
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
    ids[#ids + 1], ids[#ids + 2] = m, amount
    seen[m] = amount
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, 1, 0, 0
  end
  out[o + 5] = used
end
if #add > 1 then
  local margin = tonumber(ARGV[1])
  idRecord(k, size, now, margin, ids, base)
  redis.call('ZADD', k, unpack(add))
  redis.call('PEXPIRE', k, size / 1000 + margin)
end
return out
