#include "core/calendar_period.h"

#include <date/tz.h>

#include <chrono>
#include <exception>
#include <limits>
#include <string>

#include "core/arith.h"

namespace sluice {

std::string_view CalendarUnitName(CalendarUnit unit) {
  switch (unit) {
    case CalendarUnit::kNone:
      return "";
    case CalendarUnit::kDay:
      return "day";
    case CalendarUnit::kWeek:
      return "week";
    case CalendarUnit::kMonth:
      return "month";
    case CalendarUnit::kYear:
      return "year";
  }
  return "";
}

namespace internal {
namespace {

using std::chrono::seconds;

constexpr int64_t kNanosPerSecond = 1'000'000'000;

// The first local day of the period containing local day `day`.
date::local_days FirstDay(date::local_days day, CalendarUnit unit, bool week_starts_sunday) {
  const date::year_month_day ymd{day};
  switch (unit) {
    case CalendarUnit::kNone:
    case CalendarUnit::kDay:
      return day;
    case CalendarUnit::kWeek: {
      // c_encoding: Sunday 0 .. Saturday 6.
      const unsigned wd = date::weekday{day}.c_encoding();
      const unsigned back = week_starts_sunday ? wd : (wd + 6) % 7;
      return day - date::days{back};
    }
    case CalendarUnit::kMonth:
      return date::local_days{ymd.year() / ymd.month() / 1};
    case CalendarUnit::kYear:
      return date::local_days{ymd.year() / 1 / 1};
  }
  return day;
}

// The first local day of the period after the one that starts on `first`.
date::local_days NextFirstDay(date::local_days first, CalendarUnit unit) {
  const date::year_month_day ymd{first};
  switch (unit) {
    case CalendarUnit::kNone:
    case CalendarUnit::kDay:
      return first + date::days{1};
    case CalendarUnit::kWeek:
      return first + date::days{7};
    case CalendarUnit::kMonth:
      return date::local_days{ymd + date::months{1}};
    case CalendarUnit::kYear:
      return date::local_days{ymd + date::years{1}};
  }
  return first + date::days{1};
}

// The period before the one that starts on `first`.
date::local_days PreviousFirstDay(date::local_days first, CalendarUnit unit,
                                  bool week_starts_sunday) {
  return FirstDay(first - date::days{1}, unit, week_starts_sunday);
}

// The first instant of local day `day`, in seconds: its midnight, the earlier one if midnight
// happens twice, the instant the clocks jumped if it does not happen at all.
int64_t DayStart(const date::time_zone& zone, date::local_days day) {
  const date::local_seconds midnight{day};
  const date::local_info info = zone.get_info(midnight);
  if (info.result == date::local_info::nonexistent) {
    return info.first.end.time_since_epoch().count();
  }
  // Unique, or ambiguous (the first mapping is the earlier instant).
  return (midnight - info.first.offset).time_since_epoch().count();
}

int64_t ToNanosClamped(int64_t secs) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / kNanosPerSecond;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min() / kNanosPerSecond;
  if (secs >= kMax) return std::numeric_limits<int64_t>::max();
  if (secs <= kMin) return std::numeric_limits<int64_t>::min();
  return secs * kNanosPerSecond;
}

}  // namespace

Result<const date::time_zone*> FindTimeZone(std::string_view name) {
  if (name.empty()) return MakeError("time zone name is empty");
  try {
    return date::locate_zone(name);
  } catch (const std::exception& e) {
    // date/tz.h reports an unknown name, and a missing or unreadable tzdata, by exception.
    return MakeError("unknown time zone \"" + std::string(name) + "\" (" + e.what() + ")");
  }
}

PeriodBounds CalendarPeriodAt(const date::time_zone& zone, CalendarUnit unit,
                              bool week_starts_sunday, Timestamp t) {
  const int64_t secs = FloorDiv(ToNanos(t), kNanosPerSecond);
  const date::sys_seconds at{seconds{secs}};
  const date::sys_info info = zone.get_info(at);
  const date::local_days day =
      date::floor<date::days>(date::local_seconds{seconds{secs} + info.offset});
  date::local_days first = FirstDay(day, unit, week_starts_sunday);
  int64_t start = DayStart(zone, first);
  int64_t end = DayStart(zone, NextFirstDay(first, unit));
  // Where clocks fall back across midnight, an instant's local date can belong to the period
  // before the one whose bounds contain it; where a day is skipped, a period can be empty. Walk
  // to the period whose [start, end) holds the instant, so the periods tile time.
  for (int step = 0; step < 4 && secs >= end; ++step) {
    first = NextFirstDay(first, unit);
    start = end;
    end = DayStart(zone, NextFirstDay(first, unit));
  }
  for (int step = 0; step < 4 && secs < start; ++step) {
    first = PreviousFirstDay(first, unit, week_starts_sunday);
    end = start;
    start = DayStart(zone, first);
  }
  return PeriodBounds{ToNanosClamped(start), ToNanosClamped(end)};
}

}  // namespace internal
}  // namespace sluice
