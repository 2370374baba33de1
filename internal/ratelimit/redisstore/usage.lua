local now = readNow(ARGV[1])
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
