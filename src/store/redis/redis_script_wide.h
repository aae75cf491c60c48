// The scripts for limits whose scaled quantities pass 2^53 (docs/redis.md, "The whole range").
// Internal.
//
// Lua numbers are doubles, exact for integers below 2^53. A token bucket of 2^32-1 per year keeps
// tokens x d up to ~2^77, so the scripts of redis_scripts.h cannot hold it. These keep the state
// as whole units W plus a fraction f in [0, d) (tokens = W + f/d), and do every product that may
// pass 2^53 with muldiv below, in chunks that stay below it. A test like "tokens >= cost" is then
// W >= cost (cost is whole, f/d < 1). The specs redis_scripts.h decides exactly keep its scripts:
// this is only the path for the rest (redis_script_choice.cc), so their cost is unchanged.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_WIDE_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_WIDE_H_

#include <string>

#include "store/redis/redis_client.h"
#include "store/redis/redis_scripts.h"

namespace sluice::internal {

// After kLuaPrelude. muldiv(a, b, c, m): floor((a*b + c) / m) and the remainder, for integers
// a, b, c >= 0 below 2^53, 1 <= m < 2^45, and a quotient below 2^53 (the proof: docs/redis.md).
// Below 2^53 the product is exact and the prelude's floor(x / m) is too. Otherwise a = qa*m + ra,
// and ra*b is long-divided by m over b's base-128 digits, high first: each step's t = rr*128 +
// ra*digit < m*128 + m*128 = m*2^8 < 2^53. `wide_read` reads a bucket's state either way it may
// be stored: 32 bytes {approximate tokens x d, last, W, f} (the first two what a narrow script
// reads) or a narrow 16-byte {tokens x d, last}, split with this spec's d. A string of any other
// length is a script error, never read as a bucket (struct.unpack would read a longer one's
// first fields silently).
inline constexpr char kLuaWidePrelude[] = R"lua(
local function muldiv(a, b, c, m)
  local p = a * b
  if p + c < 9007199254740992 then
    local x = p + c
    local q = floor(x / m)
    return q, x - q * m
  end
  local qa = floor(a / m)
  local ra, qc = a - qa * m, floor(c / m)
  local q, r = qa * b + qc, c - qc * m
  local hi, rr, p2 = 0, 0, 1
  while p2 * 128 <= b do p2 = p2 * 128 end
  while p2 >= 1 do
    local t = rr * 128 + ra * (floor(b / p2) % 128)
    local qt = floor(t / m)
    hi, rr, p2 = hi * 128 + qt, t - qt * m, p2 / 128
  end
  r = r + rr
  if r >= m then return q + hi + 1, r - m end
  return q + hi, r
end
-- ceil((A*d + f) / n) for A >= 0, 0 <= f < d.
local function cdivw(A, d, f, n) return (muldiv(d, A, f + n - 1, n)) end
-- ceil((A*d - f) / n) for A*d >= f, 0 <= f < d: a deficit below A whole units.
local function cdefw(A, d, f, n)
  if f == 0 then return (muldiv(d, A, n - 1, n)) end
  return (muldiv(d, A - 1, d - f + n - 1, n))
end
local function wide_read(v, d)
  if #v == 32 then
    local _, last, W, f = struct.unpack('<dddd', v)
    return W, f, last
  end
  -- 48 bytes: a narrow key with its spec (redis_scripts.h, bucket_read), read as a 16-byte one.
  if #v ~= 16 and #v ~= 48 then error('sluice: not a bucket state') end
  local s, last = struct.unpack('<dd', v)
  local W = floor(s / d)
  return W, s - W * d, last
end
local function wide_pack(W, f, last, d) return struct.pack('<dddd', W * d + f, last, W, f) end
-- A bucket of capacity C after e us at n/d units per us: filled (sign 1) towards C, or drained
-- (sign -1) towards 0. Beyond 2C+2 units (the double estimate errs by far less than 1) it is
-- full or empty whatever it held: it never holds more than 2C or less than -C.
local function wide_move(W, f, e, C, n, d, sign)
  if e * n / d >= 2 * C + 2 then
    if sign > 0 then return C, 0 end
    return 0, 0
  end
  local q, r = muldiv(e, n, 0, d)
  if sign > 0 then
    W, f = W + q, f + r
    if f >= d then W, f = W + 1, f - d end
    if W >= C then return C, 0 end
    return W, f
  end
  W, f = W - q, f - r
  if f < 0 then W, f = W - 1, f + d end
  if W < 0 then return 0, 0 end
  return W, f
end
)lua";

