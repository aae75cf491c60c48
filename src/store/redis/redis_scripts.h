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
// sends a charge's cost clamped to twice the capacity (no key holds more). A decision's reserve
// (LimitCheck::reserve, priority shedding) is the rest: flags = charge + 2 x quota + 4 x reserve.
// The decision is then the algorithm's own for cost + reserve -- admitted only if that fits, its
// retry when it would -- but an admission takes only the cost. A reserve of 0 leaves the flags,
// and so every call without one, as they were. A reserve that never fits beside the cost (cost +
// reserve above the capacity: the caller sends at most one above) is refused like any other,
// reporting the key's state, but with a meaningless retry (0 where the arithmetic would fail):
// the caller answers retry never.
//
// What a call costs Redis (BENCHMARKS.md, "Exact mode, cheaper") is mostly its commands and
// the script call itself, not its arithmetic, so every script here reads its key once (GET),
// writes it at most once (SET with the TTL in the same command, KEEPTTL where the TTL already
// set still holds), and writes nothing when nothing it stores changed: a refusal leaves the
// state as it was (refill, leak and window arithmetic give the same result from the stored
// state later), and so does a cost-0 check. State is a string of packed little-endian doubles
// (Redis's Lua `struct` library: one C call to read or write it, where a hash cost HMGET, HSET
// and PEXPIRE). Keys written by earlier versions (hashes) are read as they are and replaced by
// the packed string at their next write (docs/redis.md, "Keys").
//
// Shared by the scripts below. Lua numbers are doubles: every quantity is an integer below 2^53
// (the Redis store sends these scripts only specs for which that holds; the others go to
// redis_script_wide.h), so floor(a / b) and ceil(a / b) are exact for
// the integer b >= 1 the scripts divide by: a/b = q + r/b with 0 < r < b is at least 1/b from
// the integers either side, while rounding moves it by at most (a/b) * 2^-53 < 1/b when
// |a| < 2^53, so it never lands on or across one. fdiv/cdiv (the same, as functions) are kept
// for the refund script. Time is microseconds. `x + 0` turns an argument into a number as
// tonumber() does, without the function call.
inline constexpr char kLuaPrelude[] = R"lua(
local floor, ceil = math.floor, math.ceil
local function fdiv(a, b) return floor(a / b) end
local function cdiv(a, b) return ceil(a / b) end
-- A key an earlier sluice wrote as a hash: its fields packed as the scripts store them now, or
-- false when one is missing (no state). Any other type fails HMGET with WRONGTYPE.
local function unhash(key, format, ...)
  local st = redis.call('HMGET', key, ...)
  for i = 1, #st do
    st[i] = tonumber(st[i])
    if st[i] == nil then return false end
  end
  return struct.pack(format, unpack(st))
end
-- A narrow bucket's key holds {a, b} (its state) and the spec it was written under, {cap, n, d,
-- generation}: 48 bytes (docs/quotas.md, "Changing a limit mid-period"). Returns the state, the
-- spec to decide under and, when the key was written under an older spec than this node's
-- (generation, then cap/n/d, differ), that spec as {cap, n, d}: the caller carries the usage
-- over. A key written under a newer generation is decided under the spec it records, so nodes
-- reloading one after another never convert a counter back. A 16-byte key (written before
-- specs were recorded) or a wide one (32 bytes, redis_script_wide.h) is read under this spec.
local function bucket_read(v, cap, n, d, gen)
  if #v ~= 48 then
    local a, b = struct.unpack('<dd', v)
    return a, b, cap, n, d, gen, nil
  end
  local a, b, rcap, rn, rd, rgen = struct.unpack('<dddddd', v)
  if rcap == cap and rn == n and rd == d then return a, b, cap, n, d, math.max(gen, rgen), nil end
  if rgen > gen then return a, b, rcap, rn, rd, rgen, nil end
  return a, b, cap, n, d, gen, {rcap, rn, rd}
