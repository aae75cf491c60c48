// Calendar window: a fixed window whose windows are the calendar periods (day, week, month,
// year) of an IANA time zone rather than multiples of a length from the epoch; admit iff
// count + cost <= limit. The state records the window's bounds, so an open window keeps them
// until it ends whatever the zone rules loaded since (docs/quotas.md, "Calendar periods").
#ifndef SLUICE_CALENDAR_WINDOW_H_
#define SLUICE_CALENDAR_WINDOW_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace date {
class time_zone;
}  // namespace date

namespace sluice {

// A time zone a request names for a calendar limit (LimitCheck::zone; docs/quotas.md, "A zone
// per customer"): its rules, resolved once, and an id that names it the same in every process
// and node, which a counter records for the window it opened.
struct CalendarZone {
  const date::time_zone* rules = nullptr;  // date/tz.h's database: lives as the process
  uint64_t id = 0;                         // CalendarZoneId of the zone's canonical name
};

// The zone named `name` (an IANA name or a link to one: "US/Eastern" is America/New_York), or
// an error naming it. Reads the tz database: callers on a hot path keep what it returns.
Result<CalendarZone> ResolveCalendarZone(std::string_view name);

// A hash of a canonical zone name, below 2^52 (a Lua number holds it exactly: the Redis store
// records it) and never 0, which a state uses for "no zone recorded".
uint64_t CalendarZoneId(std::string_view canonical_name);

class CalendarWindow {
 public:
  // Plain integers: copied as they are (snapshots save the fields).
  struct State {
    int64_t start_ns = 0;  // [start_ns, end_ns): the window `count` belongs to, Unix ns
    int64_t end_ns = 0;
    int64_t count = 0;
    // CalendarZoneId of the zone the window was opened in; 0: not recorded (a snapshot's
    // counter: its window still ends when it would have).
    uint64_t zone = 0;
  };

  // spec: a fixed_window with a calendar (LimitSpec::IsCalendar) whose zone is known.
  static Result<CalendarWindow> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const;
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // FixedWindow::Charge's contract, in calendar windows.
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took, if `at` is in the state's window.
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  Timestamp ReplenishedAt(const State& state) const;
  static size_t HeapBytes(const State&) { return 0; }
  int64_t capacity() const { return limit_; }

  // The window that contains `t` under this spec, with no count.
  State WindowAt(Timestamp t) const;

  // This window's rules in `zone` instead of the spec's: a window it opens is that zone's and
  // records it. A request whose zone differs from the one its open window recorded is decided
  // in that window (switching zones cannot reopen it) and, if `mismatches` is set, counted
  // there.
  CalendarWindow InZone(const CalendarZone& zone, std::atomic<uint64_t>* mismatches) const;
  // The spec's own zone.
  CalendarZone zone() const { return CalendarZone{zone_, zone_id_}; }

 private:
  CalendarWindow(int64_t limit, CalendarZone zone, CalendarUnit unit, bool sunday)
      : limit_(limit),
        zone_(zone.rules),
        zone_id_(zone.id),
        unit_(unit),
        week_starts_sunday_(sunday) {}

  // Counts a request at `t` (Unix ns) whose zone is not the one its open window recorded.
  void CountMismatch(const State& s, int64_t t) const;

  int64_t limit_;
  const date::time_zone* zone_;  // owned by date/tz.h's database, which lives as the process
  uint64_t zone_id_;
  std::atomic<uint64_t>* mismatches_ = nullptr;  // InZone's; the limiter's counter
  CalendarUnit unit_;
  bool week_starts_sunday_;
};

}  // namespace sluice

#endif  // SLUICE_CALENDAR_WINDOW_H_
