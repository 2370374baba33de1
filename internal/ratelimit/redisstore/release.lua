local n = tonumber(ARGV[1])
local member = ARGV[2 * n + 2]
local want = ARGV[2 * n + 3] and tonumber(ARGV[2 * n + 3])
-- first what each window holds (the reads that can fail while the slot
-- moves), then the removals
local h, go = n, {}
for i = 1, n do
  local kind, k = tonumber(ARGV[1 + i]), KEYS[i]
  if kind >= 2 then
    local w = redis.call('HGET', k, member)
    if w and (want == nil or tonumber(w) == want) then
      if kind == 2 then
        w = 1
      end
      go[i] = {w = tonumber(w)}
    end
  elseif kind == 1 then
    h = h + 1
    local w = redis.call('HGET', KEYS[h], member)
    if want == nil or tonumber(w) == want then
      go[i] = {w = tonumber(w) or 0, hk = KEYS[h]}
    end
  else
    local at = redis.call('ZSCORE', k, member)
    if at then
      local v, ik = idFind(k, tonumber(ARGV[1 + n + i]), at, member)
      if want == nil or v == want then
        go[i] = {ik = ik}
      end
    end
  end
end
local removed = 0
for i = 1, n do
  local g, kind, k = go[i], tonumber(ARGV[1 + i]), KEYS[i]
  if g then
    if kind >= 2 then
      redis.call('HDEL', k, member)
      redis.call('HINCRBY', k, '#s', -g.w)
      removed = removed + 1
    elseif kind == 1 then
      if redis.call('ZREM', k, member) == 1 then
        redis.call('HDEL', g.hk, member)
        redis.call('HINCRBY', g.hk, '#s', -g.w)
        removed = removed + 1
      end
    else
      removed = removed + redis.call('ZREM', k, member)
      if g.ik then
        redis.call('HDEL', g.ik, member)
      end
    end
  end
end
return removed
