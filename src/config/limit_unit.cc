#include "config/limit_unit.h"

#include <chrono>
#include <string>

#include "sluice/duration.h"
#include "util/ascii.h"

namespace sluice::server {

std::string_view UnitName(Unit unit) {
  switch (unit) {
    case Unit::kSecond:
      return "second";
    case Unit::kMinute:
      return "minute";
    case Unit::kHour:
      return "hour";
    case Unit::kDay:
      return "day";
    case Unit::kWeek:
      return "week";
    case Unit::kMonth:
      return "month";
    case Unit::kYear:
      return "year";
  }
  return "unknown";
}

std::optional<Unit> ParseUnit(std::string_view name) {
  for (Unit u : kAllUnits) {
    if (util::EqualsIgnoreAsciiCase(name, UnitName(u))) return u;
  }
  return std::nullopt;
}

Duration UnitDuration(Unit unit) {
  using std::chrono::hours;
  switch (unit) {
    case Unit::kSecond:
      return std::chrono::seconds(1);
    case Unit::kMinute:
      return std::chrono::minutes(1);
    case Unit::kHour:
      return hours(1);
    case Unit::kDay:
      return hours(24);
    case Unit::kWeek:
      return hours(24 * 7);
    case Unit::kMonth:
      return hours(24 * 30);
    case Unit::kYear:
      return hours(24 * 365);
  }
  return Duration(0);
}

std::optional<Unit> UnitOfLength(Duration length) {
  for (Unit u : kAllUnits) {
    if (UnitDuration(u) == length) return u;
  }
  return std::nullopt;
}

Result<LimitPeriod> ParsePeriod(std::string_view text) {
  auto d = ParseDuration(text);
  if (!d) return std::unexpected(d.error());
  if (*d < kMinPeriod || *d > kMaxPeriod) {
    return MakeError("period must be from 1s to 366d (got " + std::string(text) + ")");
  }
  if (*d % std::chrono::microseconds(1) != Duration(0)) {
    return MakeError("period must be a whole number of microseconds (got " + std::string(text) +
                     ")");
  }
  return LimitPeriod{*d, std::nullopt};
}

std::string PeriodName(const LimitPeriod& period) {
  return period.unit ? std::string(UnitName(*period.unit)) : FormatDuration(period.length);
}

}  // namespace sluice::server
