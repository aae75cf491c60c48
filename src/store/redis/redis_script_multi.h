// Several limits checked for one request. Internal.
//
// kMultiScript decides every check whose key is in one hash slot in one script call, all or
// nothing: it runs each algorithm's own body (the same code as its single-limit script) in
// order, after a DUMP/PTTL snapshot of the key; if any check is over its limit, it RESTOREs the
// snapshots of the admitted ones, newest first. Redis runs a script atomically, so the request's
// quota is either taken from every limit or from none: exactly, not approximately. A check
// refused only for its reserve (LimitCheck::reserve, in its flags) is over its limit like any.
//
// Checks in different slots of a Redis Cluster cannot share a script. They are decided slot by
// slot, and when one slot rejects, the others are given back with kRefundScript: the inverse of
// an admission, applied to whatever state the key has by then. Between the two calls other
// requests may see the quota taken for a moment; the docs state this guarantee.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_MULTI_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_MULTI_H_

#include <string>

#include "sluice/algorithm.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_script_log.h"
#include "store/redis/redis_script_wide.h"
#include "store/redis/redis_scripts.h"

namespace sluice::internal {

// The body index each algorithm has in the scripts below; its wide variant (redis_script_wide.h)
// is kWideScriptId + that index.
inline constexpr int kWideScriptId = 5;
// A calendar window's body (a fixed window whose bounds sluiced sends: kCalendarWindowBody).
inline constexpr int kCalendarScriptId = 11;
constexpr int ScriptAlgorithmId(Algorithm a) {
  switch (a) {
    case Algorithm::kFixedWindow:
      return 1;
    case Algorithm::kTokenBucket:
      return 2;
    case Algorithm::kGcra:
      return 3;
    case Algorithm::kLeakyBucket:
      return 4;
    case Algorithm::kSlidingWindowCounter:
      return 5;
    case Algorithm::kSlidingWindowLog:
      return 6;
  }
  return 0;
}

// Lua for after the prelude: `bodies[id]`, each algorithm's single-limit script as a function of
// (KEYS, ARGV), for the scripts that run several or run one twice.
inline const std::string kLuaBodies =
    std::string(kLuaWidePrelude) + "local bodies = {}\nbodies[1] = function(KEYS, ARGV)\n" +
    kFixedWindowBody + "end\nbodies[2] = function(KEYS, ARGV)\n" + kTokenBucketBody +
    "end\nbodies[3] = function(KEYS, ARGV)\n" + kGcraBody +
    "end\nbodies[4] = function(KEYS, ARGV)\n" + kLeakyBucketBody +
    "end\nbodies[5] = function(KEYS, ARGV)\n" + kSlidingWindowCounterBody +
    "end\nbodies[6] = function(KEYS, ARGV)\n" + kSlidingWindowLogBody +
    "end\nbodies[7] = function(KEYS, ARGV)\n" + kTokenBucketWideBody +
    "end\nbodies[8] = function(KEYS, ARGV)\n" + kGcraWideBody +
    "end\nbodies[9] = function(KEYS, ARGV)\n" + kLeakyBucketWideBody +
    "end\nbodies[10] = function(KEYS, ARGV)\n" + kSlidingWindowCounterWideBody +
    "end\nbodies[11] = function(KEYS, ARGV)\n" + kCalendarWindowBody + "end\n";

// KEYS: one key per check, all in one hash slot (a key may repeat). ARGV: now_us|'', the number
// of quota checks in the whole request (in every slot), then per check: algorithm id, number of
// arguments k, its k script arguments (spec arguments, cost, then flags: see redis_scripts.h).
// The request is refused when a check that is not a quota check is refused, or when every quota
// check of the request is here and refused (RequestRefused in decide_all.h: the caller applies
// the rule across slots). Returns {now_us, {{allowed, remaining, reset_us, retry_us[,
// delay_us]} per check}, rolled_back}. A charge is never rolled back: its cost stays taken.
inline const LuaScript kMultiScript{kLuaPrelude + kLuaBodies + R"lua(
local results, snaps, charged = {}, {}, {}
local quota_total, quota_refused = tonumber(ARGV[2]), 0
local pos, rejected = 3, false
for i = 1, #KEYS do
  local alg, k = tonumber(ARGV[pos]), tonumber(ARGV[pos + 1])
  local args = {ARGV[1]}
  for j = 1, k do args[j + 1] = ARGV[pos + 1 + j] end
  pos = pos + 2 + k
  local flags = tonumber(args[k + 1])
  charged[i] = flags % 2 == 1
  snaps[i] = {redis.call('DUMP', KEYS[i]), redis.call('PTTL', KEYS[i])}
  results[i] = bodies[alg]({KEYS[i]}, args)
  if results[i][1] ~= 1 then
    if floor(flags / 2) % 2 == 1 then quota_refused = quota_refused + 1 else rejected = true end
  end
end
if quota_total > 0 and quota_refused == quota_total then rejected = true end
if rejected then
  for i = #KEYS, 1, -1 do
    if results[i][1] == 1 and not charged[i] then
      local dump, ttl = snaps[i][1], snaps[i][2]
      if dump then
        redis.call('RESTORE', KEYS[i], math.max(ttl, 0), dump, 'REPLACE')
      else
        redis.call('DEL', KEYS[i])
      end
    end
  end
end
return {now, results, rejected and 1 or 0}
)lua"};

// Gives back an admission made at `at` (the now_us the multi script returned). KEYS[1]: the key.
// ARGV: now_us|'', at_us|'' (now), algorithm id, the check's script arguments (spec arguments,
// cost, then charge, which is '0': a charge is never given back). Token bucket, GCRA and leaky
// bucket return the cost to the bucket as of now (never above full); the windows subtract it from
// the window it was counted in, if that window is still kept; the sliding log removes the request's
// entry if it is still the newest (otherwise it stays counted: the log's bookkeeping cannot lose an
// entry in the middle). Returns 1.
//
// A bucket's give-back never shortens its key's TTL (issue 24). The TTL is counted in Redis's
// real time, the state in the requests' time, and the write that set it covered a fuller bucket
// than the one given back to. A TTL cut to what the bucket now lacks -- a millisecond, when a
// fraction of a unit is left -- can run out before the next script about the key that is
// stamped no later: the leased store gives a lease back and then, a round trip later, decides
// the request at the same `now` (docs/redis.md, "Leased"), which then met a fresh key and
// admitted where the pure bucket refuses. A longer TTL is only kept memory: every script
// refills or drains the state it reads to its own `now`, so a key past its time reads as a
// fresh one would.
inline constexpr char kRefundBody[] = R"lua(
local key, alg = KEYS[1], ARGV[3] + 0
-- The wide sliding window counter keeps the narrow one's state.
if alg == 10 then alg = 5 end
local at = ARGV[2] == '' and now or ARGV[2] + 0
local p = {}
for i = 4, #ARGV do p[#p + 1] = ARGV[i] + 0 end
local cost = p[#p - 1]
-- The key's packed state (redis_scripts.h), converted from a hash an earlier version wrote.
local function state(format, ...)
  local v = redis.pcall('GET', key)
  if v and v.err then v = unhash(key, format, ...) end
  if not v then return nil end
  return struct.unpack(format, v)
end
-- Writes the key's state, which is replenished ttl_us after now (gone when that is 0). Its TTL
-- only grows: see the comment above this script.
local function write(packed, ttl_us)
  if ttl_us <= 0 then
    redis.call('DEL', key)
    return
  end
  local ms = cdiv(ttl_us, 1000)
  if redis.call('PTTL', key) >= ms then
    redis.call('SET', key, packed, 'KEEPTTL')
  else
    redis.call('SET', key, packed, 'PX', ms)
  end
end
local function keep(format, a, b, ttl_us) write(struct.pack(format, a, b), ttl_us) end
-- A narrow bucket's state (bucket_read, redis_scripts.h) if the key was written under this
-- spec, or before specs were recorded, and the generation to write it back with; nil when it
-- holds another spec's counter: a give-back across a change of the limit is not made (the
-- quota stays taken, the strict side).
local function bucket_state(cap, n, d, gen, ...)
  local v = redis.pcall('GET', key)
  if v and v.err then v = unhash(key, '<dd', ...) end
  if not v then return nil end
  local a, b, rcap, rn, rd, rgen = struct.unpack('<dd', v)
  if #v == 48 then
    a, b, rcap, rn, rd, rgen = struct.unpack('<dddddd', v)
    if rcap ~= cap or rn ~= n or rd ~= d then return nil end
    gen = math.max(gen, rgen)
  end
  return a, b, gen
end
if alg == 1 or alg == 5 then
  local D = p[2]
  local sw, c, prev
  if alg == 1 then sw, c = state('<dd', 'w', 'c') else sw, c, prev = state('<ddd', 'w', 'c', 'p') end
  if sw == nil then return 1 end
  prev = prev or 0
  local wa = fdiv(at, D)
  -- A fixed window's surplus (a negative count, an admin credit) is kept, as the memory store does.
  if sw == wa then c = math.max(c < 0 and -p[1] or 0, c - cost)
  elseif alg == 5 and sw == wa + 1 then prev = math.max(0, prev - cost)
  else return 1 end
  -- The window's TTL stays as it was.
  if c == 0 and prev == 0 then redis.call('DEL', key)
  elseif alg == 1 then redis.call('SET', key, struct.pack('<dd', sw, c), 'KEEPTTL')
  else redis.call('SET', key, struct.pack('<ddd', sw, c, prev), 'KEEPTTL') end
elseif alg == 11 then
  -- A calendar window: given back if `at` is in the recorded window; its TTL stays.
  local v = redis.pcall('GET', key)
  if type(v) ~= 'string' or (#v ~= 24 and #v ~= 32) then return 1 end
  local ws, we, c, wz = 0, 0, 0, 0
  if #v == 32 then ws, we, c, wz = struct.unpack('<dddd', v) else ws, we, c = struct.unpack('<ddd', v) end
  if at < ws or at >= we then return 1 end
  c = math.max(0, c - cost)
  if c == 0 then redis.call('DEL', key)
  else redis.call('SET', key, struct.pack('<dddd', ws, we, c, wz), 'KEEPTTL') end
elseif alg == 2 or alg == 4 then
  local cap, n, d = p[1], p[2], p[3]
  local s, last, gen = bucket_state(cap, n, d, alg == 2 and p[4] or p[6], 's', 'l')
  if s == nil then return 1 end  -- full (token bucket) or empty (leaky bucket) already
  if now > last then
    local e = now - last
    -- A bucket in debt takes up to twice its fill (drain) time, as in the scripts above.
    if alg == 2 then
      if e >= 2 * cap or (e >= cap and s >= 0) then s = cap else s = math.min(cap, s + e * n) end
    else
      if e >= 2 * cap or (e >= cap and s <= cap) then s = 0 else s = math.max(0, s - e * n) end
    end
    last = now
  end
  local ttl
  if alg == 2 then
    s = math.min(cap, s + cost * d)
    ttl = last - now + cdiv(cap - s, n)
  else
    s = math.max(0, s - cost * d)
    ttl = last - now + cdiv(s, n)
  end
  write(struct.pack('<dddddd', s, last, cap, n, d, gen), ttl)
elseif alg == 3 then
  local cap, n, d = p[1], p[2], p[3]
  local t, f, gen = bucket_state(cap, n, d, p[4], 't', 'f')
  if t == nil then return 1 end
  -- The backlog ahead of now in 1/n us (relative, so it stays exact below 2^53).
  local backlog = (t - now) * n + f - cost * d
  if backlog <= 0 then
    redis.call('DEL', key)
  else
    local whole = fdiv(backlog, n)
    write(struct.pack('<dddddd', now + whole, backlog - whole * n, cap, n, d, gen),
          cdiv(backlog, n))
  end
elseif alg == 7 or alg == 9 then
  -- The wide buckets (redis_script_wide.h): the same give-back in whole units and a fraction.
  local C, n, d = p[1], p[2], p[3]
  local v = redis.pcall('GET', key)
  if v and v.err then v = unhash(key, '<dd', 's', 'l') end
  if not v then return 1 end
  local W, f, last = wide_read(v, d)
  if now > last then
    W, f = wide_move(W, f, now - last, C, n, d, alg == 7 and 1 or -1)
    last = now
  end
  local ttl
  if alg == 7 then
    W = W + cost
    if W >= C then W, f = C, 0 end
    ttl = last - now + cdefw(C - W, d, f, n)
  else
    W = W - cost
    if W < 0 then W, f = 0, 0 end
    ttl = last - now + cdivw(W, d, f, n)
  end
  write(wide_pack(W, f, last, d), ttl)
elseif alg == 8 then
  local C, n, d = p[1], p[2], p[3]
  local t, f = state('<dd', 't', 'f')
  if t == nil then return 1 end
  local ahead = t - now
  -- Beyond two capacities ahead the clock stepped back: the state is left as it is.
  if ahead >= 0 and ahead * n / d >= 2 * C + 2 then return 1 end
  local bq, br = 0, 0
  if ahead >= 0 then bq, br = muldiv(ahead, n, f, d) end
  if bq < cost or (bq == cost and br == 0) then
    redis.call('DEL', key)
  else
    local whole, fr = muldiv(d, bq - cost, br, n)
    keep('<dd', now + whole, fr, whole + (fr > 0 and 1 or 0))
  end
elseif alg == 6 then
  local tail = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
  if #tail == 4 and tonumber(tail[2]) == at then
    local m = tail[1]
    if tonumber(string.sub(m, string.find(m, ':', 3, true) + 1)) == cost then
      redis.call('ZREM', key, m)
      if redis.call('ZCARD', key) <= 1 then redis.call('DEL', key) end
    end
  end
end
return 1
)lua";
inline const LuaScript kRefundScript{std::string(kLuaPrelude) + kLuaWidePrelude + kRefundBody};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_MULTI_H_
