// A rate_limit's `calendar`, `timezone` and `week_start` (docs/quotas.md, "Calendar periods").
#include <algorithm>
#include <string>

#include "config/config_parse.h"

namespace sluice::server::internal {
namespace {

constexpr size_t kMaxZoneBytes = 128;

std::optional<CalendarUnit> ParseCalendarUnit(std::string_view name) {
  if (name == "day") return CalendarUnit::kDay;
  if (name == "week") return CalendarUnit::kWeek;
  if (name == "month") return CalendarUnit::kMonth;
  if (name == "year") return CalendarUnit::kYear;
  return std::nullopt;
}

}  // namespace

Unit CalendarReportUnit(CalendarUnit unit) {
  switch (unit) {
    case CalendarUnit::kNone:
    case CalendarUnit::kDay:
      return Unit::kDay;
    case CalendarUnit::kWeek:
      return Unit::kWeek;
    case CalendarUnit::kMonth:
      return Unit::kMonth;
    case CalendarUnit::kYear:
      return Unit::kYear;
  }
  return Unit::kDay;
}

Result<std::optional<CalendarSpec>> ParseCalendar(const std::string& file, const Fields& fields) {
  const auto unit_node = fields.Get("calendar");
  if (!unit_node) {
    for (std::string_view f : {"timezone", "timezone_from", "week_start"}) {
      if (fields.Present(f)) {
        return ErrorAt(file, fields.KeyOf(f),
                       "'" + std::string(f) + "' applies only to a calendar window (calendar: " +
                           "day, week, month or year)");
      }
    }
    return std::nullopt;
  }
  for (std::string_view f : {"unit", "period"}) {
    if (fields.Present(f)) {
      return ErrorAt(file, fields.KeyOf("calendar"),
                     "a rate_limit takes one of 'unit', 'period' or 'calendar', not both '" +
                         std::string(f) + "' and 'calendar'");
    }
  }
  auto text = ReadString(file, *unit_node, "calendar", kMaxZoneBytes);
  if (!text) return std::unexpected(text.error());
  const auto unit = ParseCalendarUnit(*text);
  if (!unit) {
    return ErrorAt(file, *unit_node,
                   "unknown calendar '" + *text + "' (expected day, week, month or year)");
  }
  CalendarSpec calendar;
  calendar.unit = *unit;
  calendar.timezone = "UTC";
  if (const auto z = fields.Get("timezone")) {
    auto zone = ReadString(file, *z, "timezone", kMaxZoneBytes);
    if (!zone) return std::unexpected(zone.error());
    if (auto known = ValidateTimeZone(*zone); !known) {
      return ErrorAt(file, *z,
                     "timezone: " + known.error().message +
                         "; expected an IANA name such as "
                         "Europe/Lisbon or UTC");
    }
    calendar.timezone = std::move(*zone);
  }
  if (const auto w = fields.Get("week_start")) {
    auto day = ReadString(file, *w, "week_start", kMaxZoneBytes);
    if (!day) return std::unexpected(day.error());
    if (*day != "monday" && *day != "sunday") {
      return ErrorAt(file, *w, "week_start must be monday or sunday (got '" + *day + "')");
    }
    if (calendar.unit != CalendarUnit::kWeek) {
      return ErrorAt(file, fields.KeyOf("week_start"),
                     "week_start applies only to calendar: week, not " + *text);
    }
    calendar.week_starts_sunday = *day == "sunday";
  }
  return calendar;
}

Result<std::string> ParseTimezoneFrom(const std::string& file, const Fields& fields) {
  const auto node = fields.Get("timezone_from");
  if (!node) return std::string();
  auto key = ReadString(file, *node, "timezone_from", kMaxNameBytes);
  if (!key) return std::unexpected(key.error());  // an empty key included
  return key;
}

void AddZoneAttributeKeys(Domain& domain) {
  for (const Limit& limit : domain.limits) {
    if (limit.timezone_from.empty()) continue;
    auto& keys = domain.attribute_keys;
    if (std::find(keys.begin(), keys.end(), limit.timezone_from) == keys.end()) {
      keys.push_back(limit.timezone_from);
    }
  }
}

}  // namespace sluice::server::internal
