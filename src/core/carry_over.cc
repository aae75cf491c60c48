#include "core/carry_over.h"

#include <cstdint>
#include <limits>

namespace sluice {

CarryOver CarryOverFor(const LimitSpec& from, const LimitSpec& to) {
  if (from == to) return CarryOver::kKeep;
  if (from.algorithm != to.algorithm) return CarryOver::kDrop;
  // A calendar window's count belongs to its calendar period in its zone.
  if (from.calendar != to.calendar) return CarryOver::kDrop;
  // A window's counts belong to windows of its length; a bucket's usage is a number of hits,
  // whatever the rate.
  if (!HasBurst(to.algorithm) && from.period != to.period) return CarryOver::kDrop;
  return CarryOver::kConvert;
}

namespace internal {

std::optional<FixedWindow::State> StateFromUsage(const FixedWindow& /*alg*/, const Usage& usage,
                                                 Timestamp /*now*/) {
  // The count as it is: beyond a lowered limit it refuses until the window ends. A window
  // already over is replaced by the next Decide, as it would have been.
  const auto* state = std::get_if<FixedWindow::State>(&usage);
  if (state == nullptr) return std::nullopt;
  return *state;
}

std::optional<CalendarWindow::State> StateFromUsage(const CalendarWindow& /*alg*/,
                                                    const Usage& usage, Timestamp /*now*/) {
  // As a fixed window's: the count in its recorded window, whatever the new limit.
  const auto* state = std::get_if<CalendarWindow::State>(&usage);
  if (state == nullptr) return std::nullopt;
  return *state;
}

std::optional<SlidingWindowCounter::State> StateFromUsage(const SlidingWindowCounter& alg,
                                                          const Usage& usage, Timestamp /*now*/) {
  const auto* state = std::get_if<SlidingWindowCounter::State>(&usage);
  if (state == nullptr) return std::nullopt;
  // Two capacities at most: the exact arithmetic's range (limit x window) is the new spec's.
  const uint32_t most = static_cast<uint32_t>(
      std::min<int64_t>(2 * alg.capacity(), std::numeric_limits<uint32_t>::max()));
  SlidingWindowCounter::State out = *state;
  out.current = std::min(out.current, most);
  out.previous = std::min(out.previous, most);
  return out;
}

std::optional<SlidingWindowLog::State> StateFromUsage(const SlidingWindowLog& alg,
                                                      const Usage& usage, Timestamp /*now*/) {
  const auto* state = std::get_if<SlidingWindowLog::State>(&usage);
  if (state == nullptr) return std::nullopt;
  // The newest two capacities of stamps (the memory a key may hold): the older ones leave the
  // window first, so the key refuses at least as long as it keeps more than the limit.
  SlidingWindowLog::State out = *state;
  const int64_t most = 2 * alg.capacity();
  if (out.stamps.size() > most) {
    out.stamps.Erase(0, out.stamps.size() - static_cast<uint32_t>(most));
  }
  return out;
}

}  // namespace internal
}  // namespace sluice
