-- wrk script for concurrency permits (scripts/run-permit-bench; BENCHMARKS.md, "Concurrency
-- permits: acquire+release vs check"). One script for both sides of the ratio, so wrk does
-- the same work per response on each:
--   MODE=check  POST /v1/check {"domain":"bench","descriptors":[[rl_tenant=tNNNN]]}: a rate
--               limit high enough never to refuse (bench/permit/bench.yaml);
--   MODE=pair   POST /v1/acquire of [cc_tenant=tNNNN] (a concurrency limit high enough never
--               to refuse), then POST /v1/release of the permit that acquire returned.
-- Tenants come from 1024 values, so the keys spread as a real fleet's would.
--
-- wrk's Lua state is per thread, not per connection: a thread keeps a FIFO of the permits its
-- acquires returned, and whichever of its connections sends next releases the oldest one (an
-- acquire when there is none). Every permit is released exactly once, a few requests after its
-- acquire; the permits outstanding at any instant are at most the thread's connections.
--
-- response() classifies each answer by its body and status and counts: ok_check (200
-- "overall":"OK"), ok_acquire (200 with a permit), ok_release (200 "released":true), and
-- everything else as bad_* (a 429, "released":false, a 5xx, a null permit). done() prints one
-- line, "permit tally: ...", which scripts/run-permit-bench reads: a run with any bad_* count
-- is not a result. Both modes define response(), so wrk parses every body on both sides.

local mode = os.getenv("MODE") or "check"
local tenants = tonumber(os.getenv("TENANTS") or "1024")

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local headers = { ["Content-Type"] = "application/json" }
local first_requests = {}
local n_first = 4096
-- A release's request line and headers but its Content-Length, built once: wrk.format per
-- release (a table of headers formatted and joined each time) would cost wrk more per pair
-- call than the prebuilt checks cost it, and wrk shares the 2 cores with sluiced.
local release_head

local function descriptor_body(key, tenant)
  return '{"domain":"bench","descriptors":[{"entries":[{"key":"' .. key ..
      '","value":"t' .. tenant .. '"}]}]}'
end

function init(args)
  math.randomseed(7919 + (id or 0) * 104729)
  local path = mode == "pair" and "/v1/acquire" or "/v1/check"
  local key = mode == "pair" and "cc_tenant" or "rl_tenant"
  local h = {}
  for k, v in pairs(headers) do h[k] = v end
  -- With no body wrk.format ends the head with an empty line: drop it, Content-Length follows.
  release_head = string.sub(wrk.format("POST", "/v1/release", h, nil), 1, -3)
  for i = 1, n_first do
    first_requests[i] = wrk.format("POST", path, headers,
                                   descriptor_body(key, math.random(0, tenants - 1)))
  end
end

-- Permits returned and not yet released: a FIFO in a table with head and tail indexes.
local permits, head, tail = {}, 1, 0

function request()
  if head <= tail then
    local p = permits[head]
    permits[head] = nil
    head = head + 1
    local body = '{"permit":"' .. p .. '"}'
    return release_head .. "Content-Length: " .. #body .. "\r\n\r\n" .. body
  end
  return first_requests[math.random(n_first)]
end

ok_check, ok_acquire, ok_release, bad_status, bad_body = 0, 0, 0, 0, 0

function response(status, hdrs, body)
  if status ~= 200 then
    bad_status = bad_status + 1
    return
  end
  if mode == "check" then
    if string.find(body, '"overall":"OK"', 1, true) then
      ok_check = ok_check + 1
    else
      bad_body = bad_body + 1
    end
    return
  end
  local p = string.match(body, '"permit":"([^"]+)"')
  if p then
    ok_acquire = ok_acquire + 1
    tail = tail + 1
    permits[tail] = p
  elseif string.find(body, '"released":true', 1, true) then
    ok_release = ok_release + 1
  else
    bad_body = bad_body + 1
  end
end

function done(summary, latency, requests)
  local sums = { ok_check = 0, ok_acquire = 0, ok_release = 0, bad_status = 0, bad_body = 0 }
  for _, t in ipairs(threads) do
    for k, _ in pairs(sums) do sums[k] = sums[k] + (t:get(k) or 0) end
  end
  print(string.format(
    "permit tally: mode=%s ok_check=%d ok_acquire=%d ok_release=%d bad_status=%d bad_body=%d",
    mode, sums.ok_check, sums.ok_acquire, sums.ok_release, sums.bad_status, sums.bad_body))
end
