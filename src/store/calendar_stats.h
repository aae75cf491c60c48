// sluice_calendar_zone_mismatches_total, which the memory and Redis stores report for each
// calendar limit (docs/quotas.md, "A zone per customer"). Internal to the store layers.
#ifndef SLUICE_STORE_CALENDAR_STATS_H_
#define SLUICE_STORE_CALENDAR_STATS_H_

#include "sluice/stats_sink.h"

namespace sluice::internal {

inline constexpr StatFamily kCalendarZoneMismatches{
    "sluice_calendar_zone_mismatches_total", StatKind::kCounter,
    "Calendar-limit requests whose time zone was not the one their counter's open window was "
    "opened in: decided in that window's zone until it ends."};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_CALENDAR_STATS_H_
