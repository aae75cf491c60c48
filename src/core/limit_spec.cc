#include "sluice/limit_spec.h"

#include <string>

#include "core/arith.h"
#include "core/calendar_period.h"
#include "sluice/duration.h"
#include "sluice/sliding_window_log.h"

namespace sluice {
namespace {

// Largest limit of a sliding window log: 4 bytes per hit, 64 MiB per key (128 MiB in debt).
constexpr int64_t kMaxLogLimit = int64_t{1} << 24;
// Keeps every window end (up to two periods past a timestamp) inside 64-bit nanoseconds.
constexpr Duration kMaxPeriod = std::chrono::hours(24 * 3650);
// Window counters keep counts in 32 bits.
constexpr int64_t kMaxWindowLimit = 0xffffffffLL;

// A calendar belongs to a fixed window, in a zone the system tzdata knows.
Result<void> ValidateCalendar(const LimitSpec& spec) {
  if (!spec.IsCalendar()) {
    if (!spec.calendar.timezone.empty() || spec.calendar.week_starts_sunday) {
      return MakeError("timezone and week_start apply only to a calendar window");
    }
    return {};
  }
  if (spec.algorithm != Algorithm::kFixedWindow) {
    return MakeError("calendar windows apply only to fixed_window, not " +
                     std::string(AlgorithmName(spec.algorithm)));
  }
  if (spec.calendar.week_starts_sunday && spec.calendar.unit != CalendarUnit::kWeek) {
    return MakeError("week_start applies only to calendar: week");
  }
  if (auto zone = internal::FindTimeZone(spec.calendar.timezone); !zone) {
    return std::unexpected(zone.error());
  }
  return {};
}

}  // namespace

Result<void> ValidateTimeZone(std::string_view name) {
  if (auto zone = internal::FindTimeZone(name); !zone) return std::unexpected(zone.error());
  return {};
}

Result<LimitSpec> ValidateLimitSpec(const LimitSpec& spec) {
  const std::string name(AlgorithmName(spec.algorithm));
  if (auto calendar = ValidateCalendar(spec); !calendar) return std::unexpected(calendar.error());
  if (spec.limit <= 0) {
    return MakeError("limit must be a positive number of requests (got " +
                     std::to_string(spec.limit) + ")");
  }
  if (spec.period.count() <= 0) {
    return MakeError("period must be positive (got " + std::to_string(spec.period.count()) + "ns)");
  }
  if (spec.period > kMaxPeriod) {
    return MakeError("period must be at most 3650d (got " + FormatDuration(spec.period) + ")");
  }
  if (spec.burst < 0) {
    return MakeError("burst must not be negative (got " + std::to_string(spec.burst) + ")");
  }
  if (spec.shaper && spec.algorithm != Algorithm::kLeakyBucket) {
    return MakeError("shaper applies only to leaky_bucket, not " + name);
  }
  if (spec.HasMaxDelay() && !spec.shaper) {
    return MakeError("max_delay applies only to a leaky_bucket shaper (shaper: true)");
  }
  if (HasBurst(spec.algorithm)) {
    const auto rate = internal::Reduce(spec.limit, spec.period.count());
    // Exact in 64 bits below 2^61, in 128 bits beyond (NeedsWideArithmetic). What stays bounded
    // is the time a bucket takes to fill: its state reaches twice that ahead of its time (in
    // debt), which must stay within int64 nanoseconds.
    const __int128 scaled = static_cast<__int128>(spec.Capacity()) * rate.d;
    if (internal::CeilDiv(scaled, rate.n) > internal::kMaxFillNs) {
      return MakeError(name + " " + std::to_string(spec.limit) + "/" + FormatDuration(spec.period) +
                       " with capacity " + std::to_string(spec.Capacity()) +
                       " takes more than 100 years (of 365 days) to fill (capacity x period / "
                       "limit); lower the burst or raise the rate");
    }
    if (spec.HasMaxDelay()) {
      // No admitted request waits as long as a full queue takes to drain: a longer bound would
      // be accepted and change nothing.
      const Duration full_queue(static_cast<int64_t>(internal::CeilDiv(scaled, rate.n)));
      if (spec.max_delay < Duration(0) || spec.max_delay > full_queue) {
        return MakeError("max_delay must be from 0s to burst/rate = " + FormatDuration(full_queue) +
                         ", the most a full queue imposes (got " + FormatDuration(spec.max_delay) +
                         "); raise burst for longer delays");
      }
    }
    return spec;
  }
  if (spec.burst != 0) {
    return MakeError("burst applies to token_bucket, gcra and leaky_bucket, not " + name +
                     " (a window's capacity is its limit)");
  }
  if (spec.limit > kMaxWindowLimit) {
    return MakeError(name + " limit " + std::to_string(spec.limit) + " exceeds " +
                     std::to_string(kMaxWindowLimit));
  }
  if (spec.algorithm == Algorithm::kSlidingWindowLog) {
    if (spec.limit > kMaxLogLimit) {
      return MakeError("sliding_window_log keeps one 4-byte timestamp per hit; limit " +
                       std::to_string(spec.limit) + " exceeds " + std::to_string(kMaxLogLimit) +
                       " per key (use sliding_window_counter)");
    }
    if (SlidingWindowLogQuantum(spec.period) == 0) {
      return MakeError("sliding_window_log period " + FormatDuration(spec.period) +
                       " must be a whole number of 1ns..1s quanta below 2^31 of them");
    }
  }
  return spec;
}

bool NeedsWideArithmetic(const LimitSpec& spec) {
  if (spec.limit <= 0 || spec.period.count() <= 0) return false;
  if (HasBurst(spec.algorithm)) {
    const auto rate = internal::Reduce(spec.limit, spec.period.count());
    return static_cast<__int128>(spec.Capacity()) * rate.d >= internal::kMaxScaled;
  }
  // Only the counter multiplies counts by the period (its estimate is kept in hits * D).
  return spec.algorithm == Algorithm::kSlidingWindowCounter &&
         static_cast<__int128>(spec.limit) * spec.period.count() >= (int64_t{1} << 60);
}

namespace internal {

Result<LimitSpec> ValidateLimitSpecFor(const LimitSpec& spec, Algorithm expected) {
  if (spec.algorithm != expected) {
    return MakeError("spec is for " + std::string(AlgorithmName(spec.algorithm)) + ", not " +
                     std::string(AlgorithmName(expected)));
  }
  return ValidateLimitSpec(spec);
}

}  // namespace internal

std::string DescribeLimitSpec(const LimitSpec& spec) {
  std::string out =
      std::string(AlgorithmName(spec.algorithm)) + " " + std::to_string(spec.limit) + "/" +
      (spec.IsCalendar() ? "calendar " + std::string(CalendarUnitName(spec.calendar.unit)) + " " +
                               spec.calendar.timezone
                         : FormatDuration(spec.period));
  if (spec.calendar.week_starts_sunday) out += " from sunday";
  if (spec.burst > 0) out += " burst " + std::to_string(spec.burst);
  if (spec.shaper) out += " shaper";
  if (spec.HasMaxDelay()) out += " max_delay " + FormatDuration(spec.max_delay);
  return out;
}

}  // namespace sluice
