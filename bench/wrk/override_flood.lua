-- wrk script for scripts/abuse-override-flood (issue 11, item 1): every request is a new key
-- with Envoy's per-descriptor `limit` override, rate (n % RATES) + 1 per day (env RATES,
-- default 1024), on POST /v1/check: the flood that once grew sluiced's memory without bound. Each wrk thread numbers its own
-- requests (thread id in the key), so no key repeats across threads. Status codes are tallied
-- and printed at the end ("status tally: 200=... 400=... other=...").

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local rates = tonumber(os.getenv("RATES") or "1024")
local n = 0
local headers = { ["Content-Type"] = "application/json" }

function request()
  n = n + 1
  local body = string.format(
    '{"domain":"flood","descriptors":[{"entries":[{"key":"user","value":"t%d-flood-user-%d"}],' ..
    '"limit":{"requests_per_unit":%d,"unit":"day"}}]}', id or 0, n, (n % rates) + 1)
  return wrk.format("POST", "/v1/check", headers, body)
end

function response(status, headers, body)
  local k = "n" .. status
  _G[k] = (_G[k] or 0) + 1
end

local codes = { 200, 400, 413, 429, 500, 503 }

function done(summary, latency, requests)
  local line, other = "status tally:", summary.requests
  for _, code in ipairs(codes) do
    local c = 0
    for _, t in ipairs(threads) do c = c + (t:get("n" .. code) or 0) end
    if c > 0 then line = line .. string.format(" %d=%d", code, c) end
    other = other - c
  end
  print(line .. string.format(" other=%d", other))
end
