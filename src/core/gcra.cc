#include "sluice/gcra.h"

#include <algorithm>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"

namespace sluice {

using internal::CeilDiv;

Result<Gcra> Gcra::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kGcra); !valid) {
    return std::unexpected(valid.error());
  }
  const auto rate = internal::Reduce(spec.limit, spec.period.count());
  return Gcra(spec.Capacity(), rate.n, rate.d);
}

Gcra::Gcra(int64_t capacity, int64_t n, int64_t d)
    : capacity_(capacity),
      n_(n),
      d_(d),
      capacity_scaled_(static_cast<__int128>(capacity) * d),
      wide_(capacity_scaled_ >= internal::kMaxScaled) {}

Decision Gcra::Decide(State& s, Timestamp now, int64_t cost, int64_t reserve) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, capacity_);
  const int64_t free = cost > capacity_ ? -1 : internal::FreeNeeded(cost, reserve, capacity_);
  // The wide path out of line: the narrow one keeps its registers and code as before.
  if (wide_) [[unlikely]]
    return DecideWide(s, t, cost, free);
  return DecideAs<int64_t>(s, t, cost, free);
}

[[gnu::noinline]] Decision Gcra::DecideWide(State& s, int64_t t, int64_t cost, int64_t free) const {
  return DecideAs<__int128>(s, t, cost, free);
}

template <typename Int>
Decision Gcra::DecideAs(State& s, int64_t t, int64_t cost, int64_t free) const {
  const Int capacity_scaled = static_cast<Int>(capacity_scaled_);
  // backlog = max(TAT, now) - now, in units of 1/n ns. 128 bits: after a clock step backwards
  // (tat - t) * n may exceed 64 bits; in normal operation it is at most capacity_scaled.
  const __int128 ahead = static_cast<__int128>(s.tat_ns) - t;
  const __int128 backlog = ahead > 0 ? ahead * n_ + s.tat_frac : (ahead == 0 ? s.tat_frac : 0);

  Decision d;
  d.limit = capacity_;
  if (cost > capacity_) {
    d = internal::Rejected(DecisionReason::kCostExceedsCapacity, capacity_);
  } else if (free < 0) {
    d = internal::ShedForever(capacity_);
  } else {
    const Int need = static_cast<Int>(free) * d_;
    if (backlog + need <= capacity_scaled) {
      const Int after = static_cast<Int>(backlog) + static_cast<Int>(cost) * d_;
      // after / n_ is at most the fill time: within int64 nanoseconds.
      if (n_ == 1) {
        s.tat_ns = t + static_cast<int64_t>(after);
        s.tat_frac = 0;
      } else {
        s.tat_ns = t + static_cast<int64_t>(after / n_);
        s.tat_frac = static_cast<int64_t>(after % n_);
      }
      d.allowed = true;
      d.reason = DecisionReason::kAdmitted;
      d.remaining = static_cast<int64_t>((capacity_scaled - after) / d_);
      d.reset_after = Duration(static_cast<int64_t>(CeilDiv(after, n_)));
      return d;
    }
    d.reason = DecisionReason::kOverLimit;
    const __int128 excess = backlog + need - capacity_scaled;
    d.retry_after = Duration(static_cast<int64_t>((excess + n_ - 1) / n_));
  }
  d.remaining =
      backlog >= capacity_scaled ? 0 : static_cast<int64_t>((capacity_scaled - backlog) / d_);
  d.reset_after = Duration(static_cast<int64_t>((backlog + n_ - 1) / n_));
  return d;
}

Decision Gcra::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [&](State& st, int64_t hits) {
    const int64_t t = ToNanos(now);
    const __int128 ahead = static_cast<__int128>(st.tat_ns) - t;
    const __int128 backlog = ahead > 0 ? ahead * n_ + st.tat_frac : (ahead == 0 ? st.tat_frac : 0);
    // At most one capacity of debt; a backlog already beyond it (the clock stepped back) stays.
    const __int128 limit = 2 * capacity_scaled_;
    const __int128 after = std::min(limit, backlog + static_cast<__int128>(hits) * d_);
    if (after <= backlog) return;
    st.tat_ns = t + static_cast<int64_t>(after / n_);
    st.tat_frac = static_cast<int64_t>(after % n_);
  });
}

void Gcra::Refund(State& s, Timestamp /*at*/, Timestamp now, int64_t cost) const {
  if (cost <= 0 || cost > capacity_) return;
  const int64_t t = ToNanos(now);
  // The backlog ahead of now, as in Decide (128 bits for the same reason).
  const __int128 ahead = static_cast<__int128>(s.tat_ns) - t;
  const __int128 backlog = ahead > 0 ? ahead * n_ + s.tat_frac : (ahead == 0 ? s.tat_frac : 0);
  if (backlog == 0) return;  // nothing is owed: the bucket is full as of now
  const __int128 left = backlog - static_cast<__int128>(cost) * d_;
  if (left <= 0) {
    s.tat_ns = t;
    s.tat_frac = 0;
    return;
  }
  // left < backlog, so t + left/n stays below the old TAT: no overflow.
  s.tat_ns = t + static_cast<int64_t>(left / n_);
  s.tat_frac = static_cast<int64_t>(left % n_);
}

Timestamp Gcra::ReplenishedAt(const State& s) const {
  return FromNanos(s.tat_ns + (s.tat_frac > 0 ? 1 : 0));
}

int64_t Gcra::Used(const State& s, Timestamp now) const {
  const __int128 ahead = static_cast<__int128>(s.tat_ns) - ToNanos(now);
  const __int128 backlog = ahead > 0 ? ahead * n_ + s.tat_frac : (ahead == 0 ? s.tat_frac : 0);
  // Beyond two capacities only after the clock stepped back: read as the most a key holds.
  const __int128 most = 2 * capacity_scaled_;
  return static_cast<int64_t>(CeilDiv(std::min(backlog, most), d_));
}

}  // namespace sluice
