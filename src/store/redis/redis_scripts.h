// The Lua scripts the Redis store runs (this slice: all but the sliding window log). Each is a
// whole read-decide-write, executed atomically by Redis: no other command runs between its read and
// its write, so two sluice nodes can never both read "99 < 100" and both admit. Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPTS_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPTS_H_

#include <string>

#include "store/redis/redis_client.h"

namespace sluice::internal {

// Every script takes a last argument, flags: bit 1 set for a charge (Limiter::Charge: a cost that
// does not fit is taken anyway, into debt of at most one capacity, and the answer is computed for
// min(cost, capacity) on the state after it), clear for a decision; bit 2 marks a quota check
// (LimitCheck::quota), which only the multi-limit script reads. Without it: a decision. The caller
// sends a charge's cost clamped to twice the capacity (no key holds more).
//
// Shared by the scripts below. Lua numbers are doubles: every quantity is an integer below 2^53
// (the Redis store validates its specs for that), and division goes through fdiv/cdiv, which
// correct the rounding of a/b so results are the exact floor/ceiling. Time is microseconds.
inline constexpr char kLuaPrelude[] = R"lua(
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function cdiv(a, b) return -fdiv(-a, b) end
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
)lua";

// Fixed window. KEYS[1]: hash {w: window index, c: hits in it}.
// ARGV: now_us|'', limit, window_us, cost, charge. Returns {allowed, remaining, reset_us,
// retry_us}.
inline constexpr char kFixedWindowBody[] = R"lua(
local limit, D, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local charge = (tonumber(ARGV[5]) or 0) % 2 == 1
local w = fdiv(now, D)
local st = redis.call('HMGET', KEYS[1], 'w', 'c')
local sw, count = tonumber(st[1]), tonumber(st[2]) or 0
if sw == nil or w > sw then sw, count = w, 0 end
local until_next = (sw + 1) * D - now
local allowed = count + cost <= limit
if allowed then
  count = count + cost
elseif charge then
  count = math.max(count, math.min(count + cost, 2 * limit))
end
if (allowed or charge) and count > 0 then
  redis.call('HSET', KEYS[1], 'w', sw, 'c', count)
  -- A relative TTL: right under Redis's clock and under a passed-in test clock alike.
  redis.call('PEXPIRE', KEYS[1], cdiv(until_next, 1000))
end
if allowed then return {1, limit - count, count > 0 and until_next or 0, 0} end
return {0, math.max(0, limit - count), count > 0 and until_next or 0, until_next}
)lua";
inline const LuaScript kFixedWindowScript{std::string(kLuaPrelude) + kFixedWindowBody};

// Token bucket. KEYS[1]: hash {s: tokens * d, l: last refill (us)}.
// ARGV: now_us|'', capacity*d, n, d, cost, charge. Returns {allowed, remaining, reset_us,
// retry_us}.
inline constexpr char kTokenBucketBody[] = R"lua(
local cap, n, d, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local charge = (tonumber(ARGV[6]) or 0) % 2 == 1
local st = redis.call('HMGET', KEYS[1], 's', 'l')
local s, last = tonumber(st[1]), tonumber(st[2])
if s == nil then s, last = cap, now end
if now > last then
  local e = now - last
  -- In debt (s < 0, after a charge) the bucket takes up to twice its fill time to fill.
  if e >= 2 * cap or (e >= cap and s >= 0) then s = cap else s = math.min(cap, s + e * n) end
  last = now
end
local behind = last - now
local need = cost * d
local allowed, retry = 0, 0
if s >= need then
  s = s - need
  allowed = 1
else
  if charge then
    s = math.max(-cap, s - need)
    need = math.min(need, cap)
  end
  retry = behind + cdiv(need - s, n)
end
local reset = behind + cdiv(cap - s, n)
if reset > 0 then
  redis.call('HSET', KEYS[1], 's', s, 'l', last)
  redis.call('PEXPIRE', KEYS[1], cdiv(reset, 1000))
else
  redis.call('DEL', KEYS[1])  -- full again: the same as no state
end
return {allowed, math.max(0, fdiv(s, d)), reset, retry}
)lua";
inline const LuaScript kTokenBucketScript{std::string(kLuaPrelude) + kTokenBucketBody};

// GCRA. KEYS[1]: hash {t: theoretical arrival time (us), f: its fraction in 1/n us}.
// ARGV: now_us|'', capacity*d, n, d, cost, charge. Returns {allowed, remaining, reset_us,
// retry_us}.
inline constexpr char kGcraBody[] = R"lua(
local cap, n, d, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local charge = (tonumber(ARGV[6]) or 0) % 2 == 1
local st = redis.call('HMGET', KEYS[1], 't', 'f')
local tat, frac = tonumber(st[1]) or now, tonumber(st[2]) or 0
local ahead = tat - now
local backlog = 0
-- A backlog is at most 2 * cap (one capacity of debt); beyond that the clock stepped back.
if ahead > 2 * cap then backlog = 2 * cap + 1
elseif ahead > 0 then backlog = ahead * n + frac
elseif ahead == 0 then backlog = frac end
local need = cost * d
if backlog + need <= cap then
  local after = backlog + need
  local whole = fdiv(after, n)
  local reset = cdiv(after, n)
  if reset > 0 then
    redis.call('HSET', KEYS[1], 't', now + whole, 'f', after - whole * n)
    redis.call('PEXPIRE', KEYS[1], cdiv(reset, 1000))
  end
  return {1, fdiv(cap - after, d), reset, 0}
