-- wrk workload for etcd's JSON gateway: the same fenced write as
-- fenced_put.lua, as one transaction that compares the key's token and puts
-- the token and the value only when the presented token is not lower.
-- Tokens are 20-digit zero-padded, so etcd's byte-wise compare orders them;
-- "current < token + 1" stands for "current <= token". With BENCH_SEED=1 it
-- seeds every key with token 2 instead, walking the keys like seed_put.lua.
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

local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(s)
  return ((s:gsub(".", function(c)
    local r, b = "", c:byte()
    for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
    return r
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return alphabet:sub(c + 1, c + 1)
  end) .. ({"", "==", "="})[#s % 3 + 1])
end

local function pad(n) return string.format("%020.0f", n) end

local keys = tonumber(os.getenv("BENCH_KEYS") or "10000")
local seeding = os.getenv("BENCH_SEED") == "1"
local stride = tonumber(os.getenv("BENCH_THREADS") or "2")
local fresh = b64("fresh-" .. string.rep("v", 122))
local stale = b64("stale-" .. string.rep("v", 122))
local headers = {["Content-Type"] = "application/json"}

local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time() * 100 + id)
  n = id
  succeeded, failed = 0, 0
end

local function txn(key, token, value)
  local t = b64("bench/t/" .. key)
  return wrk.format("POST", "/v3/kv/txn", headers, string.format(
    '{"compare":[{"key":"%s","result":"LESS","target":"VALUE","value":"%s"}],' ..
    '"success":[{"requestPut":{"key":"%s","value":"%s"}},' ..
    '{"requestPut":{"key":"%s","value":"%s"}}]}',
    t, b64(pad(token + 1)), t, b64(pad(token)), b64("bench/v/" .. key), value))
end

function request()
  if seeding then
    local key = n % keys + 1
    n = n + stride
    local t = b64("bench/t/" .. key)
    return wrk.format("POST", "/v3/kv/txn", headers, string.format(
      '{"success":[{"requestPut":{"key":"%s","value":"%s"}},' ..
      '{"requestPut":{"key":"%s","value":"%s"}}]}',
      t, b64(pad(2)), b64("bench/v/" .. key), b64("seed")))
  end
  local key = math.random(keys)
  if math.random(10) == 1 then return txn(key, 1, stale) end
  return txn(key, now_us(), fresh)
end

function response(status, hdrs, body)
  if seeding then return end
  if status == 200 and body:find('"succeeded":true', 1, true) then
    succeeded = succeeded + 1
  else
    failed = failed + 1
  end
end

function done(summary, latency, requests)
  if seeding then return end
  local s, f = 0, 0
  for _, thread in ipairs(threads) do
    s = s + thread:get("succeeded")
    f = f + thread:get("failed")
  end
  io.write(string.format("etcd accepted=%d rejected=%d\n", s, f))
end