end
-- Writes a narrow bucket's key with its spec, replenished ttl_us from now (gone when 0).
local function bucket_write(key, a, b, cap, n, d, gen, ttl_us)
  if ttl_us > 0 then
    redis.call('SET', key, struct.pack('<dddddd', a, b, cap, n, d, gen), 'PX', ceil(ttl_us / 1000))
  else
    redis.call('DEL', key)
  end
end
-- The flags argument (above): whether the call is a charge, and the hits it must leave free.
local function flags_of(f)
  f = (f or 0) + 0
  if f % 2 == 1 then return true, 0 end  -- a charge has no reserve
  return false, floor(f / 4)
end
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
)lua";

// Fixed window. KEYS[1]: packed {window index, hits in it}, expiring when the window ends.
// ARGV: now_us|'', limit, window_us, cost, flags. Returns {allowed, remaining, reset_us,
// retry_us}.
inline constexpr char kFixedWindowBody[] = R"lua(
local limit, D, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local charge, reserve = flags_of(ARGV[5])
local w = floor(now / D)
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 'w', 'c') end
local sw, count, kept = w, 0, false
if v then
  sw, count = struct.unpack('<dd', v)
  -- The key's TTL ends with its window: a later write in that window keeps it.
  kept = true
  if w > sw then sw, count, kept = w, 0, false end
end
local until_next = (sw + 1) * D - now
local before = count
local allowed = count + cost + reserve <= limit
-- A surplus (a negative count) never lets in a reserve that does not fit the limit itself.
if reserve > 0 and cost + reserve > limit then allowed = false end
if allowed then
  count = count + cost
elseif charge then
  count = math.max(count, math.min(count + cost, 2 * limit))
end
if count > before then
  if kept then
    redis.call('SET', KEYS[1], struct.pack('<dd', sw, count), 'KEEPTTL')
  else
    -- A relative TTL: right under Redis's clock and under a passed-in test clock alike.
    redis.call('SET', KEYS[1], struct.pack('<dd', sw, count), 'PX', ceil(until_next / 1000))
  end
end
-- A surplus (a negative count: an admin credit beyond the limit) also ends with the window.
if allowed then return {1, limit - count, count ~= 0 and until_next or 0, 0} end
return {0, math.max(0, limit - count), count ~= 0 and until_next or 0, until_next}
)lua";
inline const LuaScript kFixedWindowScript{std::string(kLuaPrelude) + kFixedWindowBody};

