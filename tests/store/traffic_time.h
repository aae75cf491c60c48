// The time of the store suite's generated traffic (TrafficTime), shared by its test files.
#ifndef SLUICE_TESTS_STORE_TRAFFIC_TIME_H_
#define SLUICE_TESTS_STORE_TRAFFIC_TIME_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/store.h"
#include "sluice/time.h"
#include "store/store_suite.h"

namespace sluice::testing {

// The time of generated traffic: the sum of its gaps, each rounded up to the grain. For a store
// whose keys expire by its own clock whatever time it is given (Redis: a key's TTL is the time
// its counter takes to replenish), a gap is never less than twice the real time since the last
// one, so that a key that expired in real time has also replenished in the traffic's.
//
// That margin is set before the request is made, so it cannot cover the request itself: a key
// written by the previous request may be read, late in a slow request (a multi-slot DecideAll
// on a loaded machine), after its TTL ran out in real time though not in the traffic's -- the
// store then decides from a fresh state the pure algorithm does not have. Outran() says when
// that may have happened (a test that calls it then stops comparing and resynchronises).
class TrafficTime {
 public:
  TrafficTime(int64_t start_ns, int64_t grain_ns)
      : t_ns_(start_ns),
        grain_ns_(grain_ns),
        keep_up_(StoreSuite::GetParam().expires_by_its_own_clock),
        last_(std::chrono::steady_clock::now()),
        previous_(last_) {}

  Timestamp Advance(int64_t gap_ns) {
    previous_t_ns_ = t_ns_;
    if (keep_up_) {
      const auto real = std::chrono::steady_clock::now();
      gap_ns = std::max<int64_t>(gap_ns, 2 * Nanos(real - last_));
      previous_ = last_;
      last_ = real;
    }
    t_ns_ += (gap_ns + grain_ns_ - 1) / grain_ns_ * grain_ns_;
    return FromNanos(t_ns_);
  }

  // Advance, then the store's background work due by then (StoreSuite::RunDue). That work -- a
  // batched store's syncs, each a Redis round trip -- delays the request that follows in real
  // time but not in the traffic's: the traffic's time then moves on by twice what it took, as
  // Advance would have, so that the request is no less ahead of real time than the syncs were,
  // and the work due by that new time runs too (the store learns the request's time: no sync
  // may come before it).
  Timestamp Advance(int64_t gap_ns, Store& store) {
    const Timestamp t = Advance(gap_ns);
    StoreSuite::RunDue(store, t);
    if (!keep_up_ || !StoreSuite::GetParam().run_due) return t;
    const auto real = std::chrono::steady_clock::now();
    const int64_t took =
        2 * std::chrono::duration_cast<std::chrono::nanoseconds>(real - last_).count();
    last_ = real;
    t_ns_ += (took + grain_ns_ - 1) / grain_ns_ * grain_ns_;
    StoreSuite::RunDue(store, FromNanos(t_ns_));
    return FromNanos(t_ns_);
  }

  // After a request's calls returned: whether more real time passed from the previous request's
  // start to now than traffic time between the two, so that a key the previous request wrote
  // (or an earlier one: traffic time runs at least twice as fast as real time between requests)
  // may have expired in real time while it had not replenished in the traffic's.
  bool Outran() const {
    return keep_up_ && Nanos(std::chrono::steady_clock::now() - previous_) > t_ns_ - previous_t_ns_;
  }

  // For a test that follows keys one request at a time: the name `key` goes by now. After a
  // request that outran, Renew() moves the test on to new names, fresh in the store and in the
  // oracle alike, rather than comparing a state that may have expired with one that has not.
  std::string Key(std::string_view key) const {
    return epoch_ == 0 ? std::string(key) : std::string(key) + "~" + std::to_string(epoch_);
  }
  // After a request's calls returned: whether it outran (then it is not compared, and the keys
  // are renewed).
  bool Renew() {
    if (!Outran()) return false;
    ++epoch_;
    return true;
  }
  int renewals() const { return epoch_; }

 private:
  static int64_t Nanos(std::chrono::steady_clock::duration d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  }

  int64_t t_ns_;
  int64_t previous_t_ns_ = t_ns_;
  const int64_t grain_ns_;
  const bool keep_up_;
  std::chrono::steady_clock::time_point last_;      // when the last Advance was called
  std::chrono::steady_clock::time_point previous_;  // ... and the one before it
  int epoch_ = 0;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_STORE_TRAFFIC_TIME_H_
