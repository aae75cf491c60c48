-- wrk script for scripts/run-sync-bench's at-the-limit mix (bench/sync/at_limit.yaml): every
-- request is the same POST /v1/check for one key of the limit ALG names (token_bucket, gcra,
-- fixed_window), its value RUN (a fresh key per run). PACE_MS > 0: each connection waits that
-- long before each request (4 connections x 4 ms: at most 1,000 requests a second); unset or
-- 0: as fast as the connections go.
local alg = os.getenv("ALG") or "token_bucket"
local run = os.getenv("RUN") or "run"
local pace = tonumber(os.getenv("PACE_MS") or "0")
local body = '{"domain":"limit","descriptors":[{"entries":[{"key":"' .. alg .. '","value":"' ..
  run .. '"}]}]}'
local req

function init(args)
  req = wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, body)
end

function request()
  return req
end

if pace > 0 then
  function delay()
    return pace
  end
end
