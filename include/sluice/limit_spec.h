// LimitSpec: what a user configures. "limit requests per period", with an optional burst.
//
//   token_bucket, gcra:   refill rate limit/period, capacity burst (default limit).
//   leaky_bucket:         leak rate limit/period, queue size burst (default limit);
//                         shaper=true delays admitted requests instead of only metering;
//                         max_delay bounds that delay (a request that would wait longer is
//                         refused and takes nothing).
//   fixed_window, sliding_window_log, sliding_window_counter:
//                         at most limit hits per window of length period; burst must be unset.
//   fixed_window with a calendar: the window is the calendar day, week, month or year in an
//                         IANA time zone (docs/quotas.md, "Calendar periods"); period (any
//                         valid length) is then not the window: sluiced sets the unit's nominal
//                         one (a month 30 days) for what reports a single length.
#ifndef SLUICE_LIMIT_SPEC_H_
#define SLUICE_LIMIT_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/algorithm.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice {

// A calendar period in a time zone, instead of a window of fixed length.
enum class CalendarUnit : uint8_t { kNone, kDay, kWeek, kMonth, kYear };

// "day", "week", "month", "year" ("" for kNone).
std::string_view CalendarUnitName(CalendarUnit unit);

// Whether the system tzdata knows the IANA zone `name`; the error names it.
Result<void> ValidateTimeZone(std::string_view name);

struct CalendarSpec {
  CalendarUnit unit = CalendarUnit::kNone;
  std::string timezone;             // an IANA name from the system tzdata ("Europe/Lisbon")
  bool week_starts_sunday = false;  // weeks start on Monday (ISO 8601) unless set

  bool operator==(const CalendarSpec&) const = default;
};

struct LimitSpec {
  Algorithm algorithm = Algorithm::kTokenBucket;
  int64_t limit = 0;    // requests (hits) per period
  Duration period{0};   // the window, or the time in which `limit` tokens refill/leak
  int64_t burst = 0;    // capacity / queue size; 0 means "same as limit"
  bool shaper = false;  // leaky bucket only
  // Shaper only: the longest delay an admitted request may get. Duration::max() (the default):
  // what the queue allows, just under burst/rate. At most burst/rate (ValidateLimitSpec).
  Duration max_delay = Duration::max();
  // fixed_window only: windows are calendar periods in a zone (unit kNone: they are not).
  CalendarSpec calendar{};

  // The capacity actually used: burst if set, else limit.
  int64_t Capacity() const { return burst > 0 ? burst : limit; }
  bool HasMaxDelay() const { return max_delay != Duration::max(); }
  bool IsCalendar() const { return calendar.unit != CalendarUnit::kNone; }

  bool operator==(const LimitSpec&) const = default;
};

// Checks the parameters every algorithm shares and the algorithm-specific ones (including the
// arithmetic ranges that keep decisions exact); the error names the offending field.
Result<LimitSpec> ValidateLimitSpec(const LimitSpec& spec);

// Whether the spec's exact arithmetic needs 128 bits: a bucket (token_bucket, gcra, leaky_bucket)
// whose capacity x d (d = period / gcd(limit, period), in ns) reaches 2^61, or a
// sliding_window_counter whose limit x period reaches 2^60. Specs below keep the 64-bit fast path;
// the memory store keeps the wide ones' buckets in WideTokenBucket / WideLeakyBucket, whose states
// are 8 bytes larger. docs/algorithms.md, "The exact range".
bool NeedsWideArithmetic(const LimitSpec& spec);

// A 128-bit integer aligned to 8 bytes (GCC and Clang let a typedef lower alignment), so a wide
// bucket's state is 24 bytes, not 32.
__extension__ typedef __int128 WideInt __attribute__((aligned(8)));

namespace internal {
// The integer a bucket keeps its scaled quantities in: 64 bits, or 128 for wide specs.
template <bool kWide>
struct ScaledInt {
  using type = int64_t;
};
template <>
struct ScaledInt<true> {
  using type = WideInt;
};
}  // namespace internal

// "token_bucket 10/1s burst 50", for logs and the demo.
std::string DescribeLimitSpec(const LimitSpec& spec);

}  // namespace sluice

#endif  // SLUICE_LIMIT_SPEC_H_
