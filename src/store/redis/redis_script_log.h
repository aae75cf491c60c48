// The sliding window log in Redis: the same decisions as SlidingWindowLog (src/core), at
// microsecond resolution. Internal.
//
// One key per identity, a sorted set:
//   - one member per admitted request of cost c > 0, scored with its time t (us) and named
//     "<s>:<c>", where s is the number of hits this key admitted before it. s only grows, so names
//     are unique even for two requests in the same microsecond, and the hits a member holds are
//     numbered s+1 .. s+c: the count in the window is (s + c of the newest) - (s of the oldest),
//     and the k-th oldest hit is found by a binary search over ranks (s grows with rank).
//   - the member "~", scored with the latest time seen. No hit is later, and at a tie '~' sorts
//     after every digit, so it is always last: ZRANGE -2 -1 reads it with the newest request.
// A request of cost c is one member, not c, so memory and work do not grow with costs. Redis keeps
// a set of up to zset-max-listpack-entries (128) members as one flat listpack of about 20 bytes a
// member. Cost-0 requests and rejected ones record nothing but the latest time seen. The key gets a
// TTL each time a request is recorded: until the newest one leaves the window, when the key is the
// same as no key. A call that finds the window empty deletes the key. Like the memory store, which
// drops a replenished state, that also forgets the latest time seen: the two only differ when the
// clock goes back past it.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_LOG_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/algorithm.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"
#include "store/redis/redis_scripts.h"

namespace sluice::internal {

// KEYS[1]: the sorted set above. ARGV: now_us|'', limit, window_us, cost, flags (redis_scripts.h:
// a charge, or a decision's reserve; a decision's 0 <= cost <= limit: the caller rejects larger
// costs itself; a charge's cost is at most 2 * limit and is recorded beyond the limit, up to
// 2 * limit hits in the window, as one member).
// Returns {allowed, remaining, reset_us, retry_us}.
inline constexpr char kSlidingWindowLogBody[] = R"lua(
local key, limit, D, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local charge, reserve = flags_of(ARGV[5])
local function parse(m)
  local at = string.find(m, ':', 3, true)
  return tonumber(string.sub(m, 2, at - 1)), tonumber(string.sub(m, at + 1))
end
-- {} when there is no key, else {newest request, its time, '~', latest time seen}
local tail = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
local t, last, e, newest = now, nil, 0, nil
if #tail == 4 then
  last, newest = tonumber(tail[4]), tonumber(tail[2])
  if last > t then t = last end  -- never evaluate before the latest time seen
  local s, c = parse(tail[1])
  e = s + c
end
local behind = t - now
local count, s0, c0, t0 = 0, 0, 0, 0
if newest ~= nil and newest > t - D then
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if tonumber(head[2]) <= t - D then  -- the window is (t - D, t]
    redis.call('ZREMRANGEBYSCORE', key, '-inf', t - D)
    head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  end
  s0, c0 = parse(head[1])
  t0 = tonumber(head[2])
  count = e - s0
elseif newest ~= nil then
  redis.call('DEL', key)  -- every hit has left: the same as no key
  last, e, newest = nil, 0, nil
end
if count + cost + reserve <= limit then
  if cost > 0 then
    local s = string.format('%d', e)
    redis.call('ZADD', key, t, string.char(96 + #s) .. s .. ':' .. cost, t, '~')
    count, newest = count + cost, t
    redis.call('PEXPIRE', key, cdiv(behind + D, 1000))
  elseif count > 0 and t > last then
    redis.call('ZADD', key, t, '~')
  end
  return {1, limit - count, count > 0 and newest + D - now or 0, 0}
end
if charge then
  local add = math.min(cost, 2 * limit - count)
  if add > 0 then
    local s = string.format('%d', e)
    redis.call('ZADD', key, t, string.char(96 + #s) .. s .. ':' .. add, t, '~')
    if count == 0 then s0, c0, t0 = e, add, t end  -- the window was empty: it is also the oldest
    count, newest, e, last = count + add, t, e + add, t
    redis.call('PEXPIRE', key, cdiv(behind + D, 1000))
  end
  cost = math.min(cost, limit)
end
if cost + reserve > limit then
  -- Refused for a reserve that never fits beside the cost: the caller answers retry never.
  -- The window may be empty (no newest request); the latest time seen is still recorded.
  if last ~= nil and t > last then redis.call('ZADD', key, t, '~') end
  return {0, math.max(0, limit - count), count > 0 and newest + D - now or 0, 0}
end
-- The oldest k = count + cost + reserve - limit hits must leave first (1 <= k <= count): find
-- the request holding hit number s0 + k, the last one (by rank) whose s is below that.
local want = s0 + count + cost + reserve - limit
local at, t_at = 0, t0
if s0 + c0 < want then
  -- Each request holds at least one hit, so it is within ranks 1 .. k - 1.
  local hi = want - s0 - 1
  at, t_at = 1, nil
  while at < hi do
    local mid = math.floor((at + hi + 1) / 2)
    local m = redis.call('ZRANGE', key, mid, mid, 'WITHSCORES')
    if m[1] ~= nil and m[1] ~= '~' and parse(m[1]) < want then
      at, t_at = mid, tonumber(m[2])
    else
      hi = mid - 1
    end
  end
  if t_at == nil then t_at = tonumber(redis.call('ZRANGE', key, at, at, 'WITHSCORES')[2]) end
end
if t > last then redis.call('ZADD', key, t, '~') end
-- The newest request and so the reset stay put: the TTL set when it was recorded still holds.
return {0, math.max(0, limit - count), newest + D - now, behind + t_at + D - t}
)lua";
inline const LuaScript kSlidingWindowLogScript{std::string(kLuaPrelude) + kSlidingWindowLogBody};

// The script's spec arguments, between now and cost: {limit, window_us}.
inline Result<std::vector<std::string>> SlidingWindowLogParams(const LimitSpec& spec) {
  auto valid = ValidateLimitSpec(spec);
  if (!valid) return std::unexpected(valid.error());
  if (spec.algorithm != Algorithm::kSlidingWindowLog) {
    return MakeError("the sliding window log script cannot run " +
                     std::string(AlgorithmName(spec.algorithm)));
  }
  constexpr int64_t kNanosPerMicro = 1000;
  if (spec.period.count() % kNanosPerMicro != 0) {
    return MakeError("the redis store counts in microseconds: period must be a whole number of us");
  }
  const int64_t window_us = spec.period.count() / kNanosPerMicro;
  // Lua numbers are doubles: integers stay exact below 2^53.
  if (static_cast<__int128>(spec.limit) * window_us >= (int64_t{1} << 53)) {
    return MakeError("sliding_window_log " + DescribeLimitSpec(spec) +
                     " is outside the redis store's exact range (Lua integers below 2^53)");
  }
  return std::vector<std::string>{std::to_string(spec.limit), std::to_string(window_us)};
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_LOG_H_
