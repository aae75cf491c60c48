// Changing a limit mid-period keeps what was used (docs/quotas.md, "Changing a limit
// mid-period"). When a reload changes a limit's spec, each of its counters is read as its usage
// under the old spec and written as that usage under the new one, per algorithm:
//
//   token bucket, GCRA, leaky bucket: the hits used and not yet refilled (capacity - tokens;
//     the GCRA backlog in hits; the queued hits), as of the reload, rounded up to a whole hit.
//     The new bucket starts at new capacity - used: 1,000/month after 900 calls raised to
//     5,000/month has 4,100 left; lowered to 800 it is 100 in debt and refuses until it has
//     refilled. Any change of limit, period, burst, shaper or max_delay keeps it: a used amount
//     means the same under every rate.
//   fixed window, sliding window counter, sliding window log: the counts (the stamps), as they
//     are, when only the limit changed: a window whose usage is beyond the new limit refuses
//     until the window has moved past it. A window of another length cannot place its counts
//     in the new windows: they are dropped.
//   calendar window: the count in its recorded window, when only the limit changed; another
//     calendar unit, zone or week start drops it (as a snapshot's loading does).
//   another algorithm: dropped.
//
// What a key holds stays within the bound every algorithm keeps after a Charge (core/charge.h):
// at most two of the new capacities (the fixed window, whose count bounds no arithmetic, keeps
// its count whole). The memory store applies these functions; the Redis scripts apply the same
// rules in Lua (redis_scripts.h), and tests check the two against each other. Internal.
#ifndef SLUICE_CORE_CARRY_OVER_H_
#define SLUICE_CORE_CARRY_OVER_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <variant>

#include "sluice/calendar_window.h"
#include "sluice/fixed_window.h"
#include "sluice/limit_spec.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/time.h"

namespace sluice {

// What a reload that changes a limit from `from` to `to` does to its counters.
enum class CarryOver {
  kKeep,     // the same spec: the counters are kept as they are
  kConvert,  // the usage is kept, converted (StateFromUsage)
  kDrop,     // the counters mean nothing under `to`: they start empty
};
CarryOver CarryOverFor(const LimitSpec& from, const LimitSpec& to);

namespace internal {

// A bucket's usage: hits used and not yet refilled (Alg::Used).
struct BucketUsage {
  int64_t used = 0;
};
// A counter's usage in terms any spec of its algorithm reads.
using Usage = std::variant<BucketUsage, FixedWindow::State, SlidingWindowCounter::State,
                           SlidingWindowLog::State, CalendarWindow::State>;

template <typename Alg>
concept UsageBucket = requires(const Alg& a, const typename Alg::State& s, Timestamp t) {
  { a.Used(s, t) } -> std::convertible_to<int64_t>;
};

template <UsageBucket Alg>
Usage UsageOf(const Alg& alg, const typename Alg::State& state, Timestamp now) {
  return BucketUsage{alg.Used(state, now)};
}
inline Usage UsageOf(const FixedWindow&, const FixedWindow::State& state, Timestamp) {
  return state;
}
inline Usage UsageOf(const SlidingWindowCounter&, const SlidingWindowCounter::State& state,
                     Timestamp) {
  return state;
}
inline Usage UsageOf(const SlidingWindowLog&, const SlidingWindowLog::State& state, Timestamp) {
  return state;
}
inline Usage UsageOf(const CalendarWindow&, const CalendarWindow::State& state, Timestamp) {
  return state;
}

// The state of `alg` (the new spec) holding `usage` as of `now`; nullopt when `usage` is of
// another algorithm's kind. The caller has checked CarryOverFor() == kConvert.
template <UsageBucket Alg>
std::optional<typename Alg::State> StateFromUsage(const Alg& alg, const Usage& usage,
                                                  Timestamp now) {
  const auto* bucket = std::get_if<BucketUsage>(&usage);
  if (bucket == nullptr) return std::nullopt;
  // A full bucket charged the usage: taken whole up to the capacity, into debt beyond it, at
  // most one capacity of debt (Charge's own bound).
  typename Alg::State state = alg.Initial(now);
  if (bucket->used > 0) alg.Charge(state, now, std::min(bucket->used, 2 * alg.capacity()));
  return state;
}
std::optional<FixedWindow::State> StateFromUsage(const FixedWindow& alg, const Usage& usage,
                                                 Timestamp now);
std::optional<SlidingWindowCounter::State> StateFromUsage(const SlidingWindowCounter& alg,
                                                          const Usage& usage, Timestamp now);
std::optional<SlidingWindowLog::State> StateFromUsage(const SlidingWindowLog& alg,
                                                      const Usage& usage, Timestamp now);
std::optional<CalendarWindow::State> StateFromUsage(const CalendarWindow& alg, const Usage& usage,
                                                    Timestamp now);

}  // namespace internal
}  // namespace sluice

#endif  // SLUICE_CORE_CARRY_OVER_H_
