// A request's time zone for a calendar limit, resolved and named by a stable id
// (include/sluice/calendar_window.h; docs/quotas.md, "A zone per customer").
#include <date/tz.h>

#include "core/calendar_period.h"
#include "sluice/calendar_window.h"

namespace sluice {

uint64_t CalendarZoneId(std::string_view canonical_name) {
  // FNV-1a, 64 bits, folded to 52: the same in every process and on every node (std::hash is
  // not), and exact as a Lua number.
  uint64_t h = 14695981039346656037ull;
  for (const char c : canonical_name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  constexpr uint64_t kMask = (uint64_t{1} << 52) - 1;
  const uint64_t id = (h ^ (h >> 52)) & kMask;
  return id == 0 ? 1 : id;
}

Result<CalendarZone> ResolveCalendarZone(std::string_view name) {
  auto rules = internal::FindTimeZone(name);
  if (!rules) return std::unexpected(rules.error());
  // A link resolves to the zone it names: the id is the canonical zone's, so an alias is not
  // another zone.
  return CalendarZone{*rules, CalendarZoneId((*rules)->name())};
}

}  // namespace sluice
