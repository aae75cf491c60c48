// Taking a lease: a request's own decision and units of quota taken ahead of use, in one atomic
// script (Limiter::TakeAsync; docs/redis.md, "Leased"). Internal.
//
// The units are taken the way an admission takes them -- the algorithm's own body runs a second
// time with the units as its cost -- so a lease can never hold what the limit would not have
// admitted at that instant, and giving back what was not spent is kRefundScript's give-back of
// an admission at the lease's `now`. That is why only the algorithms whose admissions are units
// of one count can lend: token bucket, GCRA, leaky bucket (meter) and fixed window.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_LEASE_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_LEASE_H_

#include <string>

#include "store/redis/redis_client.h"
#include "store/redis/redis_script_multi.h"
#include "store/redis/redis_scripts.h"

namespace sluice::internal {

// KEYS[1]: the key; KEYS[2]: the hash of the nodes drawing on it (same hash slot), holder ->
// until_us. ARGV: now_us|'', algorithm id, number of script arguments k, the k script arguments
// (spec arguments, cost, flags '0'), want, holder, ttl_us. Decides cost; when that is allowed,
// takes min(want, remaining) units more. A node that asks for units (want > 0) is recorded as
// drawing on the key for ttl_us, and the nodes recorded are counted. Returns {now_us, {allowed,
// remaining, reset_us, retry_us}, units, holders} (holders 0 when want is 0: not counted).
inline const LuaScript kLeaseScript{kLuaPrelude + kLuaBodies + R"lua(
local alg, k = tonumber(ARGV[2]), tonumber(ARGV[3])
local args = {ARGV[1]}
for j = 1, k do args[j + 1] = ARGV[3 + j] end
local want, holder, ttl = tonumber(ARGV[4 + k]), ARGV[5 + k], tonumber(ARGV[6 + k])
local r = bodies[alg]({KEYS[1]}, args)
local units, holders = 0, 0
if r[1] == 1 and want > 0 and r[2] > 0 then
  local e = math.min(want, r[2])
  args[k] = tostring(e)  -- the cost: second to last, before the flags
  local more = bodies[alg]({KEYS[1]}, args)
  if more[1] == 1 then
    units = e
    r[2], r[3] = more[2], more[3]
  end
end
if want > 0 then
  redis.call('HSET', KEYS[2], holder, now + ttl)
  local all = redis.call('HGETALL', KEYS[2])
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) > now then holders = holders + 1 else redis.call('HDEL', KEYS[2], all[i]) end
  end
  redis.call('PEXPIRE', KEYS[2], cdiv(ttl, 1000))
end
return {now, r, units, holders}
)lua"};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_LEASE_H_
