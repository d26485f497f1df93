-- wrk workload for fencepost and the null server: PUTs of 128-byte values
-- over BENCH_KEYS keys (default 10000). One write in ten is a stale leader:
-- token 1 and a body starting "stale-", while the keys were seeded with token
-- 2 (seed_put.lua), so every one of them must be rejected. The others present
-- a fresh token, the current time in microseconds, as a lease counter would.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec* ts);
]]
local ts = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(0, ts)
  return tonumber(ts.tv_sec) * 1000000 + math.floor(tonumber(ts.tv_nsec) / 1000)
end

local keys = tonumber(os.getenv("BENCH_KEYS") or "10000")
local fresh = "fresh-" .. string.rep("v", 122)
local stale = "stale-" .. string.rep("v", 122)
local stale_token = {["Fencing-Token"] = "1"}

local count = 0
function setup(thread)
  count = count + 1
  thread:set("id", count)
end

function init(args)
  math.randomseed(os.time() * 100 + (id or 0))
end

function request()
  local key = "/bench/" .. math.random(keys)
  if math.random(10) == 1 then
    return wrk.format("PUT", key, stale_token, stale)
  end
  return wrk.format("PUT", key,
    {["Fencing-Token"] = string.format("%.0f", now_us())}, fresh)
end
