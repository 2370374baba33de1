-- gateway.lua: wrk script for scripts/bench-gateway.sh, on top of pay.lua.
--
--   wrk -t2 -c64 -d8s -s bench/e2e/gateway.lua http://127.0.0.1:PORT -- LABEL CHANNEL BIZTYPE PREFIX
--
-- pay.lua's "pay" pinned to CHANNEL instead of ALIPAY: ALIPAY is the
-- in-process simulator, WECHAT the channel gateway over HTTP (the
-- emulator). Every request has a requestId of its own; done() is pay.lua's.

dofile("bench/e2e/pay.lua")

local base_init = init

function init(args)
  base_init({ args[1], "pay", args[3], args[4] })
  tail = tail:gsub('"channel":"ALIPAY"', '"channel":"' .. args[2] .. '"')
end
