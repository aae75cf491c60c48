#include "sluice/token_bucket.h"

#include <algorithm>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"

namespace sluice {

using internal::CeilDiv;

template <bool kWide>
Result<BasicTokenBucket<kWide>> BasicTokenBucket<kWide>::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kTokenBucket); !valid) {
    return std::unexpected(valid.error());
  }
  if (!kWide && NeedsWideArithmetic(spec)) {
    return MakeError(DescribeLimitSpec(spec) + " needs 128-bit arithmetic: use WideTokenBucket");
  }
  const auto rate = internal::Reduce(spec.limit, spec.period.count());
  return BasicTokenBucket(spec.Capacity(), rate.n, rate.d);
}

template <bool kWide>
BasicTokenBucket<kWide>::BasicTokenBucket(int64_t capacity, int64_t n, int64_t d)
    : capacity_(capacity),
      n_(n),
      d_(d),
      capacity_scaled_(static_cast<Scaled>(capacity) * d),
      fill_ns_(static_cast<int64_t>(CeilDiv(capacity_scaled_, n))) {}

template <bool kWide>
void BasicTokenBucket<kWide>::Refill(State& s, int64_t t) const {
  if (t <= s.last_ns) return;
  const int64_t elapsed = t - s.last_ns;
  // A bucket in debt (tokens < 0, after a Charge) needs up to twice the fill time. Below those
  // bounds elapsed * n_ stays below 2 * capacity_scaled_ + 2 * n_: no overflow (in 64 bits
  // below 2^63 for a narrow spec, whose capacity_scaled_ is below 2^61; in 128 bits always).
  const bool full = elapsed >= 2 * fill_ns_ || (elapsed >= fill_ns_ && s.scaled_tokens >= 0);
  s.scaled_tokens =
      full ? capacity_scaled_
           : internal::MinOf<Scaled>(capacity_scaled_,
                                     s.scaled_tokens + static_cast<Scaled>(elapsed) * n_);
  s.last_ns = t;
}

template <bool kWide>
Decision BasicTokenBucket<kWide>::Decide(State& s, Timestamp now, int64_t cost,
                                         int64_t reserve) const {
  const int64_t t = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, capacity_);
  Refill(s, t);
  // If time went backwards the state is ahead of `t`; waits are measured from the state's time.
  const int64_t behind = s.last_ns - t;
  Decision d;
  d.limit = capacity_;
  const int64_t free = cost > capacity_ ? -1 : internal::FreeNeeded(cost, reserve, capacity_);
  if (cost > capacity_) {
    d = internal::Rejected(DecisionReason::kCostExceedsCapacity, capacity_);
  } else if (free < 0) {
    d = internal::ShedForever(capacity_);
  } else {
    const Scaled need = static_cast<Scaled>(free) * d_;
    if (s.scaled_tokens >= need) {
      s.scaled_tokens -= static_cast<Scaled>(cost) * d_;
      d.allowed = true;
      d.reason = DecisionReason::kAdmitted;
    } else {
      d.reason = DecisionReason::kOverLimit;
      // At most two fill times (from one capacity of debt): within int64 nanoseconds.
      d.retry_after = Duration(behind + static_cast<int64_t>(CeilDiv(need - s.scaled_tokens, n_)));
    }
  }
  d.remaining = static_cast<int64_t>(internal::MaxOf<Scaled>(0, s.scaled_tokens / d_));
  d.reset_after =
      Duration(behind + static_cast<int64_t>(CeilDiv(capacity_scaled_ - s.scaled_tokens, n_)));
  return d;
}

template <bool kWide>
Decision BasicTokenBucket<kWide>::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [this](State& st, int64_t hits) {
    st.scaled_tokens = internal::MaxOf<Scaled>(-capacity_scaled_,
                                               st.scaled_tokens - static_cast<Scaled>(hits) * d_);
  });
}

template <bool kWide>
void BasicTokenBucket<kWide>::Refund(State& s, Timestamp /*at*/, Timestamp now,
                                     int64_t cost) const {
  if (cost <= 0 || cost > capacity_) return;
  // Brought up to date first, as Decide does (the order does not matter: refilling and
  // returning are both additions capped at B), so the result is the bucket as of `now`.
  Refill(s, ToNanos(now));
  s.scaled_tokens =
      internal::MinOf<Scaled>(capacity_scaled_, s.scaled_tokens + static_cast<Scaled>(cost) * d_);
}

template <bool kWide>
Timestamp BasicTokenBucket<kWide>::ReplenishedAt(const State& s) const {
  return FromNanos(s.last_ns +
                   static_cast<int64_t>(CeilDiv(capacity_scaled_ - s.scaled_tokens, n_)));
}

template <bool kWide>
int64_t BasicTokenBucket<kWide>::Used(const State& state, Timestamp now) const {
  State s = state;
  Refill(s, ToNanos(now));
  // Tokens lie in [-B, B]: the deficit is at most 2 * B * d, its quotient at most 2 * B.
  return static_cast<int64_t>(CeilDiv(capacity_scaled_ - s.scaled_tokens, d_));
}

template class BasicTokenBucket<false>;
template class BasicTokenBucket<true>;

}  // namespace sluice
