#include "config/limit_unit.h"

#include <chrono>

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

}  // namespace sluice::server
