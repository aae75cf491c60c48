// The global store's script for regions mode leased (docs/regions.md, "Design"). Internal.
//
// One hash per limit, KEYS[1] = sluice-region:{<limit id>}, fields:
//   d:<region>:<node> = "<units> <until_us>"  a node's demand, units per period
//   g:<region>:<node> = "<units> <until_us>"  the part a node of the region was granted
// Values past their until_us (Redis's clock) are deleted as they are read.
// ARGV: region, node, demand, ttl_us, limit, n, then n pairs (region, share ppm) sorted by name.
// Records the node's demand, computes AllocateRegions (sluice/region_scope.h: the same rules,
// integer-exact for limit * ppm < 2^53) over every listed region -- present if it has a demand
// or a grant not yet expired, else absent and counted at its static part -- and grants the
// asking region min(its allocation, limit - what every other region holds), where a region
// holds the largest grant of its nodes still valid, or its static part when none is. Returns
// {granted units, now_us}.
#ifndef SLUICE_STORE_REGION_REGION_SCRIPT_H_
#define SLUICE_STORE_REGION_REGION_SCRIPT_H_

#include "store/redis/redis_client.h"

namespace sluice::internal {

inline const LuaScript kRegionGrantScript{R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local region, node = ARGV[1], ARGV[2]
local ttl, limit, n = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('HSET', KEYS[1], 'd:' .. region .. ':' .. node, ARGV[3] .. ' ' .. (now + ttl))
local names, ppm, index = {}, {}, {}
for i = 1, n do
  names[i], ppm[i] = ARGV[5 + 2 * i], tonumber(ARGV[6 + 2 * i])
  index[names[i]] = i
end
-- floor(a * b / c), exact while a * b < 2^53
local function part(a, b, c)
  local q = math.floor(a * b / c)
  if q * c > a * b then q = q - 1 elseif (q + 1) * c <= a * b then q = q + 1 end
  return q
end
local demand, held = {}, {}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local f, v = h[i], h[i + 1]
  local sp = string.find(v, ' ', 1, true)
  local units, untl = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
  local kind, r = string.match(f, '^(%a):([^:]*):')
  if untl <= now then
    redis.call('HDEL', KEYS[1], f)
  elseif index[r] then
    local k = index[r]
    if kind == 'd' then
      demand[k] = (demand[k] or 0) + units
    else
      held[k] = math.max(held[k] or 0, units)
      demand[k] = demand[k] or 0
    end
  end
end
local alloc, free, present = {}, limit, {}
for i = 1, n do
  if demand[i] == nil then
    alloc[i] = part(limit, ppm[i], 1000000)
    free = free - alloc[i]
  else
    present[#present + 1] = i
  end
end
local want, hungry = {}, {}
for _, i in ipairs(present) do
  alloc[i] = 1
  free = free - 1
  want[i] = math.max(0, demand[i] - 1)
  if want[i] > 0 then hungry[#hungry + 1] = i end
end
while #hungry > 0 and free > 0 do
  local weight, still, satisfied, pool = 0, {}, false, free
  for _, i in ipairs(hungry) do weight = weight + ppm[i] end
  for _, i in ipairs(hungry) do
    if want[i] <= part(pool, ppm[i], weight) then
      alloc[i] = alloc[i] + want[i]
      free = free - want[i]
      satisfied = true
    else
      still[#still + 1] = i
    end
  end
  if not satisfied then
    for _, i in ipairs(still) do
      local fair = part(pool, ppm[i], weight)
      alloc[i] = alloc[i] + fair
      free = free - fair
    end
    still = {}
  end
  hungry = still
end
if free > 0 and #present > 0 then
  local weight, spare = 0, free
  for _, i in ipairs(present) do weight = weight + ppm[i] end
  for _, i in ipairs(present) do alloc[i] = alloc[i] + part(spare, ppm[i], weight) end
end
local me = index[region]
local others = 0
for i = 1, n do
  if i ~= me then others = others + (held[i] or part(limit, ppm[i], 1000000)) end
end
local grant = math.max(1, math.min(alloc[me], limit - others))
redis.call('HSET', KEYS[1], 'g:' .. region .. ':' .. node, grant .. ' ' .. (now + ttl))
redis.call('PEXPIRE', KEYS[1], math.floor(ttl / 1000) + 1000)
return {grant, now}
)lua"};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REGION_REGION_SCRIPT_H_
