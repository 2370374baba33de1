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
