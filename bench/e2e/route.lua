-- route.lua: wrk script for scripts/bench-routing.sh, on top of pay.lua.
--
--   wrk -t2 -c64 -d8s -s bench/e2e/route.lua http://127.0.0.1:PORT -- LABEL MODE BIZTYPE PREFIX
--
-- MODE "pinned" is pay.lua's "pay" (channel ALIPAY); MODE "routed" sends the
-- same body without a channel, so POST /pay routes it by BIZTYPE's route.
-- Every request has a requestId of its own; done() is pay.lua's.

dofile("bench/e2e/pay.lua")

local base_init = init

function init(args)
  local routed = args[2] == "routed"
  base_init({ args[1], "pay", args[3], args[4] })
  if routed then
    tail = tail:gsub('"channel":"ALIPAY",', "")
  end
end
