// The admin adjustment of one counter in Redis (Limiter::Adjust): read, change and read again in
// one script, so that no decision of any node runs between. The same meaning as the memory
// store's (store/memory/adjust_state.h; docs/quotas.md, "Credits, debits and the audit log").
// Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_ADJUST_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_ADJUST_H_

#include <string>

#include "store/redis/redis_client.h"
#include "store/redis/redis_script_multi.h"

namespace sluice::internal {

// KEYS[1]: the counter. ARGV: now_us|'', the limiter's script id (redis_script_multi.h),
// allow_over_limit 0|1, fresh 0|1, debit, credit (AdjustSteps; each at most twice the capacity),
// then the limiter's spec arguments (between now and cost in its script). Returns {before,
// after}: the algorithm's own answer to a cost-0 decision, before and after.
//
// The debit is the algorithm's own charge. The credit: the fixed window subtracts from the
// current window's count, down to 0, or to -limit with allow_over_limit (a surplus, spent first
// and gone with the window: the key's TTL is set to the window's end), and so does a calendar
// window in its recorded window; the sliding window
// counter from the current window's count, then the previous one's; the log drops its newest
// hits; the buckets take it as a give-back (kRefundBody) of that many units at `now`.
inline const LuaScript kAdjustScript{std::string(kLuaPrelude) + kLuaBodies +
                                     "local function refund(KEYS, ARGV)\n" + kRefundBody + "end\n" +
                                     R"lua(
local key, alg = KEYS[1], ARGV[2] + 0
local over, fresh = ARGV[3] == '1', ARGV[4] == '1'
local debit, credit = ARGV[5] + 0, ARGV[6] + 0
local params = {}
for i = 7, #ARGV do params[#params + 1] = ARGV[i] end
local function args(cost, flags)
  local a = {ARGV[1]}
  for i = 1, #params do a[#a + 1] = params[i] end
  a[#a + 1] = cost
  a[#a + 1] = flags
  return a
end
local function read(format, ...)
  local v = redis.pcall('GET', key)
  if v and v.err then v = unhash(key, format, ...) end
  if not v then return nil end
  return struct.unpack(format, v)
end
local before = bodies[alg]({key}, args(0, 0))
if fresh then redis.call('DEL', key) end
if debit > 0 then bodies[alg]({key}, args(debit, 1)) end
if credit > 0 then
  if alg == 1 then
    local limit, D = params[1] + 0, params[2] + 0
    local w = floor(now / D)
    local sw, c = read('<dd', 'w', 'c')
    if sw == nil or w > sw then sw, c = w, 0 end
    -- A plain credit never adds to a surplus (a negative count), nor takes one away.
    c = math.max(over and -limit or math.min(0, c), c - credit)
    if c == 0 then
      redis.call('DEL', key)
    else
      redis.call('SET', key, struct.pack('<dd', sw, c), 'PX', ceil(((sw + 1) * D - now) / 1000))
    end
  elseif alg == 11 then
    -- A calendar window (kCalendarWindowBody): the window the decision above recorded or
    -- picked, by the bounds sluiced sent, as a fixed window's credit in it.
    local limit, b0, b1, b2, b3 = params[1] + 0, params[2] + 0, params[3] + 0, params[4] + 0,
      params[5] + 0
    local ws, we, wz = b1, b2, params[6] + 0
    if now >= b2 then ws, we = b2, b3 elseif now < b1 then ws, we = b0, b1 end
    local c = 0
    local v = redis.pcall('GET', key)
    if type(v) == 'string' and (#v == 24 or #v == 32) then
      local rs, re, rc, rz = 0, 0, 0, 0
      if #v == 32 then rs, re, rc, rz = struct.unpack('<dddd', v)
      else rs, re, rc = struct.unpack('<ddd', v) end
      if now < re then ws, we, c, wz = rs, re, rc, rz end
    end
    c = math.max(over and -limit or math.min(0, c), c - credit)
    if c == 0 then
      redis.call('DEL', key)
    else
      redis.call('SET', key, struct.pack('<dddd', ws, we, c, wz), 'PX',
        ceil(math.max(we - now, 1) / 1000))
    end
  elseif alg == 5 or alg == 10 then
    local D = params[2] + 0
    local w = floor(now / D)
    local sw, cur, prev = read('<ddd', 'w', 'c', 'p')
    if sw ~= nil then
      if w > sw then
        if w == sw + 1 then prev = cur else prev = 0 end
        cur, sw = 0, w
      end
      local taken = math.min(credit, cur)
      cur = cur - taken
      prev = math.max(0, prev - (credit - taken))
      -- Only less is counted: the TTL set for more still covers it.
      if cur == 0 and prev == 0 then
        redis.call('DEL', key)
      else
        redis.call('SET', key, struct.pack('<ddd', sw, cur, prev), 'KEEPTTL')
      end
    end
  elseif alg == 6 then
    local left = credit
    while left > 0 do
      -- The newest request (the last member is '~', the latest time seen).
      local tail = redis.call('ZRANGE', key, -2, -2, 'WITHSCORES')
      if #tail < 2 or tail[1] == '~' then break end
      local m = tail[1]
      local colon = string.find(m, ':', 3, true)
      local c = tonumber(string.sub(m, colon + 1))
      redis.call('ZREM', key, m)
      if c > left then
        -- Its first hits stay, under the same number: the next request's number follows them.
        redis.call('ZADD', key, tail[2], string.sub(m, 1, colon) .. (c - left))
        left = 0
      else
        left = left - c
      end
    end
    if redis.call('ZCARD', key) <= 1 then redis.call('DEL', key) end
  else
    local a = {ARGV[1], '', alg}
    for i = 1, #params do a[#a + 1] = params[i] end
    a[#a + 1] = credit
    a[#a + 1] = 0
    refund({key}, a)
  end
end
local after = bodies[alg]({key}, args(0, 0))
return {before, after}
)lua"};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_ADJUST_H_
