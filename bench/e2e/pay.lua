-- pay.lua: wrk script for scripts/bench-e2e.sh.
--
--   wrk -t2 -c50 -d10s -s bench/e2e/pay.lua http://127.0.0.1:PORT -- LABEL MODE [BIZTYPE PREFIX]
--
-- MODE "pay": POST /pay for BIZTYPE:ALIPAY; every request carries a new
-- requestId PREFIX-<thread>-<n>, so no request is a replay. MODE "get": GET
-- /healthz. done() prints one table (requests/s, p50/p99/p999, answers by
-- status, socket errors) and one machine-readable RESULT line.

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  label = args[1] or "run"
  mode = args[2] or "pay"
  biz = args[3] or "BENCH"
  prefix = args[4] or "e2e"
  n = 0
  statuses = {}
  if mode == "get" then
    req = wrk.format("GET", "/healthz")
  end
  head = '{"requestId":"' .. prefix .. "-" .. tid .. "-"
  tail = '","bizType":"' .. biz .. '","channel":"ALIPAY","merchantId":"M1","amount":1999,"currency":"CNY"}'
  hdrs = { ["Content-Type"] = "application/json" }
end

function request()
  if mode == "get" then
    return req
  end
  n = n + 1
  return wrk.format("POST", "/pay", hdrs, head .. n .. tail)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local label = threads[1]:get("label")
  local by = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for k, v in pairs(s) do
      by[k] = (by[k] or 0) + v
    end
  end
  local secs = summary.duration / 1e6
  local codes, line = {}, ""
  for k in pairs(by) do table.insert(codes, k) end
  table.sort(codes)
  local ok, other = 0, 0
  for _, k in ipairs(codes) do
    line = line .. string.format(" %d=%d", k, by[k])
    if k >= 200 and k < 300 then ok = ok + by[k] else other = other + by[k] end
  end
  local e = summary.errors
  local sockerr = e.connect + e.read + e.write + e.timeout
  local ms = function(us) return us / 1000 end
  io.write(string.format("  %-34s %10s %9s %9s %9s\n", "run " .. label, "req/s", "p50 ms", "p99 ms", "p99.9 ms"))
  io.write(string.format("  %-34s %10.0f %9.2f %9.2f %9.2f\n", "", summary.requests / secs,
    ms(latency:percentile(50)), ms(latency:percentile(99)), ms(latency:percentile(99.9))))
  io.write(string.format("  answers:%s  (2xx=%d, non-2xx=%d); socket errors: connect=%d read=%d write=%d timeout=%d\n",
    line, ok, other, e.connect, e.read, e.write, e.timeout))
  io.write(string.format("RESULT label=%s requests=%d secs=%.3f rps=%.1f ok_rps=%.1f p50_us=%d p99_us=%d p999_us=%d ok=%d non2xx=%d sockerr=%d%s\n",
    label, summary.requests, secs, summary.requests / secs, ok / secs,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), ok, other, sockerr,
    (line:gsub(" (%d+)=", " s%1=")))
  )
end
