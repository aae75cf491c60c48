// Time in sluice is a 64-bit count of nanoseconds since the Unix epoch. Algorithms take it as a
// parameter and never read a clock themselves; see clock.h for where it comes from.
#ifndef SLUICE_TIME_H_
#define SLUICE_TIME_H_

#include <chrono>
#include <cstdint>

namespace sluice {

using Duration = std::chrono::nanoseconds;
using Timestamp = std::chrono::time_point<std::chrono::system_clock, Duration>;

constexpr Timestamp FromNanos(int64_t ns) { return Timestamp(Duration(ns)); }
constexpr int64_t ToNanos(Timestamp t) { return t.time_since_epoch().count(); }

}  // namespace sluice

#endif  // SLUICE_TIME_H_
