-- wrk workload for fenced side effects (tests/bench/effects.sh): each
-- request a new call (its own Idempotency-Key) with a 64-byte JSON body.
-- BENCH_EFFECT_PATH: the path (/v1/effects/t/charges through fencepost,
-- /charges straight to the target). BENCH_EFFECT_FENCES: how many fence
-- keys the calls spread over (1: every call under bench/leader, so they go
-- one at a time, in the fence's turn).
local path = os.getenv("BENCH_EFFECT_PATH") or "/v1/effects/t/charges"
local fences = tonumber(os.getenv("BENCH_EFFECT_FENCES") or "1")
local body = '{"amount":1200,"currency":"EUR","customer":"c_0000000001"}'
local count = 0

function setup(thread)
  count = count + 1
  thread:set("id", count)
end

function init(args)
  n = 0
end

function request()
  n = n + 1
  local fence = "bench/leader"
  if fences > 1 then fence = fence .. "-" .. (n % fences) end
  return wrk.format("POST", path, {
    ["Fencing-Token"] = "1",
    ["Fence-Key"] = fence,
    ["Idempotency-Key"] = "call-" .. id .. "-" .. n,
    ["Content-Type"] = "application/json",
  }, body)
end
