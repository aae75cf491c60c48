#include "sluice/fixed_window.h"

#include <algorithm>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"

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

Decision FixedWindow::Decide(State& s, Timestamp now, int64_t cost) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, limit_);
  const int64_t w = FloorDiv(t, window_ns_);
  if (w > s.window) {
    s.window = w;
    s.count = 0;
  }
  // After a clock step backwards s.window may be ahead of w; the state's window still applies.
  const int64_t until_next = (s.window + 1) * window_ns_ - t;
  Decision d;
  d.limit = limit_;
  if (cost > limit_) {
    d = internal::Rejected(DecisionReason::kCostExceedsCapacity, limit_);
  } else if (s.count + cost <= limit_) {
    s.count += cost;
    d.allowed = true;
    d.reason = DecisionReason::kAdmitted;
  } else {
    d.reason = DecisionReason::kOverLimit;
    d.retry_after = Duration(until_next);
  }
  d.remaining = std::max<int64_t>(0, limit_ - s.count);
  // A surplus (a negative count: an admin credit beyond the limit) also ends with the window.
  d.reset_after = Duration(s.count != 0 ? until_next : 0);
  return d;
}

Decision FixedWindow::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [this](State& st, int64_t hits) {
    st.count = std::max(st.count, std::min(st.count + hits, 2 * limit_));
  });
}

void FixedWindow::Refund(State& s, Timestamp at, Timestamp /*now*/, int64_t cost) const {
  if (cost <= 0 || cost > limit_) return;
  // A request counted in a window that has since been replaced was forgotten with it. (After a
  // clock step back a request is counted in the state's later window: not refunded, the strict
  // side.)
  if (FloorDiv(ToNanos(at), window_ns_) != s.window) return;
  // Into a surplus (a negative count) only if the admission was taken from one.
  s.count = std::max<int64_t>(s.count < 0 ? -limit_ : 0, s.count - cost);
}

Timestamp FixedWindow::ReplenishedAt(const State& s) const {
  return s.count == 0 ? internal::kLongAgo : FromNanos((s.window + 1) * window_ns_);
}

}  // namespace sluice