end
if charge then
  local after = math.min(backlog + need, 2 * cap)
  if after > backlog then
    local whole = fdiv(after, n)
    redis.call('HSET', KEYS[1], 't', now + whole, 'f', after - whole * n)
    redis.call('PEXPIRE', KEYS[1], cdiv(cdiv(after, n), 1000))
    backlog = after
  end
  need = math.min(need, cap)
end
local remaining = 0
if backlog < cap then remaining = fdiv(cap - backlog, d) end
return {0, remaining, cdiv(backlog, n), cdiv(backlog + need - cap, n)}
)lua";
inline const LuaScript kGcraScript{std::string(kLuaPrelude) + kGcraBody};

// Leaky bucket. KEYS[1]: hash {s: queued hits * d, l: last leak (us)}.
// ARGV: now_us|'', capacity*d, n, d, shaper 0|1, cost, charge.
// Returns {allowed, remaining, reset_us, retry_us, delay_us}.
inline constexpr char kLeakyBucketBody[] = R"lua(
local cap, n, d = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local shaper, cost, charge = ARGV[5] == '1', tonumber(ARGV[6]), (tonumber(ARGV[7]) or 0) % 2 == 1
local st = redis.call('HMGET', KEYS[1], 's', 'l')
local level, last = tonumber(st[1]) or 0, tonumber(st[2]) or now
if now > last then
  local e = now - last
  -- Over its capacity (after a charge) the bucket takes up to twice its drain time to empty.
  if e >= 2 * cap or (e >= cap and level <= cap) then
    level = 0
  else
    level = math.max(0, level - e * n)
  end
  last = now
end
local behind = last - now
local need = cost * d
local allowed, retry, delay = 0, 0, 0
if level + need <= cap then
  if shaper then delay = behind + cdiv(level, n) end
  level = level + need
  allowed = 1
else
  if charge then
    level = math.max(level, math.min(level + need, 2 * cap))
    need = math.min(need, cap)
  end
  retry = behind + cdiv(level + need - cap, n)
end
local reset = behind + cdiv(level, n)
if reset > 0 then
  redis.call('HSET', KEYS[1], 's', level, 'l', last)
  redis.call('PEXPIRE', KEYS[1], cdiv(reset, 1000))
else
  redis.call('DEL', KEYS[1])
end
return {allowed, math.max(0, fdiv(cap - level, d)), reset, retry, delay}
)lua";
inline const LuaScript kLeakyBucketScript{std::string(kLuaPrelude) + kLeakyBucketBody};

// Sliding window counter. KEYS[1]: hash {w: window, c: current, p: previous}.
// ARGV: now_us|'', limit, window_us, cost, charge. Returns {allowed, remaining, reset_us,
// retry_us}.
inline constexpr char kSlidingWindowCounterBody[] = R"lua(
local limit, D, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local charge = (tonumber(ARGV[5]) or 0) % 2 == 1
local w = fdiv(now, D)
local st = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local sw, cur, prev = tonumber(st[1]), tonumber(st[2]) or 0, tonumber(st[3]) or 0
if sw == nil then sw = w end
if w > sw then
  if w == sw + 1 then prev = cur else prev = 0 end
  cur = 0
  sw = w
end
local offset = math.max(0, now - sw * D)
local full = limit * D
local estimate = cur * D + prev * (D - offset)
local allowed, retry = 0, 0
if estimate + cost * D <= full then
  cur = cur + cost
  estimate = estimate + cost * D
  allowed = 1
else
  if charge then
    -- As the memory store, whose counts are 32-bit: at most 2^32 - 1 hits.
    local before = cur
    cur = math.max(cur, math.min(cur + cost, 2 * limit, 4294967295))
    estimate = estimate + (cur - before) * D
    cost = math.min(cost, limit)
  end
  local room = limit - cost - cur
  if room >= 0 then
    retry = (D - fdiv(room * D, prev)) - offset
  else
    retry = (D - offset) + (D - fdiv((limit - cost) * D, cur))
  end
end
local window_end = sw * D + D
local reset = 0
if cur > 0 then reset = window_end + D - now elseif prev > 0 then reset = window_end - now end
if reset > 0 then
  redis.call('HSET', KEYS[1], 'w', sw, 'c', cur, 'p', prev)
  redis.call('PEXPIRE', KEYS[1], cdiv(reset, 1000))
else
  redis.call('DEL', KEYS[1])
end
return {allowed, math.max(0, fdiv(full - estimate, D)), reset, retry}
)lua";
inline const LuaScript kSlidingWindowCounterScript{std::string(kLuaPrelude) +
                                                   kSlidingWindowCounterBody};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPTS_H_
