#include "sluice/sliding_window_log.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/arith.h"
#include "core/charge.h"
#include "core/validate.h"

namespace sluice {

using internal::FloorDiv;

StampRing::StampRing(const StampRing& other) { *this = other; }

StampRing& StampRing::operator=(const StampRing& other) {
  if (this == &other) return *this;
  Clear();
  if (other.size_ > 0) {
    Grow(other.size_);
    for (uint32_t i = 0; i < other.size_; ++i) buf_[i] = other.at(i);
    size_ = other.size_;
  }
  return *this;
}

void StampRing::Grow(uint32_t min_cap) {
  uint32_t cap = cap_ == 0 ? 4 : cap_;
  while (cap < min_cap) cap *= 2;
  if (cap == cap_) return;
  auto buf = std::make_unique<uint32_t[]>(cap);
  for (uint32_t i = 0; i < size_; ++i) buf[i] = at(i);
  buf_ = std::move(buf);
  head_ = 0;
  cap_ = cap;
}

void StampRing::PushBack(uint32_t stamp, uint32_t copies) {
  if (size_ + copies > cap_) Grow(size_ + copies);
  for (uint32_t i = 0; i < copies; ++i) buf_[(head_ + size_ + i) & (cap_ - 1)] = stamp;
  size_ += copies;
}

void StampRing::PopFront() {
  head_ = (head_ + 1) & (cap_ - 1);
  if (--size_ == 0) Clear();
}

void StampRing::Erase(uint32_t first, uint32_t count) {
  for (uint32_t i = first; i + count < size_; ++i) slot(i) = slot(i + count);
  size_ -= count;
  if (size_ == 0) Clear();
}

void StampRing::Clear() {
  buf_.reset();
  head_ = size_ = cap_ = 0;
}

int64_t SlidingWindowLogQuantum(Duration window) {
  const int64_t d = window.count();
  for (int64_t q = 1; q <= 1'000'000'000; q *= 10) {
    if (d % q == 0 && d / q < (int64_t{1} << 31)) return q;
  }
  return 0;
}

Result<SlidingWindowLog> SlidingWindowLog::Create(const LimitSpec& spec) {
  if (auto valid = internal::ValidateLimitSpecFor(spec, Algorithm::kSlidingWindowLog); !valid) {
    return std::unexpected(valid.error());
  }
  return SlidingWindowLog(spec.limit, spec.period.count(), SlidingWindowLogQuantum(spec.period));
}

Decision SlidingWindowLog::Decide(State& s, Timestamp now, int64_t cost, int64_t reserve) const {
  const int64_t t_in = ToNanos(now);
  if (cost < 0) return internal::Rejected(DecisionReason::kInvalidRequest, limit_);
  // Never evaluate before the latest time seen: stamps are only comparable going forwards.
  const int64_t t = std::max(t_in, s.last_ns);
  const int64_t behind = t - t_in;
  if (t - s.last_ns >= window_ns_) s.stamps.Clear();
  s.last_ns = t;

  const int64_t T = FloorDiv(t, quantum_ns_);
  const auto T32 = static_cast<uint32_t>(T);
  const auto W = static_cast<uint32_t>(window_quanta_);
  // Every stamp is younger than 2*W < 2^32 quanta, so the wrapping difference is its true age.
  while (!s.stamps.empty() && static_cast<uint32_t>(T32 - s.stamps.front()) >= W) {
    s.stamps.PopFront();
  }
  // The instant a stamp of the given age leaves (t-D, t].
  auto leaves_after = [&](uint32_t stamp) {
    const int64_t age = static_cast<uint32_t>(T32 - stamp);
    return Duration(behind + (T - age + W) * quantum_ns_ - t);
  };

  Decision d;
  d.limit = limit_;
  const int64_t count = s.stamps.size();
  const int64_t free = cost > limit_ ? -1 : internal::FreeNeeded(cost, reserve, limit_);
  if (cost > limit_) {
    d = internal::Rejected(DecisionReason::kCostExceedsCapacity, limit_);
  } else if (free < 0) {
    d = internal::ShedForever(limit_);
  } else if (count + free <= limit_) {
    s.stamps.PushBack(T32, static_cast<uint32_t>(cost));
    d.allowed = true;
    d.reason = DecisionReason::kAdmitted;
  } else {
    d.reason = DecisionReason::kOverLimit;
    // The oldest (count + free - limit) hits must leave first.
    d.retry_after = leaves_after(s.stamps.at(static_cast<uint32_t>(count + free - limit_ - 1)));
  }
  d.remaining = std::max<int64_t>(0, limit_ - int64_t{s.stamps.size()});
  if (!s.stamps.empty()) d.reset_after = leaves_after(s.stamps.back());
  return d;
}

Decision SlidingWindowLog::Charge(State& s, Timestamp now, int64_t cost) const {
  return internal::ChargeBeyondLimit(*this, s, now, cost, [this](State& st, int64_t hits) {
    // Stamped at the state's time, as Decide stamps (it never evaluates before it).
    const int64_t room = 2 * limit_ - int64_t{st.stamps.size()};
    if (room <= 0) return;
    const auto stamp = static_cast<uint32_t>(FloorDiv(st.last_ns, quantum_ns_));
    st.stamps.PushBack(stamp, static_cast<uint32_t>(std::min(hits, room)));
  });
}

void SlidingWindowLog::Refund(State& s, Timestamp at, Timestamp /*now*/, int64_t cost) const {
  if (cost <= 0 || cost > limit_ || s.stamps.size() < cost) return;
  const int64_t t_at = ToNanos(at);
  if (t_at > s.last_ns) return;  // the state never decided at `at`: not this request's log
  // Ages are measured from the state's own time, where every kept stamp is younger than W.
  const int64_t T = FloorDiv(s.last_ns, quantum_ns_);
  const int64_t oldest = T - FloorDiv(t_at, quantum_ns_);  // the age of a stamp taken at `at`
  if (oldest >= window_quanta_) return;                    // left the window: already uncounted
  const auto T32 = static_cast<uint32_t>(T);
  // The request was stamped at max(at, the state's time then) >= at. Stamps are in time order,
  // so its hits lie among those not older than `at`, at the back; removing the first `cost` of
  // those takes the request's own (equal stamps are interchangeable) or, if the clock stepped
  // back meanwhile, older ones -- which leaves the log stricter, never looser.
  uint32_t first = s.stamps.size();
  while (first > 0 && static_cast<uint32_t>(T32 - s.stamps.at(first - 1)) <= oldest) --first;
  if (s.stamps.size() - first < cost) return;  // its hits are gone (the key was reset)
  s.stamps.Erase(first, static_cast<uint32_t>(cost));
}

size_t SlidingWindowLog::MaxHeapBytes() const {
  return std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(limit_, 4))) * sizeof(uint32_t);
}

Timestamp SlidingWindowLog::ReplenishedAt(const State& s) const {
  if (s.stamps.empty()) return internal::kLongAgo;
  const int64_t T = FloorDiv(s.last_ns, quantum_ns_);
  const int64_t age = static_cast<uint32_t>(static_cast<uint32_t>(T) - s.stamps.back());
  return FromNanos((T - age + window_quanta_) * quantum_ns_);
}

}  // namespace sluice
