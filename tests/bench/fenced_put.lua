-- wrk workload: fenced PUTs of 128-byte values over 10k keys; about one write
-- in ten presents a stale token (1), the rest an increasing one.
local counter = 1000
local body = string.rep("v", 128)
local keys = tonumber(os.getenv("FENCEPOST_BENCH_KEYS") or "10000")

request = function()
  counter = counter + 1
  local token = counter
  if counter % 10 == 0 then token = 1 end
  local key = "/bench/" .. math.random(keys)
  return wrk.format("PUT", key, {["Fencing-Token"] = tostring(token)}, body)
end

local codes = {}
response = function(status)
  codes[status] = (codes[status] or 0) + 1
end
