// The time units of envoyproxy/ratelimit's `rate_limit.unit`, with the lengths that project
// gives them (a month is 30 days and a year 365, not calendar ones), so that a config moved
// from there to sluice keeps its meaning.
#ifndef SLUICE_CONFIG_LIMIT_UNIT_H_
#define SLUICE_CONFIG_LIMIT_UNIT_H_

#include <array>
#include <optional>
#include <string_view>

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

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_LIMIT_UNIT_H_
