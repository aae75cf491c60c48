-- wrk script for sluiced's POST /v1/check (scripts/run-server-bench; BENCHMARKS.md, "sluiced
-- server"). Each wrk thread builds a pool of request bodies once (init), then every request
-- picks one at random, so the per-request cost on wrk's side is a table lookup, not string
-- building: the same script is run against the nginx ceiling, so both see identical requests.
--
-- The mix follows examples/sluice.yaml (domain "api"), descriptors as Envoy sends them:
--   45  [remote_address=IP]                              per_ip (50/s, burst 200): allowed
--   20  [remote_address=IP] [api_key=key_bench_NNNN]     unknown keys: plan_default, 10/min
--   10  [remote_address=IP] [api_key=<a plans.yaml key>] plan_pro / plan_free / enterprise (soft)
--   10  [remote_address=IP] [remote_address=IP, path=/v1/search/orders]  search_per_ip (shadow)
--    8  [api_key=key_bench_NNNN, path=/v1/payments, method=POST]  payments_create (20/min, log)
--    5  [path=/healthz]                                  unlimited
--    2  [remote_address=203.0.113.66]                    blocked_ip: always 429
-- IPs from 2048 addresses, unknown API keys from 4096.
--
-- Env: TALLY=1 adds a response() callback counting status codes, printed at the end (wrk then
-- parses every response's headers, which costs it CPU: leave it off for the throughput run;
-- wrk's own "Non-2xx or 3xx responses" line counts the 429s either way).
-- Headers given with wrk -H are sent with every request.
-- POOL (default 16384) request bodies per thread; SEED (default 1) varies the pools.

local pool_size = tonumber(os.getenv("POOL") or "16384")
local seed = tonumber(os.getenv("SEED") or "1")
local tally = os.getenv("TALLY") == "1"

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local function ip(i)
  return string.format("10.%d.%d.%d", 1 + math.floor(i / 65536) % 200,
                       math.floor(i / 256) % 256, i % 256)
end

local known = { "key_live_pro_7f3a", "key_live_ent_19c2", "key_test_free_01", "key_test_free_02" }

local function entry(k, v) return '{"key":"' .. k .. '","value":"' .. v .. '"}' end
local function desc(...) return '{"entries":[' .. table.concat({ ... }, ",") .. ']}' end

local function body()
  local r = math.random(100)
  local a = ip(math.random(0, 2047))
  local d
  if r <= 45 then
    d = { desc(entry("remote_address", a)) }
  elseif r <= 65 then
    d = { desc(entry("remote_address", a)),
          desc(entry("api_key", string.format("key_bench_%04d", math.random(0, 4095)))) }
  elseif r <= 75 then
    d = { desc(entry("remote_address", a)), desc(entry("api_key", known[math.random(#known)])) }
  elseif r <= 85 then
    d = { desc(entry("remote_address", a)),
          desc(entry("remote_address", a), entry("path", "/v1/search/orders")) }
  elseif r <= 93 then
    d = { desc(entry("api_key", string.format("key_bench_%04d", math.random(0, 4095))),
               entry("path", "/v1/payments"), entry("method", "POST")) }
  elseif r <= 98 then
    d = { desc(entry("path", "/healthz")) }
  else
    d = { desc(entry("remote_address", "203.0.113.66")) }
  end
  return '{"domain":"api","descriptors":[' .. table.concat(d, ",") .. ']}'
end

local requests = {}

function init(args)
  math.randomseed(seed * 7919 + (id or 0) * 104729)
  local headers = { ["Content-Type"] = "application/json" }
  -- Headers given with wrk -H (e.g. "Authorization: Bearer ..." for caller identity,
  -- scripts/run-tls-bench): wrk.format drops wrk.headers when given its own table.
  for name, value in pairs(wrk.headers) do
    if headers[name] == nil then headers[name] = value end
  end
  for i = 1, pool_size do
    requests[i] = wrk.format("POST", "/v1/check", headers, body())
  end
end

function request()
  return requests[math.random(pool_size)]
end

local codes = { 200, 204, 400, 404, 405, 413, 429, 500, 503 }

if tally then
  -- Counted in globals n<code> of the thread's own Lua state, which done() reads back through
  -- thread:get (done runs in the main state).
  function response(status, headers, body)
    local k = "n" .. status
    _G[k] = (_G[k] or 0) + 1
  end
end

function done(summary, latency, requests)
  if not tally then return end
  local line, other = "status tally:", summary.requests
  for _, code in ipairs(codes) do
    local n = 0
    for _, t in ipairs(threads) do n = n + (t:get("n" .. code) or 0) end
    if n > 0 then line = line .. string.format(" %d=%d", code, n) end
    other = other - n
  end
  print(line .. string.format(" other=%d", other))
end
