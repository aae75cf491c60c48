// ReservingLimiter: a memory-store limiter deciding a check's reserve (LimitCheck::reserve,
// priority shedding) in the same step as its cost, under the key's shard lock -- what the memory
// store's DecideAll asks of its own limiters. Internal.
#ifndef SLUICE_STORE_MEMORY_RESERVING_LIMITER_H_
#define SLUICE_STORE_MEMORY_RESERVING_LIMITER_H_

#include <cstdint>
#include <string_view>

#include "sluice/decision.h"
#include "sluice/time.h"

namespace sluice::internal {

class ReservingLimiter {
 public:
  // Limiter::Decide, admitted only if cost + reserve hits would have been (the algorithms'
  // Decide with a reserve): takes `cost`, or nothing.
  virtual Decision DecideReserving(std::string_view key, Timestamp now, int64_t cost,
                                   int64_t reserve) = 0;

 protected:
  ~ReservingLimiter() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_RESERVING_LIMITER_H_
