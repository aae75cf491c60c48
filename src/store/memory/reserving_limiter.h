// ReservingLimiter: a memory-store limiter deciding a check's reserve (LimitCheck::reserve,
// priority shedding) in the same step as its cost, under the key's shard lock -- what the memory
// store's DecideAll asks of its own limiters. Every limiter a memory store makes is one (the
// configured ones through SnapshotLimiter, the transient ones directly): a base in the single
// chain above MemoryLimiter, so that the hot limiter gains no second vtable pointer. Internal.
#ifndef SLUICE_STORE_MEMORY_RESERVING_LIMITER_H_
#define SLUICE_STORE_MEMORY_RESERVING_LIMITER_H_

#include <cstdint>
#include <string_view>

#include "sluice/calendar_window.h"
#include "sluice/decision.h"
#include "sluice/memory_store.h"
#include "sluice/time.h"

namespace sluice::internal {

class ReservingLimiter : public MemoryLimiter {
 public:
  // Limiter::Decide, admitted only if cost + reserve hits would have been (the algorithms'
  // Decide with a reserve): takes `cost`, or nothing. A calendar limit decides in `zone` when it
  // is set (LimitCheck::zone, as Limiter::DecideInZone); other limits ignore it.
  virtual Decision DecideReserving(std::string_view key, Timestamp now, int64_t cost,
                                   int64_t reserve, const CalendarZone* zone) = 0;

 protected:
  using MemoryLimiter::MemoryLimiter;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_RESERVING_LIMITER_H_
