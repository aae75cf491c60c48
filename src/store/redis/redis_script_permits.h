// Concurrency permits in Redis (sluice/permits.h): acquire, release and renew, each one atomic
// script on one key. Internal.
//
// The key is a sorted set of permit id -> expiry (microseconds of the script's clock: Redis's
// TIME on the key's master, unless the store is told to use the caller's). Each script first
// removes the permits expired at its now (expiry <= now) and returns how many, so an expired
// permit is counted once, by the node whose call dropped it. A permit is live while now <
// expiry. The key's TTL is kept at its latest expiry plus one ttl: a key nobody calls again
// disappears a ttl after its last permit expired (an empty sorted set is deleted by Redis at
// once), and a call within that ttl still counts the expired permits it drops. Those of a key
// that stays idle longer go uncounted: PermitStats::expired on Redis is a lower bound.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_PERMITS_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_PERMITS_H_

#include <string>

#include "store/redis/redis_client.h"

namespace sluice::internal {

// Shared: now from ARGV[1] ('' for TIME), the expired permits dropped, the key's TTL.
inline constexpr char kLuaPermitPrelude[] = R"lua(
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
local gone = redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local function keep_until_latest(ttl)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', key, math.ceil((last[2] + ttl - now) / 1000)) end
end
)lua";

// ARGV: now_us|'', max_in_flight, reserve, ttl_us, permit id. An id already held is renewed (no
// second slot). Returns {granted, held after, now_us, expires_us (0 refused), retry_us (refused:
// until the earliest held permit expires; ttl_us when none is held: the caller says never for
// reserve >= max), expired dropped}.
inline const LuaScript kPermitAcquireScript{std::string(kLuaPermitPrelude) + R"lua(
local max, reserve, ttl, id = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5]
local held = redis.call('ZCARD', key)
local exp = now + ttl
if not redis.call('ZSCORE', key, id) then
  if held >= max - reserve then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local retry = ttl
    if first[2] then retry = first[2] - now end
    return {0, held, now, 0, retry, gone}
  end
  held = held + 1
end
redis.call('ZADD', key, exp, id)
keep_until_latest(ttl)
return {1, held, now, exp, 0, gone}
)lua"};

// ARGV: now_us|'', permit id. Returns {released, held after, now_us, 0, 0, expired dropped}. The
// key's TTL is left as it is: at worst the key outlives its permits until then.
inline const LuaScript kPermitReleaseScript{std::string(kLuaPermitPrelude) + R"lua(
local released = redis.call('ZREM', key, ARGV[2])
return {released, redis.call('ZCARD', key), now, 0, 0, gone}
)lua"};

// ARGV: now_us|'', ttl_us, permit id. A held permit lives until now + ttl. Returns {renewed,
// held, now_us, expires_us (0 not renewed), 0, expired dropped}.
inline const LuaScript kPermitRenewScript{std::string(kLuaPermitPrelude) + R"lua(
local ttl, id = ARGV[2] + 0, ARGV[3]
local held = redis.call('ZCARD', key)
if not redis.call('ZSCORE', key, id) then return {0, held, now, 0, 0, gone} end
local exp = now + ttl
redis.call('ZADD', key, exp, id)
keep_until_latest(ttl)
return {1, held, now, exp, 0, gone}
)lua"};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_PERMITS_H_
