// Calendar window: a fixed window whose windows are the calendar periods (day, week, month,
// year) of an IANA time zone rather than multiples of a length from the epoch; admit iff
// count + cost <= limit. The state records the window's bounds, so an open window keeps them
// until it ends whatever the zone rules loaded since (docs/quotas.md, "Calendar periods").
#ifndef SLUICE_CALENDAR_WINDOW_H_
#define SLUICE_CALENDAR_WINDOW_H_

#include <cstddef>
#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace date {
class time_zone;
}  // namespace date

namespace sluice {

class CalendarWindow {
 public:
  // Plain integers: copied as they are (snapshots save the fields).
  struct State {
    int64_t start_ns = 0;  // [start_ns, end_ns): the window `count` belongs to, Unix ns
    int64_t end_ns = 0;
    int64_t count = 0;
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

 private:
  CalendarWindow(int64_t limit, const date::time_zone* zone, CalendarUnit unit, bool sunday)
      : limit_(limit), zone_(zone), unit_(unit), week_starts_sunday_(sunday) {}

  int64_t limit_;
  const date::time_zone* zone_;  // owned by date/tz.h's database, which lives as the process
  CalendarUnit unit_;
  bool week_starts_sunday_;
};

}  // namespace sluice

#endif  // SLUICE_CALENDAR_WINDOW_H_
