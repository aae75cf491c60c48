#include "sluice/fixed_window.h"

#include <algorithm>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"
#include "core/window_count.h"

namespace sluice {

using internal::FloorDiv;

Result<FixedWindow> FixedWindow::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kFixedWindow); !valid) {
    return std::unexpected(valid.error());
  }
  return FixedWindow(spec.limit, spec.period.count());
}

FixedWindow::State FixedWindow::Initial(Timestamp now) const {
  return State{FloorDiv(ToNanos(now), window_ns_), 0};
}

Decision FixedWindow::Decide(State& s, Timestamp now, int64_t cost, int64_t reserve) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, limit_);
  const int64_t w = FloorDiv(t, window_ns_);
  if (w > s.window) {
    s.window = w;
    s.count = 0;
  }
  // After a clock step backwards s.window may be ahead of w; the state's window still applies.
  return internal::DecideWindowCount(s.count, limit_, (s.window + 1) * window_ns_ - t, cost,
                                     reserve);
}

Decision FixedWindow::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [this](State& st, int64_t hits) {
    internal::ChargeWindowCount(st.count, limit_, hits);
  });
}

void FixedWindow::Refund(State& s, Timestamp at, Timestamp /*now*/, int64_t cost) const {
  if (cost <= 0 || cost > limit_) return;
  // A request counted in a window that has since been replaced was forgotten with it. (After a
  // clock step back a request is counted in the state's later window: not refunded, the strict
  // side.)
  if (FloorDiv(ToNanos(at), window_ns_) != s.window) return;
  internal::RefundWindowCount(s.count, limit_, cost);
}

Timestamp FixedWindow::ReplenishedAt(const State& s) const {
  return s.count == 0 ? internal::kLongAgo : FromNanos((s.window + 1) * window_ns_);
}

}  // namespace sluice
