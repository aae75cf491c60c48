// `sluice recommend`: what a limit should be, from the traffic it would see. Each identity's
// peak usage (the most hits it sent in any window of the limit's period), their distribution
// over identities, a suggested limit (a percentile of the peaks times a headroom) and burst (the
// same percentile of the peaks over a shorter sub-window), and a what-if table: for candidate
// limits, the identities that would ever be rejected and the requests rejected, computed by
// replaying every identity's traffic through the algorithm (not estimated). docs/recommend.md.
#ifndef SLUICE_CLI_RECOMMEND_H_
#define SLUICE_CLI_RECOMMEND_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "sluice/algorithm.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::cli {

// One request of one identity: when (nanoseconds on the trace's clock) and its hits.
struct Hit {
  int64_t t_ns = 0;
  int64_t cost = 1;
};

// Each identity's requests in time order (non-decreasing t_ns).
using TrafficByIdentity = std::map<std::string, std::vector<Hit>, std::less<>>;

struct RecommendOptions {
  Duration per = std::chrono::minutes(1);
  double percentile = 99;  // in (0, 100]
  double headroom = 1.2;   // > 0
  Algorithm algorithm = Algorithm::kTokenBucket;
  // The burst comes from peaks over per / burst_divisor.
  int64_t burst_divisor = 10;
  // The what-if table's limits; empty: the distribution's p50, p90, p95, p99, max and the
  // suggested limit.
  std::vector<int64_t> candidates;
};

// Percentiles of the identities' peaks, nearest rank: pN is the smallest peak that at least N%
// of the identities do not exceed.
struct PeakDistribution {
  int64_t p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

struct WhatIfRow {
  int64_t limit = 0;
  uint64_t identities_rejected = 0;  // identities with at least one request rejected
  uint64_t requests_rejected = 0;    // requests (not hits) rejected
};

struct Recommendation {
  RecommendOptions options;
  uint64_t identities = 0;
  PeakDistribution distribution;
  int64_t limit = 0;  // suggested; at least 1
  int64_t burst = 0;  // suggested; at least 1
  std::vector<WhatIfRow> what_if;
};

// x * headroom rounded up (at least 1): the suggested limit for a peak x.
int64_t ScaleByHeadroom(double x, double headroom);

// Checks percentile, headroom, per and the burst sub-window; the error names the flag.
Result<void> ValidateRecommendOptions(const RecommendOptions& options);

// The most hits in any window (t - window, t] of `hits` (time-ordered).
int64_t PeakHits(std::span<const Hit> hits, Duration window);

// The nearest-rank percentile p in (0, 100] of `sorted` (ascending, not empty).
int64_t NearestRank(std::span<const int64_t> sorted, double p);

// Checks the options (the error names the flag) and computes the recommendation. Traffic with no
// identity is an error.
Result<Recommendation> Recommend(const TrafficByIdentity& traffic, const RecommendOptions& options);

// Rejections of one limit (`limit` per options.per, the algorithm's default burst) on `traffic`,
// by replaying it through a memory-store limiter.
Result<WhatIfRow> ReplayWhatIf(const TrafficByIdentity& traffic, const RecommendOptions& options,
                               int64_t limit);

// {"per_s", "percentile", "headroom", "identities", "distribution": {...}, "suggested":
// {"limit", "burst"}, "what_if": [...]}.
nlohmann::ordered_json RecommendationJson(const Recommendation& r);

// The same for a person to read.
void PrintRecommendation(std::FILE* out, const Recommendation& r);

// Writes "peak,burst_peak,identity" per identity (CSV, the identity quoted when needed), the
// data behind the distribution (the picture in docs/images is drawn from it).
Result<void> WritePeaksCsv(const TrafficByIdentity& traffic, const RecommendOptions& options,
                           std::FILE* out);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_RECOMMEND_H_