// Calendar window (docs/quotas.md, "Calendar periods"): a fixed window whose windows sluiced
// works out from the zone's rules. KEYS[1]: packed {window start, window end, hits in it (us),
// zone id}, expiring at the window's end. ARGV: now_us|'', limit, b0, b1, b2, b3, zone, cost,
// flags: b1..b2 is the window that holds the sending node's now in the request's zone, b0..b1
// the one before and b2..b3 the one after it (us); zone is that zone's CalendarZoneId (below
// 2^52: exact as a number), which a window opened here records. The script decides in the one that
// holds its own now (Redis's TIME under the server clock), so a node whose clock is off by less
// than a window, either way, opens no wrong window. A recorded window applies until its recorded
// end; only then is another opened. A key of another shape (a plain fixed window's, before a reload
// made the rule a calendar one) reads as no state; a key of three fields (before zones were
// recorded) has no zone (0). Returns {allowed, remaining, reset_us, retry_us, 0, mismatch}:
// mismatch 1 when the open window was opened in another zone than the request's (it decided:
// docs/quotas.md, "A zone per customer").
inline constexpr char kCalendarWindowBody[] = R"lua(
local limit, b0, b1, b2, b3 = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
local zone, cost = ARGV[7] + 0, ARGV[8] + 0
local charge, reserve = flags_of(ARGV[9])
local ws, we, wz = b1, b2, zone
if now >= b2 then ws, we = b2, b3 elseif now < b1 then ws, we = b0, b1 end
local v = redis.pcall('GET', KEYS[1])
local count, kept = 0, false
if type(v) == 'string' and (#v == 24 or #v == 32) then
  local rs, re, c, rz = 0, 0, 0, 0
  if #v == 32 then rs, re, c, rz = struct.unpack('<dddd', v) else rs, re, c = struct.unpack('<ddd', v) end
  if now < re then ws, we, count, kept, wz = rs, re, c, true, rz end
end
local mismatch = (kept and wz ~= 0 and wz ~= zone) and 1 or 0
-- Below 1 us only when this node's clock is more than a window off Redis's.
local until_next = math.max(we - now, 1)
local before = count
local allowed = count + cost + reserve <= limit
if reserve > 0 and cost + reserve > limit then allowed = false end
if allowed then
  count = count + cost
elseif charge then
  count = math.max(count, math.min(count + cost, 2 * limit))
end
if count > before then
  if kept then
    redis.call('SET', KEYS[1], struct.pack('<dddd', ws, we, count, wz), 'KEEPTTL')
  else
    redis.call('SET', KEYS[1], struct.pack('<dddd', ws, we, count, wz), 'PX',
      ceil(until_next / 1000))
  end
end
-- A surplus (a negative count: an admin credit beyond the limit) also ends with the window.
if allowed then return {1, limit - count, count ~= 0 and until_next or 0, 0, 0, mismatch} end
return {0, math.max(0, limit - count), count ~= 0 and until_next or 0, until_next, 0, mismatch}
)lua";
inline const LuaScript kCalendarWindowScript{std::string(kLuaPrelude) + kCalendarWindowBody};

// Token bucket. KEYS[1]: packed {tokens * d, last refill (us)} and its spec (bucket_read),
// expiring when full again. ARGV: now_us|'', capacity*d, n, d, generation, cost, flags. Returns
// {allowed, remaining, reset_us, retry_us}.
inline constexpr char kTokenBucketBody[] = R"lua(
local cap, n, d, gen, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
local charge, reserve = flags_of(ARGV[7])
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 's', 'l') end
local s, last = cap, now
if v then
  local from
  s, last, cap, n, d, gen, from = bucket_read(v, cap, n, d, gen)
  -- A wide key's (redis_script_wide.h) first fields, read after a change of rate: clamped.
  if #v == 32 then s = math.max(-cap, math.min(cap, s)) end
  if from then
    -- The hits used under the old spec as of now (capacity - tokens, refilled at its rate,
    -- rounded up), at most two new capacities: the new bucket is full less that.
    local rcap, rn, rd = from[1], from[2], from[3]
    if now > last then
      local e = now - last
      if e >= 2 * rcap or (e >= rcap and s >= 0) then s = rcap else s = math.min(rcap, s + e * rn) end
    end
    local used = math.min(ceil((rcap - s) / rd), 2 * cap / d)
    s, last = cap - used * d, now
    bucket_write(KEYS[1], s, last, cap, n, d, gen, ceil((cap - s) / n))
  end
end
if now > last then
  local e = now - last
  -- In debt (s < 0, after a charge) the bucket takes up to twice its fill time to fill.
  if e >= 2 * cap or (e >= cap and s >= 0) then s = cap else s = math.min(cap, s + e * n) end
  last = now
end
local behind = last - now
local need, hold = cost * d, reserve * d
local allowed, retry, taken = 0, 0, need
if s >= need + hold then
  s = s - need
  allowed = 1
else
  if charge then
    s = math.max(-cap, s - need)
    need = math.min(need, cap)
  else
    taken = 0
  end
  retry = behind + ceil((need + hold - s) / n)
end
local reset = behind + ceil((cap - s) / n)
if taken > 0 then bucket_write(KEYS[1], s, last, cap, n, d, gen, reset) end
return {allowed, math.max(0, floor(s / d)), reset, retry}
)lua";
inline const LuaScript kTokenBucketScript{std::string(kLuaPrelude) + kTokenBucketBody};

