// Sliding window log: exact. Admit iff the admitted cost in (t - D, t] plus cost <= limit.
//
// Each admitted hit is one 4-byte timestamp: a 32-bit count of quanta, where the quantum is the
// finest of 1ns, 10ns, ..., 1s that divides D and keeps D below 2^31 quanta (1ns for D <= 2.1s,
// 100ns for 1m, 10us for 1h, 100us for 1d). Decisions are exact for traffic whose timestamps are
// multiples of the quantum (millisecond traces always are, for D <= 24 days). Memory is
// 4 bytes per hit in the window, at most 4 * limit per key (8 * limit while a Charge holds the
// key in debt).
#ifndef SLUICE_SLIDING_WINDOW_LOG_H_
#define SLUICE_SLIDING_WINDOW_LOG_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/status.h"

namespace sluice {

// A growable ring of 32-bit stamps; grows by doubling, frees its buffer when emptied.
class StampRing {
 public:
  StampRing() = default;
  StampRing(const StampRing& other);
  StampRing& operator=(const StampRing& other);
  StampRing(StampRing&&) noexcept = default;
  StampRing& operator=(StampRing&&) noexcept = default;

  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t at(uint32_t i) const { return buf_[(head_ + i) & (cap_ - 1)]; }
  uint32_t front() const { return at(0); }
  uint32_t back() const { return at(size_ - 1); }
  void PopFront();
  // Removes `count` stamps from index `first` on (first + count <= size()), shifting the newer
  // ones down: a refund usually removes among the newest, so little moves.
  void Erase(uint32_t first, uint32_t count);
  void PushBack(uint32_t stamp, uint32_t copies);
  void Clear();
  size_t HeapBytes() const { return size_t{cap_} * sizeof(uint32_t); }

 private:
  void Grow(uint32_t min_cap);
  uint32_t& slot(uint32_t i) { return buf_[(head_ + i) & (cap_ - 1)]; }

  std::unique_ptr<uint32_t[]> buf_;
  uint32_t head_ = 0;
  uint32_t size_ = 0;
  uint32_t cap_ = 0;  // 0 or a power of two
};

class SlidingWindowLog {
 public:
  struct State {
    int64_t last_ns = 0;  // latest time seen; bounds the age of every stamp below 2 * D
    StampRing stamps;     // admitted hits, oldest first
  };

  static Result<SlidingWindowLog> Create(const LimitSpec& spec);

  State Initial(Timestamp now) const { return State{ToNanos(now), {}}; }
  // `reserve` (priority shedding, LimitCheck::reserve): hits that must still be free after the
  // admission. Admitted only if cost + reserve would have been; takes only `cost`. Refused for
  // the reserve alone: kOverLimit, retry_after when cost + reserve fits (kNever if it never can).
  Decision Decide(State& state, Timestamp now, int64_t cost, int64_t reserve = 0) const;
  // Charges `cost` for work already done: Decide's verdict, but the cost is taken even when it
  // does not fit, into debt of at most one capacity (src/core/charge.h; docs/algorithms.md,
  // "Charges and debt").
  Decision Charge(State& state, Timestamp now, int64_t cost) const;
  // Gives back `cost` an admitted Decide(state, at, cost) took: removes `cost` stamps, the oldest
  // that are not older than `at` -- exactly the request's own when time did not step back
  // (equal stamps are interchangeable), older ones otherwise (the stricter side). Nothing if
  // `at` has left the window or fewer than `cost` stamps remain from it.
  void Refund(State& state, Timestamp at, Timestamp now, int64_t cost) const;
  Timestamp ReplenishedAt(const State& state) const;
  static size_t HeapBytes(const State& state) { return state.stamps.HeapBytes(); }
  int64_t capacity() const { return limit_; }
  int64_t quantum_ns() const { return quantum_ns_; }
  // The heap of a full window's stamps, ring rounded up: what one key holds at most, except while
  // a Charge keeps it in debt (up to twice that; the memory store counts it as it grows).
  size_t MaxHeapBytes() const;

 private:
  SlidingWindowLog(int64_t limit, int64_t window_ns, int64_t quantum_ns)
      : limit_(limit),
        window_ns_(window_ns),
        quantum_ns_(quantum_ns),
        window_quanta_(window_ns / quantum_ns) {}

  int64_t limit_;
  int64_t window_ns_;
  int64_t quantum_ns_;
  int64_t window_quanta_;
};

// The quantum SlidingWindowLog uses for a window, or 0 when no decimal quantum fits.
int64_t SlidingWindowLogQuantum(Duration window);

}  // namespace sluice

#endif  // SLUICE_SLIDING_WINDOW_LOG_H_
