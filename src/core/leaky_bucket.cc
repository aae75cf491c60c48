#include "sluice/leaky_bucket.h"

#include <algorithm>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"

namespace sluice {

using internal::CeilDiv;

template <bool kWide>
Result<BasicLeakyBucket<kWide>> BasicLeakyBucket<kWide>::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kLeakyBucket); !valid) {
    return std::unexpected(valid.error());
  }
  if (!kWide && NeedsWideArithmetic(spec)) {
    return MakeError(DescribeLimitSpec(spec) + " needs 128-bit arithmetic: use WideLeakyBucket");
  }
  const auto rate = internal::Reduce(spec.limit, spec.period.count());
  const int64_t max_delay_ns = spec.HasMaxDelay() ? spec.max_delay.count() : kUnbounded;
  return BasicLeakyBucket(spec.Capacity(), rate.n, rate.d, spec.shaper, max_delay_ns);
}

template <bool kWide>
BasicLeakyBucket<kWide>::BasicLeakyBucket(int64_t capacity, int64_t n, int64_t d, bool shaper,
                                          int64_t max_delay_ns)
    : capacity_(capacity),
      n_(n),
      d_(d),
      capacity_scaled_(static_cast<Scaled>(capacity) * d),
      drain_ns_(static_cast<int64_t>(CeilDiv(capacity_scaled_, n))),
      max_delay_ns_(max_delay_ns),
      shaper_(shaper) {}

template <bool kWide>
void BasicLeakyBucket<kWide>::Drain(State& s, int64_t t) const {
  if (t <= s.last_ns) return;
  const int64_t elapsed = t - s.last_ns;
  // A bucket over its capacity (after a Charge) needs up to twice the drain time. Below those
  // bounds elapsed * n_ stays below 2 * capacity_scaled_ + 2 * n_: no overflow (64 bits for a
  // narrow spec, 128 always).
  const bool empty =
      elapsed >= 2 * drain_ns_ || (elapsed >= drain_ns_ && s.scaled_level <= capacity_scaled_);
  s.scaled_level =
      empty ? 0 : internal::MaxOf<Scaled>(0, s.scaled_level - static_cast<Scaled>(elapsed) * n_);
  s.last_ns = t;
}

template <bool kWide>
Decision BasicLeakyBucket<kWide>::Decide(State& s, Timestamp now, int64_t cost,
                                         int64_t reserve) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, capacity_);
  Drain(s, t);
  const int64_t behind = s.last_ns - t;
  // Times below are at most two drain times (one capacity of debt): within int64 nanoseconds.
  const auto ns = [this](Scaled scaled) { return static_cast<int64_t>(CeilDiv(scaled, n_)); };
  Decision d;
  d.limit = capacity_;
  const int64_t free = cost > capacity_ ? -1 : internal::FreeNeeded(cost, reserve, capacity_);
  if (cost > capacity_) {
    d = internal::Rejected(DecisionReason::kCostExceedsCapacity, capacity_);
  } else if (free < 0) {
    d = internal::ShedForever(capacity_);
  } else {
    const Scaled need = static_cast<Scaled>(free) * d_;
    // A shaper's request waits for the queue ahead of it to drain.
    const int64_t wait = behind + ns(s.scaled_level);
    const bool fits = s.scaled_level + need <= capacity_scaled_;
    if (fits && (!shaper_ || wait <= max_delay_ns_)) {
      if (shaper_) d.delay = Duration(wait);
      s.scaled_level += static_cast<Scaled>(cost) * d_;
      d.allowed = true;
      d.reason = DecisionReason::kAdmitted;
    } else {
      d.reason = DecisionReason::kOverLimit;
      int64_t retry = fits ? 0 : behind + ns(s.scaled_level + need - capacity_scaled_);
      // Over max_delay: it passes once the wait has drained down to max_delay.
      if (shaper_ && wait > max_delay_ns_) retry = std::max(retry, wait - max_delay_ns_);
      d.retry_after = Duration(retry);
    }
  }
  d.remaining =
      static_cast<int64_t>(internal::MaxOf<Scaled>(0, (capacity_scaled_ - s.scaled_level) / d_));
  d.reset_after = Duration(behind + ns(s.scaled_level));
  return d;
}

template <bool kWide>
Decision BasicLeakyBucket<kWide>::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [this](State& st, int64_t hits) {
    st.scaled_level = internal::MinOf<Scaled>(2 * capacity_scaled_,
                                              st.scaled_level + static_cast<Scaled>(hits) * d_);
  });
}

template <bool kWide>
void BasicLeakyBucket<kWide>::Refund(State& s, Timestamp /*at*/, Timestamp now,
                                     int64_t cost) const {
  if (cost <= 0 || cost > capacity_) return;
  Drain(s, ToNanos(now));
  s.scaled_level = internal::MaxOf<Scaled>(0, s.scaled_level - static_cast<Scaled>(cost) * d_);
}

template <bool kWide>
Timestamp BasicLeakyBucket<kWide>::ReplenishedAt(const State& s) const {
  return FromNanos(s.last_ns + static_cast<int64_t>(CeilDiv(s.scaled_level, n_)));
}

template <bool kWide>
int64_t BasicLeakyBucket<kWide>::Used(const State& state, Timestamp now) const {
  State s = state;
  Drain(s, ToNanos(now));
  return static_cast<int64_t>(CeilDiv(s.scaled_level, d_));  // level <= 2 * B * d
}

template class BasicLeakyBucket<false>;
template class BasicLeakyBucket<true>;

}  // namespace sluice