// GCRA. KEYS[1]: packed {theoretical arrival time (us), its fraction in 1/n us} and its spec
// (bucket_read). ARGV: now_us|'', capacity*d, n, d, generation, cost, flags. Returns {allowed,
// remaining, reset_us, retry_us}.
inline constexpr char kGcraBody[] = R"lua(
local cap, n, d, gen, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
local charge, reserve = flags_of(ARGV[7])
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 't', 'f') end
local tat, frac = now, 0
if v then
  local from
  tat, frac, cap, n, d, gen, from = bucket_read(v, cap, n, d, gen)
  if from then
    -- The backlog under the old spec in hits (rounded up, at most two capacities of either
    -- spec), as the backlog of the new one.
    local rcap, rn, rd = from[1], from[2], from[3]
    local ahead, backlog = tat - now, 0
    if ahead > 2 * rcap then backlog = 2 * rcap
    elseif ahead > 0 then backlog = math.min(2 * rcap, ahead * rn + frac)
    elseif ahead == 0 then backlog = frac end
    local after = math.min(ceil(backlog / rd), 2 * cap / d) * d
    local whole = floor(after / n)
    tat, frac = now + whole, after - whole * n
    bucket_write(KEYS[1], tat, frac, cap, n, d, gen, ceil(after / n))
  end
end
local ahead = tat - now
local backlog = 0
-- A backlog is at most 2 * cap (one capacity of debt); beyond that the clock stepped back.
if ahead > 2 * cap then backlog = 2 * cap + 1
elseif ahead > 0 then backlog = ahead * n + frac
elseif ahead == 0 then backlog = frac end
local need, hold = cost * d, reserve * d
if backlog + need + hold <= cap then
  local after = backlog + need
  local whole = floor(after / n)
  local reset = ceil(after / n)
  if need > 0 then bucket_write(KEYS[1], now + whole, after - whole * n, cap, n, d, gen, reset) end
  return {1, floor((cap - after) / d), reset, 0}
end
if charge then
  local after = math.min(backlog + need, 2 * cap)
  if after > backlog then
    local whole = floor(after / n)
    bucket_write(KEYS[1], now + whole, after - whole * n, cap, n, d, gen, ceil(after / n))
    backlog = after
  end
  need = math.min(need, cap)
end
local remaining = 0
if backlog < cap then remaining = floor((cap - backlog) / d) end
return {0, remaining, ceil(backlog / n), ceil((backlog + need + hold - cap) / n)}
)lua";
inline const LuaScript kGcraScript{std::string(kLuaPrelude) + kGcraBody};

// Leaky bucket. KEYS[1]: packed {queued hits * d, last leak (us)} and its spec (bucket_read),
// expiring when empty again. ARGV: now_us|'', capacity*d, n, d, shaper 0|1, max_delay_us (-1:
// none), generation, cost, flags. Returns {allowed, remaining, reset_us, retry_us, delay_us}.
inline constexpr char kLeakyBucketBody[] = R"lua(
local cap, n, d = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local shaper, max_wait, gen = ARGV[5] == '1', ARGV[6] + 0, ARGV[7] + 0
local cost, charge, reserve = ARGV[8] + 0, flags_of(ARGV[9])
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 's', 'l') end
local level, last = 0, now
if v then
  local from
  level, last, cap, n, d, gen, from = bucket_read(v, cap, n, d, gen)
  if #v == 32 then level = math.max(0, math.min(2 * cap, level)) end
  if from then
    -- The hits queued under the old spec as of now (drained at its rate, rounded up), at most
    -- two new capacities.
    local rcap, rn, rd = from[1], from[2], from[3]
    if now > last then
      local e = now - last
      if e >= 2 * rcap or (e >= rcap and level <= rcap) then
        level = 0
      else
        level = math.max(0, level - e * rn)
      end
    end
    level, last = math.min(ceil(level / rd), 2 * cap / d) * d, now
    bucket_write(KEYS[1], level, last, cap, n, d, gen, ceil(level / n))
  end
