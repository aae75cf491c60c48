#include "config/limit_unit.h"

#include <chrono>

namespace sluice::server {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

}  // namespace

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
    if (EqualsIgnoreCase(name, UnitName(u))) return u;
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
