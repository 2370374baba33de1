-- readNow returns the call's time in µs: arg, the time a test passes, or
-- Redis TIME when arg is 0 (always, in production).
local function readNow(arg)
  local now = tonumber(arg)
  if now == 0 then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end
