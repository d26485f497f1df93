-- wrk workload for fencepost's leases (tests/bench/leases.sh).
-- BENCH_LEASE_MODE=renew: each request renews one of BENCH_LEASES leases
-- (the first request on each grants it), so nearly every answer is a
-- renewal. BENCH_LEASE_MODE=grant: each request takes a lease nobody held,
-- so every answer is a grant that raises a new fence; each lapses a second
-- later, so the leases alive stay near the grants of one second, well
-- under the default --max-leases however long the run.
local mode = os.getenv("BENCH_LEASE_MODE") or "renew"
local leases = tonumber(os.getenv("BENCH_LEASES") or "1000")
local threads = {}
local count = 0

function setup(thread)
  count = count + 1
  thread:set("id", count)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time() * 100 + (id or 0))
  n = 0
  bad = 0
end

function request()
  local name, holder, ttl = nil, nil, 600000
  if mode == "grant" then
    n = n + 1
    name = "bench/grant-" .. id .. "-" .. n
    holder = "h"
    ttl = 1000
  else
    local i = math.random(leases)
    name = "bench/renew-" .. i
    holder = "holder-" .. i
  end
  return wrk.format("PUT", "/v1/leases/" .. name, nil,
                    '{"holder":"' .. holder .. '","ttl_ms":' .. ttl .. '}')
end

function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
end

function done(summary, latency, requests)
  local failed = 0
  for _, t in ipairs(threads) do failed = failed + t:get("bad") end
  io.write(string.format("non-200 answers: %d\n", failed))
end