// Token bucket. KEYS[1]: the 32-byte state above, expiring when full again. ARGV: now_us|'',
// capacity, n, d, cost, flags. Returns {allowed, remaining, reset_us, retry_us}.
inline constexpr char kTokenBucketWideBody[] = R"lua(
local C, n, d, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local charge, reserve = flags_of(ARGV[6])
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 's', 'l') end
local W, f, last = C, 0, now
if v then W, f, last = wide_read(v, d) end
if W > C then W, f = C, 0 end
if now > last then
  W, f = wide_move(W, f, now - last, C, n, d, 1)
  last = now
end
local behind = last - now
-- Tokens W + f/d cover the whole need = cost + reserve iff W does (f/d < 1).
local need, allowed, retry, taken = cost + reserve, 0, 0, cost
if W >= need then
  W = W - cost
  allowed = 1
else
  if charge then
    W = W - cost
    if W < -C then W, f = -C, 0 end
    need = math.min(cost, C)
  else
    taken = 0
  end
  retry = behind + cdefw(need - W, d, f, n)
end
local reset = behind + cdefw(C - W, d, f, n)
if taken > 0 then
  redis.call('SET', KEYS[1], wide_pack(W, f, last, d), 'PX', ceil(reset / 1000))
end
return {allowed, math.max(0, W), reset, retry}
)lua";

// GCRA. KEYS[1]: packed {theoretical arrival time (us), its fraction in 1/n us}, as the narrow
// script: both stay below 2^53. The backlog is kept in units: Bq + Br/d. ARGV and reply as the
// token bucket's.
inline constexpr char kGcraWideBody[] = R"lua(
local C, n, d, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local charge, reserve = flags_of(ARGV[6])
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 't', 'f') end
local tat, frac = now, 0
if v then tat, frac = struct.unpack('<dd', v) end
local ahead = tat - now
local Bq, Br = 0, 0
-- Beyond two capacities of backlog the clock stepped back: refused, as the narrow script.
if ahead > 0 and ahead * n / d >= 2 * C + 2 then Bq = 2 * C + 1
elseif ahead >= 0 then Bq, Br = muldiv(ahead, n, frac, d) end
local A, R = Bq + cost, Bq + cost + reserve
if R < C or (R == C and Br == 0) then
  local whole, fr = muldiv(d, A, Br, n)
  local reset = whole + (fr > 0 and 1 or 0)
  if cost > 0 then
    redis.call('SET', KEYS[1], struct.pack('<dd', now + whole, fr), 'PX', ceil(reset / 1000))
  end
  return {1, C - A - (Br > 0 and 1 or 0), reset, 0}
end
local need = cost + reserve
if charge then
  local Ar = Br
  if A > 2 * C or (A == 2 * C and Br > 0) then A, Ar = 2 * C, 0 end
  if A > Bq or (A == Bq and Ar > Br) then
    local whole, fr = muldiv(d, A, Ar, n)
    redis.call('SET', KEYS[1], struct.pack('<dd', now + whole, fr), 'PX',
               ceil((whole + (fr > 0 and 1 or 0)) / 1000))
    Bq, Br = A, Ar
  end
  need = math.min(cost, C)
end
local remaining = 0
if Bq < C then remaining = C - Bq - (Br > 0 and 1 or 0) end
return {0, remaining, cdivw(Bq, d, Br, n), cdivw(Bq + need - C, d, Br, n)}
)lua";

