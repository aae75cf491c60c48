// A multi-limit decision's checks grouped by hash slot: one multi-limit script per group
// (redis_script_multi.h). Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_SLOTS_H_
#define SLUICE_STORE_REDIS_REDIS_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sluice/limiter.h"

namespace sluice::internal {

class RedisLimiter;

// One check of a multi-limit decision, in its hash slot's group.
struct SlotCheck {
  size_t index;  // into the checks and decisions
  RedisLimiter* limiter;
  std::string key;
  int64_t cost;
  bool charge;               // never given back
  bool quota;                // LimitCheck::quota
  int64_t reserve;           // RedisLimiter::ReserveFor: 0 for a charge
  const CalendarZone* zone;  // LimitCheck::zone: valid while the group's call is built
};

struct SlotGroup {
  int slot;
  std::vector<SlotCheck> checks;
};

// What one group's multi-limit script said.
struct GroupOutcome {
  bool admitted = false;  // the group's admissions stand (unless another group rejects)
  int64_t at_us = 0;      // the script's now, for refunds
};

// How many of the checks are quota checks (the scripts' quota rule needs the total).
size_t QuotaChecks(std::span<const LimitCheck> checks);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SLOTS_H_
