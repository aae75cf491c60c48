#include "sluice/sliding_window_counter.h"

#include <algorithm>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"

namespace sluice {

using internal::FloorDiv;

Result<SlidingWindowCounter> SlidingWindowCounter::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kSlidingWindowCounter); !valid) {
    return std::unexpected(valid.error());
  }
  return SlidingWindowCounter(spec.limit, spec.period.count(), NeedsWideArithmetic(spec));
}

SlidingWindowCounter::State SlidingWindowCounter::Initial(Timestamp now) const {
  return State{FloorDiv(ToNanos(now), window_ns_), 0, 0};
}

Decision SlidingWindowCounter::Decide(State& s, Timestamp now, int64_t cost,
                                      int64_t reserve) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, limit_);
  const int64_t w = FloorDiv(t, window_ns_);
  if (w > s.window) {
    s.previous = (w == s.window + 1) ? s.current : 0;
    s.current = 0;
    s.window = w;
  }
  const int64_t free = cost > limit_ ? -1 : internal::FreeNeeded(cost, reserve, limit_);
  // The wide path out of line: the narrow one keeps its registers and code as before.
  if (wide_) [[unlikely]]
    return DecideWide(s, t, cost, free);
  return DecideAs<int64_t>(s, t, cost, free);
}

[[gnu::noinline]] Decision SlidingWindowCounter::DecideWide(State& s, int64_t t, int64_t cost,
                                                            int64_t free) const {
  return DecideAs<__int128>(s, t, cost, free);
}

template <typename Int>
Decision SlidingWindowCounter::DecideAs(State& s, int64_t t, int64_t cost, int64_t free) const {
  const int64_t D = window_ns_;
  // Offset into the state's window; clamped to 0 if the clock stepped back (full weight on
  // the previous window: the conservative reading).
  const int64_t offset = std::max<int64_t>(0, t - s.window * D);
  const int64_t behind = std::max<int64_t>(0, s.window * D - t);  // waits count from there
  const Int cur = s.current;
  const Int prev = s.previous;
  // All quantities below are hits * D: below 2^62 in int64 for a narrow spec (limit * D below
  // 2^60, counts at most twice the limit), below 2^98 in 128 bits for a wide one.
  const Int full = static_cast<Int>(limit_) * D;
  Int estimate = cur * D + prev * (D - offset);

  Decision d;
  d.limit = limit_;
  if (cost > limit_) {
    d = internal::Rejected(DecisionReason::kCostExceedsCapacity, limit_);
  } else if (free < 0) {
    d = internal::ShedForever(limit_);
  } else if (estimate + static_cast<Int>(free) * D <= full) {
    s.current = static_cast<uint32_t>(cur + cost);
    estimate += static_cast<Int>(cost) * D;
    d.allowed = true;
    d.reason = DecisionReason::kAdmitted;
  } else {
    d.reason = DecisionReason::kOverLimit;
    // Find the earliest offset at which current + previous * (D - offset) / D + free <= limit.
    const Int room_now = limit_ - free - cur;  // hits the previous window may still weigh
    if (room_now >= 0) {
      // prev > 0 here, else the request would have fit.
      const int64_t earliest = D - static_cast<int64_t>((room_now * D) / prev);
      d.retry_after = Duration(behind + earliest - offset);
    } else {
      // Not this window: in the next one `cur` becomes the previous window's count.
      const int64_t earliest_next =
          D - static_cast<int64_t>((static_cast<Int>(limit_ - free) * D) / cur);
      d.retry_after = Duration(behind + (D - offset) + earliest_next);
    }
  }
  d.remaining = static_cast<int64_t>(std::max<Int>(0, (full - estimate) / D));
  const int64_t window_end = s.window * D + D;
  if (s.current > 0) {
    d.reset_after = Duration(window_end + D - t);
  } else if (s.previous > 0) {
    d.reset_after = Duration(window_end - t);
  }
  return d;
}

Decision SlidingWindowCounter::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [this](State& st, int64_t hits) {
    // Counts are 32-bit: for limits above 2^31 the debt saturates at 2^32 - 1 hits.
    const int64_t most = std::min<int64_t>(2 * limit_, UINT32_MAX);
    const int64_t cur = st.current;
    st.current = static_cast<uint32_t>(std::max(cur, std::min(cur + hits, most)));
  });
}

void SlidingWindowCounter::Refund(State& s, Timestamp at, Timestamp /*now*/, int64_t cost) const {
  if (cost <= 0 || cost > limit_) return;
  const int64_t w = FloorDiv(ToNanos(at), window_ns_);
  const auto take = [cost](uint32_t& count) {
    count = static_cast<uint32_t>(std::max<int64_t>(0, int64_t{count} - cost));
  };
  if (w == s.window) {
    take(s.current);
  } else if (w + 1 == s.window) {
    take(s.previous);
  }
  // Older: its window no longer weighs in the estimate.
}

Timestamp SlidingWindowCounter::ReplenishedAt(const State& s) const {
  if (s.current > 0) return FromNanos((s.window + 2) * window_ns_);
  if (s.previous > 0) return FromNanos((s.window + 1) * window_ns_);
  return internal::kLongAgo;
}

}  // namespace sluice
