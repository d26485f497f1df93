-- wrk script that seeds keys /bench/1 .. /bench/BENCH_KEYS with token 2, so
-- that every token-1 write of fenced_put.lua is stale. Each thread walks the
-- keys by stride BENCH_THREADS and starts over at the end (a repeat with an
-- equal token is accepted and changes nothing); run.sh stops wrk once the
-- fence count reaches BENCH_KEYS.
local keys = tonumber(os.getenv("BENCH_KEYS") or "10000")
local stride = tonumber(os.getenv("BENCH_THREADS") or "2")
local token = {["Fencing-Token"] = "2"}

local count = 0
function setup(thread)
  thread:set("id", count)
  count = count + 1
end

function init(args)
  n = id
end

function request()
  local key = n % keys + 1
  n = n + stride
  return wrk.format("PUT", "/bench/" .. key, token, "seed")
end