// Leaky bucket. KEYS[1]: the 32-byte state above (queued units), expiring when empty again.
// ARGV: now_us|'', capacity, n, d, shaper 0|1, max_delay_us (-1: none), cost, flags. Returns
// {allowed, remaining, reset_us, retry_us, delay_us}.
inline constexpr char kLeakyBucketWideBody[] = R"lua(
local C, n, d = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local shaper, max_wait = ARGV[5] == '1', ARGV[6] + 0
local cost, charge, reserve = ARGV[7] + 0, flags_of(ARGV[8])
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 's', 'l') end
local W, f, last = 0, 0, now
if v then W, f, last = wide_read(v, d) end
if now > last then
  W, f = wide_move(W, f, now - last, C, n, d, -1)
  last = now
end
local behind = last - now
local need, allowed, retry, delay = cost + reserve, 0, 0, 0
local W0, f0 = W, f
local bounded = shaper and max_wait >= 0
local fits = W + need < C or (W + need == C and f == 0)
if fits and not (bounded and behind + cdivw(W, d, f, n) > max_wait) then
  if shaper then delay = behind + cdivw(W, d, f, n) end
  W = W + cost
  allowed = 1
else
  if charge then
    local A, Ar = W + cost, f
    if A > 2 * C or (A == 2 * C and Ar > 0) then A, Ar = 2 * C, 0 end
    if A > W or (A == W and Ar > f) then W, f = A, Ar end
    need = math.min(cost, C)
  end
  if W + need > C or (W + need == C and f > 0) then
    retry = behind + cdivw(W + need - C, d, f, n)
  end
  if bounded then retry = math.max(retry, behind + cdivw(W, d, f, n) - max_wait) end
end
local reset = behind + cdivw(W, d, f, n)
if W > W0 or (W == W0 and f > f0) then
  redis.call('SET', KEYS[1], wide_pack(W, f, last, d), 'PX', ceil(reset / 1000))
end
return {allowed, math.max(0, C - W - (f > 0 and 1 or 0)), reset, retry, delay}
)lua";

// Sliding window counter. KEYS[1]: packed {window, current, previous}, as the narrow script (the
// counts stay below 2^33); the estimate cur + prev*(D-offset)/D is kept as cur + pq + pr/D.
// ARGV and reply as the narrow script's.
inline constexpr char kSlidingWindowCounterWideBody[] = R"lua(
local limit, D, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local charge, reserve = flags_of(ARGV[5])
local w = floor(now / D)
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<ddd', 'w', 'c', 'p') end
local sw, cur, prev = w, 0, 0
if v then sw, cur, prev = struct.unpack('<ddd', v) end
local kept = cur > 0
if w > sw then
  if w == sw + 1 then prev = cur else prev = 0 end
  cur, sw, kept = 0, w, false
end
local offset = math.max(0, now - sw * D)
local pq, pr = muldiv(D - offset, prev, 0, D)
local allowed, retry, before = 0, 0, cur
local E = cur + pq + cost + reserve
if E < limit or (E == limit and pr == 0) then
  cur = cur + cost
  allowed = 1
else
  if charge then
    cur = math.max(cur, math.min(cur + cost, 2 * limit, 4294967295))
    cost = math.min(cost, limit)
  end
  -- As the narrow script: never beyond the limit (0 here).
  local want = cost + reserve
  local room = limit - want - cur
  if want > limit then
    retry = 0
  elseif room >= 0 then
    retry = (D - muldiv(D, room, 0, prev)) - offset
  else
    retry = (D - offset) + (D - muldiv(D, limit - want, 0, cur))
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
return {allowed, math.max(0, limit - cur - pq - (pr > 0 and 1 or 0)), reset, retry}
)lua";

inline const LuaScript kTokenBucketWideScript{std::string(kLuaPrelude) + kLuaWidePrelude +
                                              kTokenBucketWideBody};
inline const LuaScript kGcraWideScript{std::string(kLuaPrelude) + kLuaWidePrelude + kGcraWideBody};
inline const LuaScript kLeakyBucketWideScript{std::string(kLuaPrelude) + kLuaWidePrelude +
                                              kLeakyBucketWideBody};
inline const LuaScript kSlidingWindowCounterWideScript{std::string(kLuaPrelude) + kLuaWidePrelude +
                                                       kSlidingWindowCounterWideBody};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_WIDE_H_
