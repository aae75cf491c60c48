#include "sluice/calendar_window.h"

#include <algorithm>
#include <type_traits>

#include "core/arith.h"
#include "core/calendar_period.h"
#include "core/charge.h"
#include "core/validate.h"
#include "core/window_count.h"

namespace sluice {

// Snapshots and the stores copy states as they are.
static_assert(std::is_trivially_copyable_v<CalendarWindow::State>);

Result<CalendarWindow> CalendarWindow::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kFixedWindow); !valid) {
    return std::unexpected(valid.error());
  }
  if (!spec.IsCalendar()) return MakeError("calendar window: the spec has no calendar");
  auto zone = ResolveCalendarZone(spec.calendar.timezone);
  if (!zone) return std::unexpected(zone.error());
  return CalendarWindow(spec.limit, *zone, spec.calendar.unit, spec.calendar.week_starts_sunday);
}

CalendarWindow CalendarWindow::InZone(const CalendarZone& zone,
                                      std::atomic<uint64_t>* mismatches) const {
  CalendarWindow w = *this;
  if (zone.rules != nullptr) {
    w.zone_ = zone.rules;
    w.zone_id_ = zone.id;
  }
  w.mismatches_ = mismatches;
  return w;
}

CalendarWindow::State CalendarWindow::WindowAt(Timestamp t) const {
  const internal::PeriodBounds b =
      internal::CalendarPeriodAt(*zone_, unit_, week_starts_sunday_, t);
  return State{b.start_ns, b.end_ns, 0, zone_id_};
}

CalendarWindow::State CalendarWindow::Initial(Timestamp now) const { return WindowAt(now); }

Decision CalendarWindow::Decide(State& s, Timestamp now, int64_t cost, int64_t reserve) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, limit_);
  // Only a window's end opens the next one; after a clock step backwards (t before start_ns)
  // the state's window still applies, as in FixedWindow.
  CountMismatch(s, t);
  if (t >= s.end_ns) s = WindowAt(now);
  return internal::DecideWindowCount(s.count, limit_, s.end_ns - t, cost, reserve);
}

void CalendarWindow::CountMismatch(const State& s, int64_t t) const {
  // An open window opened in another zone decides; the request's zone waits for its end.
  if (mismatches_ != nullptr && t < s.end_ns && s.zone != 0 && s.zone != zone_id_) {
    mismatches_->fetch_add(1, std::memory_order_relaxed);
  }
}

Decision CalendarWindow::Charge(State& s, Timestamp now, int64_t cost) const {
  // ChargeBeyondLimit decides twice: the request is counted once, here.
  CountMismatch(s, ToNanos(now));
  CalendarWindow quiet = *this;
  quiet.mismatches_ = nullptr;
  return internal::ChargeBeyondLimit(quiet, s, now, cost, [this](State& st, int64_t hits) {
    internal::ChargeWindowCount(st.count, limit_, hits);
  });
}

void CalendarWindow::Refund(State& s, Timestamp at, Timestamp /*now*/, int64_t cost) const {
  if (cost <= 0 || cost > limit_) return;
  // A request counted in a window that has since been replaced was forgotten with it.
  const int64_t a = ToNanos(at);
  if (a < s.start_ns || a >= s.end_ns) return;
  internal::RefundWindowCount(s.count, limit_, cost);
}

Timestamp CalendarWindow::ReplenishedAt(const State& s) const {
  return s.count == 0 ? internal::kLongAgo : FromNanos(s.end_ns);
}

}  // namespace sluice
