// Per-client views of each limit without a series per client (docs/server.md, "Usage views"):
// over a rolling period, how many distinct identities a limit saw, how many came near it
// (used >= near_limit_ratio of the limit after a decision that passed), went over it
// (enforced) or would have (shadow and soft), and the distribution over identities of their
// peak usage: the most of the limit each one held after any decision of the period, in
// requests (the limit's units).
//
//   UsageViews views({.period = std::chrono::hours(1), .clock = &clock});
//   views.Record("api", "per_key", "key_1", now, /*capacity=*/100, /*used=*/42,
//                UsageOutcome::kAllowed);
//   Result<UsageReport> r = views.Report("api", "per_key");
//
// The period is kept in kBuckets buckets that rotate as time (the injected Clock's, and the
// decisions' own timestamps) passes, so a view covers the last period to within one bucket.
// Distinct counts are HyperLogLog sketches (hyperloglog.h: 2.3% relative standard error), one
// per state and bucket; the period's count is their union. Peaks are kept for a sample of the
// identities chosen by their hash (every identity while few, then a half, a quarter, ... as
// the tables fill), so percentiles are those of a uniform sample of at least a few hundred
// identities; max is the sample's.
//
// Memory: each tracked limit takes BytesPerLimit(); limits past max_bytes / BytesPerLimit()
// are not tracked (Report says so). Nothing grows with the number of identities.
//
// Thread-safe. Record() is the hot path: a hash of the identity, a lock-free lookup of the
// limit, a few relaxed atomic loads, and a lock of one of eight stripes only when an
// identity's peak grows.
#ifndef SLUICE_METRICS_USAGE_VIEWS_H_
#define SLUICE_METRICS_USAGE_VIEWS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::server {

enum class UsageOutcome {
  kAllowed,     // passed (an enforced or observed limit with room)
  kOver,        // refused by an enforced limit
  kShadowOver,  // a shadow or soft limit would have refused it
  kUnknown,     // degraded (the store failed): counted as seen, nothing else known
};

struct UsageOptions {
  Duration period = std::chrono::hours(1);
  double near_limit_ratio = 0.9;  // in (0, 1]
  size_t max_bytes = size_t{32} << 20;
  const Clock* clock = nullptr;  // required: Report() and Identities() read the time from it
};

struct UsagePercentiles {
  int64_t p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

struct UsageReport {
  Duration period{0};
  uint64_t identities = 0;  // distinct identities seen in the period (estimated)
  UsagePercentiles peaks;   // of the identities' peak usage, in requests per window
  size_t sampled = 0;       // identities the percentiles were read from
};

// One limit's distinct identities by state, for sluice_limit_identities.
struct IdentityCounts {
  std::string domain;
  std::string limit;
  uint64_t seen = 0, near = 0, over = 0, shadow_over = 0;
};

class UsageViews {
 public:
  static constexpr int kBuckets = 6;
  static constexpr int kStripes = 8;
  static constexpr int kSlotsPerStripe = 128;

  explicit UsageViews(const UsageOptions& options);
  ~UsageViews();
  UsageViews(const UsageViews&) = delete;
  UsageViews& operator=(const UsageViews&) = delete;

  // One decision of one limit (`limit`: its metric name) for `identity`, taken at `now`:
  // `used` of its `capacity` are taken after it (capacity - remaining).
  void Record(std::string_view domain, std::string_view limit, std::string_view identity,
              Timestamp now, int64_t capacity, int64_t used, UsageOutcome outcome);

  // The period's view of one limit. A limit with no decision yet reports zeros; an error if
  // the limit had decisions but the memory bound left no room to track it.
  Result<UsageReport> Report(std::string_view domain, std::string_view limit) const;

  // Every tracked limit's distinct identities by state, over the period.
  std::vector<IdentityCounts> Identities() const;

  Duration period() const { return options_.period; }
  double near_limit_ratio() const { return options_.near_limit_ratio; }
  // The memory one tracked limit takes, and how many limits max_bytes tracks.
  static size_t BytesPerLimit();
  size_t max_limits() const { return max_limits_; }

 private:
  struct LimitViews;
  struct Impl;
  const UsageOptions options_;
  const size_t max_limits_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_USAGE_VIEWS_H_
