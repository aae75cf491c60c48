// The time units of envoyproxy/ratelimit's `rate_limit.unit`, with the lengths that project
// gives them (a month is 30 days and a year 365, not calendar ones), so that a config moved
// from there to sluice keeps its meaning; and a rule's window, one of those units or any
// `period` (docs/quotas.md).
#ifndef SLUICE_CONFIG_LIMIT_UNIT_H_
#define SLUICE_CONFIG_LIMIT_UNIT_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::server {

enum class Unit { kSecond, kMinute, kHour, kDay, kWeek, kMonth, kYear };

inline constexpr std::array<Unit, 7> kAllUnits = {
    Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay, Unit::kWeek, Unit::kMonth, Unit::kYear,
};

// "second", "minute", ... "year".
std::string_view UnitName(Unit unit);

// Case-insensitive, as ratelimit upper-cases the name before looking it up ("SECOND" works).
std::optional<Unit> ParseUnit(std::string_view name);

Duration UnitDuration(Unit unit);

// The unit exactly that long, if any (60s: minute).
std::optional<Unit> UnitOfLength(Duration length);

// A rule's window: one of ratelimit's units (`unit: minute`), or any length (`period: 5m`).
struct LimitPeriod {
  // The length first: a Unit alone does not make a LimitPeriod (`{Unit::kMinute}` would have
  // kept a second's length); LimitPeriod::Of does.
  Duration length = std::chrono::seconds(1);
  std::optional<Unit> unit;  // as configured; empty for a `period`

  static LimitPeriod Of(Unit u) { return {UnitDuration(u), u}; }
  friend bool operator==(const LimitPeriod&, const LimitPeriod&) = default;
};

// The bounds of `period`: a second (below it a limit is a burst cap, for which `burst` exists)
// to 366 days (a leap year: the longest calendar-like quota people sell).
inline constexpr Duration kMinPeriod = std::chrono::seconds(1);
inline constexpr Duration kMaxPeriod = std::chrono::hours(24 * 366);

// `period`'s value: the duration syntax (sluice/duration.h), from kMinPeriod to kMaxPeriod, in
// whole microseconds (Redis counts time in microseconds).
Result<LimitPeriod> ParsePeriod(std::string_view text);

// The unit's name ("minute"), or the period's shortest spelling ("5m").
std::string PeriodName(const LimitPeriod& period);

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_LIMIT_UNIT_H_
