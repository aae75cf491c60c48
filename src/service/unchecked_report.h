// What the service tells an operator about descriptors it answered without a check (past the
// bounds, service/check_rules.h): every one is counted in sluice_descriptors_unchecked_total,
// and a warning goes to a hook (sluiced logs it) at most once per interval of the service's
// Clock, saying how many went unchecked since the last warning. A client sending oversized
// requests all day must not flood the log, and must not go unnoticed either.
//
//   UncheckedReport report(&metrics, warn, clock);
//   UncheckedCounts counts;
//   counts.Add(Unchecked::kKeyTooLong);       // per descriptor, while preparing a check
//   report.Record(counts);                    // once per request
#ifndef SLUICE_SERVICE_UNCHECKED_REPORT_H_
#define SLUICE_SERVICE_UNCHECKED_REPORT_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "metrics/metrics.h"
#include "service/check_rules.h"
#include "sluice/clock.h"

namespace sluice::server {

// One request's unchecked descriptors, by reason.
struct UncheckedCounts {
  // kPastMaxDescriptors, kTooManyEntries, kKeyTooLong, kConcurrency
  std::array<uint64_t, 4> by_reason{};
  void Add(Unchecked reason) {
    if (reason != Unchecked::kNo) ++by_reason[static_cast<size_t>(reason) - 1];
  }
  bool any() const { return by_reason[0] + by_reason[1] + by_reason[2] + by_reason[3] != 0; }
};

class UncheckedReport {
 public:
  using Warn = std::function<void(const std::string&)>;
  static constexpr Duration kWarnEvery = std::chrono::seconds(10);

  // `metrics` and `warn` may be null; `clock` must outlive the report.
  UncheckedReport(Metrics* metrics, Warn warn, const Clock* clock)
      : metrics_(metrics), warn_(std::move(warn)), clock_(clock) {}

  // Thread-safe. A no-op for counts with none.
  void Record(const UncheckedCounts& counts);

 private:
  Metrics* const metrics_;
  const Warn warn_;
  const Clock* const clock_;
  std::mutex mu_;  // guards the fields below; taken only for a request with unchecked ones
  std::array<uint64_t, 3> since_warning_{};  // the bounds only: a concurrency skip is by design
  bool warned_ = false;
  Timestamp last_warning_{};
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_UNCHECKED_REPORT_H_
