// The Lua scripts the Redis store runs. Each one is a whole read-decide-write, executed
// atomically by Redis: no other command runs between its read and its write, so two sluice nodes
// can never both read "99 < 100" and both admit. Internal.
#ifndef SLUICE_STORE_REDIS_SCRIPTS_H_
#define SLUICE_STORE_REDIS_SCRIPTS_H_

#include "store/redis_client.h"

namespace sluice::internal {

// Fixed window. KEYS[1]: the counter, a hash {w: window index, c: hits in it}.
// ARGV: limit, window_ms, cost, now_ms ('' = use Redis's own TIME, so nodes with skewed clocks
// agree). Returns {allowed 0|1, remaining, retry_after_ms}. The key expires when its window
// ends (never later: no key outlives its usefulness).
inline const LuaScript kFixedWindowScript{R"lua(
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[4])
end
local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local w = math.floor(now / window)
local state = redis.call('HMGET', KEYS[1], 'w', 'c')
local count = 0
if tonumber(state[1]) == w then count = tonumber(state[2]) end
if count + cost > limit then
  return {0, limit - count, (w + 1) * window - now}
end
count = count + cost
redis.call('HSET', KEYS[1], 'w', w, 'c', count)
-- Relative TTL: right under Redis's clock and under a passed-in test clock alike.
redis.call('PEXPIRE', KEYS[1], (w + 1) * window - now)
return {1, limit - count, 0}
)lua"};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_SCRIPTS_H_
