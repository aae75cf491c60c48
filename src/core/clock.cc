#include "sluice/clock.h"

namespace sluice {

MonotonicClock::MonotonicClock()
    : steady_origin_(std::chrono::steady_clock::now()),
      wall_origin_(std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now())) {}

Timestamp MonotonicClock::Now() const {
  return wall_origin_ +
         std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - steady_origin_);
}

}  // namespace sluice
