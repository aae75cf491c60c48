// A circuit breaker for remote stores: after `failure_threshold` consecutive failures it opens,
// and for `open_for` every call is refused at once (a dead Redis costs nanoseconds, not a
// timeout per decision); then one probe is let through (half-open): success closes it, failure
// opens it again. Time is passed in. Thread-safe and lock-free.
#ifndef SLUICE_STORE_REDIS_CIRCUIT_BREAKER_H_
#define SLUICE_STORE_REDIS_CIRCUIT_BREAKER_H_

#include <atomic>
#include <cstdint>

#include "sluice/time.h"

namespace sluice::internal {

class CircuitBreaker {
 public:
  enum class State : int { kClosed, kOpen, kHalfOpen };

  struct Options {
    int failure_threshold = 5;
    Duration open_for = std::chrono::seconds(1);
  };

  explicit CircuitBreaker(Options options) : options_(options) {}

  // May this call go to the store? In the open state only the first caller after open_for
  // (the probe) gets true.
  bool Allow(Timestamp now) {
    State s = state_.load(std::memory_order_acquire);
    if (s == State::kClosed) return true;
    if (s == State::kHalfOpen) return false;  // a probe is in flight
    if (ToNanos(now) < open_until_ns_.load(std::memory_order_acquire)) return false;
    return state_.compare_exchange_strong(s, State::kHalfOpen, std::memory_order_acq_rel);
  }

  // True when this success closed the breaker (it was open or half-open): a state change to
  // report. On the hot path (closed, no failures) a load and a relaxed store.
  bool OnSuccess() {
    if (failures_.load(std::memory_order_relaxed) != 0)
      failures_.store(0, std::memory_order_relaxed);
    if (state_.load(std::memory_order_acquire) == State::kClosed) return false;
    return state_.exchange(State::kClosed, std::memory_order_acq_rel) != State::kClosed;
  }

  // True when this failure opened a closed breaker (a failed probe re-opening it is not news).
  bool OnFailure(Timestamp now) {
    const State s = state_.load(std::memory_order_acquire);
    const int failures = failures_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (s == State::kHalfOpen || (s == State::kClosed && failures >= options_.failure_threshold)) {
      open_until_ns_.store(ToNanos(now) + options_.open_for.count(), std::memory_order_release);
      return state_.exchange(State::kOpen, std::memory_order_acq_rel) == State::kClosed;
    }
    return false;
  }

  // Would Allow(now) refuse? A read only: it never starts a probe, so callers can skip the work
  // of building a request that would be refused anyway.
  bool Refuses(Timestamp now) const {
    const State s = state_.load(std::memory_order_acquire);
    if (s == State::kClosed) return false;
    if (s == State::kHalfOpen) return true;
    return ToNanos(now) < open_until_ns_.load(std::memory_order_acquire);
  }

  State state() const { return state_.load(std::memory_order_acquire); }

 private:
  const Options options_;
  std::atomic<State> state_{State::kClosed};
  std::atomic<int> failures_{0};
  std::atomic<int64_t> open_until_ns_{0};
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_CIRCUIT_BREAKER_H_
