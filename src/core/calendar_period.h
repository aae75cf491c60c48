// The calendar period (day, week, month, year) in an IANA time zone that contains an instant,
// as Unix instants: the zone rules come from the system tzdata through Howard Hinnant's
// date/tz.h (GCC 12's <chrono> has no zones). Internal to libsluice; docs/quotas.md,
// "Calendar periods".
#ifndef SLUICE_CORE_CALENDAR_PERIOD_H_
#define SLUICE_CORE_CALENDAR_PERIOD_H_

#include <cstdint>
#include <string_view>

#include "sluice/limit_spec.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace date {
class time_zone;
}  // namespace date

namespace sluice::internal {

// [start_ns, end_ns): Unix nanoseconds, whole seconds.
struct PeriodBounds {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  friend bool operator==(const PeriodBounds&, const PeriodBounds&) = default;
};

// The zone named `name` ("Europe/Lisbon", "UTC"), or an error naming it. The zone lives as
// long as the process (date/tz.h loads the database once).
Result<const date::time_zone*> FindTimeZone(std::string_view name);

// The period of `unit` that contains `t` in `zone`. A period starts at the first instant of its
// first local day: local midnight, or where midnight does not exist (a zone whose clocks jump
// from 23:59:59 to 01:00) the instant the clocks jumped. So a day across a DST change is 23 or
// 25 hours (23.5 or 24.5 on Lord Howe), and the periods of a zone tile time without gaps.
// Instants beyond year 2262 or before 1677 (outside int64 nanoseconds) clamp to those ends.
PeriodBounds CalendarPeriodAt(const date::time_zone& zone, CalendarUnit unit,
                              bool week_starts_sunday, Timestamp t);

}  // namespace sluice::internal

#endif  // SLUICE_CORE_CALENDAR_PERIOD_H_
