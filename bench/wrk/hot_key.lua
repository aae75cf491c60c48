-- wrk script for scripts/run-overlimit-bench: every request is the same POST /v1/check for one
-- unknown API key (examples/sluice.yaml's plan_default, 10 a minute), so after its first ten
-- requests the key is over its limit and every request is a 429 -- the hammered over-limit key
-- the over-limit cache is for (docs/redis.md, "The over-limit cache").
local body = '{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"key_hot_0001"}]}]}'
local req

function init(args)
  req = wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" }, body)
end

function request()
  return req
end
