local n = tonumber(ARGV[1])
local member = ARGV[2 * n + 2]
local want = ARGV[2 * n + 3] and tonumber(ARGV[2 * n + 3])
local h, removed = n, 0
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
    local at = redis.call('ZSCORE', k, member)
    if at then
      local size = tonumber(ARGV[1 + n + i])
      if want == nil or idGet(k, size, at, member) == want then
        removed = removed + redis.call('ZREM', k, member)
        idDel(k, size, at, member)
      end
    end
  end
end
return removed
