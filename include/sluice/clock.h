// Clock: the only source of "now" above the pure algorithms.
//
//   MonotonicClock clock;            // production: never goes backwards
//   ManualClock test_clock(FromNanos(0));
//   test_clock.Advance(std::chrono::seconds(10));
//
// Both are thread-safe.
#ifndef SLUICE_CLOCK_H_
#define SLUICE_CLOCK_H_

#include <atomic>

#include "sluice/time.h"

namespace sluice {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Timestamp Now() const = 0;
};

// Wall-clock anchored, monotonic: reads the system clock once at construction and advances with
// the steady clock afterwards. Fixed windows therefore line up with calendar seconds/minutes, yet
// an NTP step never moves time backwards (which would otherwise refund or double-charge quota).
class MonotonicClock final : public Clock {
 public:
  MonotonicClock();
  Timestamp Now() const override;

 private:
  std::chrono::steady_clock::time_point steady_origin_;
  Timestamp wall_origin_;
};

// A clock that moves only when told to. For tests and for replaying traces.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Timestamp start = Timestamp{}) : now_ns_(ToNanos(start)) {}
  Timestamp Now() const override { return FromNanos(now_ns_.load(std::memory_order_acquire)); }
  void Set(Timestamp t) { now_ns_.store(ToNanos(t), std::memory_order_release); }
  void Advance(Duration d) { now_ns_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace sluice

#endif  // SLUICE_CLOCK_H_