end
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
local need, hold = cost * d, reserve * d
local allowed, retry, delay, before = 0, 0, 0, level
local bounded = shaper and max_wait >= 0
if level + need + hold <= cap and not (bounded and behind + ceil(level / n) > max_wait) then
  if shaper then delay = behind + ceil(level / n) end
  level = level + need
  allowed = 1
else
  if charge then
    level = math.max(level, math.min(level + need, 2 * cap))
    need = math.min(need, cap)
  end
  if level + need + hold > cap then retry = behind + ceil((level + need + hold - cap) / n) end
  if bounded then retry = math.max(retry, behind + ceil(level / n) - max_wait) end
end
local reset = behind + ceil(level / n)
if level > before then bucket_write(KEYS[1], level, last, cap, n, d, gen, reset) end
return {allowed, math.max(0, floor((cap - level) / d)), reset, retry, delay}
)lua";
inline const LuaScript kLeakyBucketScript{std::string(kLuaPrelude) + kLeakyBucketBody};

// Sliding window counter. KEYS[1]: packed {window, current, previous}.
// ARGV: now_us|'', limit, window_us, cost, flags. Returns {allowed, remaining, reset_us,
// retry_us}.
inline constexpr char kSlidingWindowCounterBody[] = R"lua(
local limit, D, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local charge, reserve = flags_of(ARGV[5])
local w = floor(now / D)
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<ddd', 'w', 'c', 'p') end
local sw, cur, prev = w, 0, 0
if v then
  sw, cur, prev = struct.unpack('<ddd', v)
  -- Counts kept over a lowering of the limit: at most two capacities, as the memory store keeps
  -- (src/core/carry_over.h; otherwise a no-op: a charge never passes 2 x limit).
  cur, prev = math.min(cur, 2 * limit), math.min(prev, 2 * limit)
end
-- With hits in its current window the key expires a window after that one ends: a later write
-- in the same window keeps the TTL.
local kept = cur > 0
if w > sw then
  if w == sw + 1 then prev = cur else prev = 0 end
  cur, sw, kept = 0, w, false
end
local offset = math.max(0, now - sw * D)
local full = limit * D
local estimate = cur * D + prev * (D - offset)
local allowed, retry, before = 0, 0, cur
if estimate + (cost + reserve) * D <= full then
  cur = cur + cost
  estimate = estimate + cost * D
  allowed = 1
else
  if charge then
    -- As the memory store, whose counts are 32-bit: at most 2^32 - 1 hits.
    cur = math.max(cur, math.min(cur + cost, 2 * limit, 4294967295))
    estimate = estimate + (cur - before) * D
    cost = math.min(cost, limit)
  end
  -- When cost + reserve would fit: never beyond the limit (and it would divide by 0).
  local want = cost + reserve
  local room = limit - want - cur
  if want > limit then
    retry = 0
  elseif room >= 0 then
    retry = (D - floor((room * D) / prev)) - offset
  else
    retry = (D - offset) + (D - floor(((limit - want) * D) / cur))
  end
end
local window_end = sw * D + D
local reset = 0
if cur > 0 then reset = window_end + D - now elseif prev > 0 then reset = window_end - now end
if cur > before then
  if kept then
    redis.call('SET', KEYS[1], struct.pack('<ddd', sw, cur, prev), 'KEEPTTL')
  else
    redis.call('SET', KEYS[1], struct.pack('<ddd', sw, cur, prev), 'PX', ceil(reset / 1000))
  end
end
return {allowed, math.max(0, floor((full - estimate) / D)), reset, retry}
)lua";
inline const LuaScript kSlidingWindowCounterScript{std::string(kLuaPrelude) +
                                                   kSlidingWindowCounterBody};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPTS_H_
