local now = readNow(ARGV[1])
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
