// A scheduler that is never advanced, with the manual clock it reads: a store opened with it
// does no background work at all (no Redis monitor: nothing connects until the first request;
// no lease sweep, batched sync or region renewal unless the test calls them itself).
#ifndef SLUICE_TESTS_STORE_IDLE_SCHEDULER_H_
#define SLUICE_TESTS_STORE_IDLE_SCHEDULER_H_

#include <memory>

#include "sluice/clock.h"
#include "sluice/scheduler.h"

namespace sluice::testing {

inline std::shared_ptr<Scheduler> IdleScheduler() {
  struct Idle {
    ManualClock clock;
    ManualScheduler scheduler{clock};
  };
  auto idle = std::make_shared<Idle>();
  return std::shared_ptr<Scheduler>(idle, &idle->scheduler);
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_IDLE_SCHEDULER_H_
