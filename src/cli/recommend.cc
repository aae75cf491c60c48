#include "cli/recommend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "sluice/duration.h"
#include "sluice/limit_spec.h"
#include "sluice/memory_store.h"

namespace sluice::cli {
namespace {

std::vector<int64_t> SortedPeaks(const TrafficByIdentity& traffic, Duration window) {
  std::vector<int64_t> peaks;
  peaks.reserve(traffic.size());
  for (const auto& [identity, hits] : traffic) peaks.push_back(PeakHits(hits, window));
  std::sort(peaks.begin(), peaks.end());
  return peaks;
}

Duration BurstWindow(const RecommendOptions& o) { return o.per / o.burst_divisor; }

}  // namespace

// Rounded up ignoring the last bits of floating-point noise: 100 * 1.2 is 120.00000000000001,
// which must suggest 120.
int64_t ScaleByHeadroom(double x, double headroom) {
  const double scaled = x * headroom;
  const double up = std::ceil(scaled - 1e-9 * std::max(1.0, scaled));
  if (!(up < 1e15)) return int64_t{1'000'000'000'000'000};  // past any sane limit; still valid
  return std::max<int64_t>(1, static_cast<int64_t>(up));
}

Result<void> ValidateRecommendOptions(const RecommendOptions& options) {
  if (!(options.percentile > 0 && options.percentile <= 100)) {
    return MakeError(fmt::format("--percentile must be in (0, 100], not {}", options.percentile));
  }
  if (!(options.headroom > 0 && std::isfinite(options.headroom))) {
    return MakeError(fmt::format("--headroom must be above 0, not {}", options.headroom));
  }
  if (options.per.count() <= 0) return MakeError("--per must be above 0");
  if (options.burst_divisor < 1 || BurstWindow(options).count() <= 0) {
    return MakeError("the burst sub-window (--per / 10) must be at least 1ns");
  }
  return {};
}

int64_t PeakHits(std::span<const Hit> hits, Duration window) {
  const int64_t w = window.count();
  int64_t in_window = 0;
  int64_t peak = 0;
  size_t head = 0;
  for (const Hit& h : hits) {
    while (hits[head].t_ns <= h.t_ns - w) in_window -= hits[head++].cost;
    in_window += h.cost;
    peak = std::max(peak, in_window);
  }
  return peak;
}

int64_t NearestRank(std::span<const int64_t> sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  // The rank ceil(p/100 * n), guarded against noise as ScaleByHeadroom is (99% of 100 is rank 99).
  const double exact = p / 100.0 * n;
  size_t rank = static_cast<size_t>(std::ceil(exact - 1e-9 * std::max(1.0, exact)));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Result<WhatIfRow> ReplayWhatIf(const TrafficByIdentity& traffic, const RecommendOptions& options,
                               int64_t limit) {
  const LimitSpec spec{options.algorithm, limit, options.per, 0, false};
  if (auto ok = ValidateLimitSpec(spec); !ok) {
    return MakeError(fmt::format("what-if limit {}: {}", limit, ok.error().message));
  }
  // Every identity is its own key, so identities are independent: each is replayed whole in
  // turn. Nothing may be evicted (a fresh counter would admit too much).
  MemoryStoreOptions store;
  store.max_bytes = size_t{64} << 30;
  auto limiter = MakeMemoryLimiter(spec, store);
  if (!limiter) return std::unexpected(limiter.error());
  WhatIfRow row{limit, 0, 0};
  for (const auto& [identity, hits] : traffic) {
    uint64_t rejected = 0;
    for (const Hit& h : hits) {
      const Decision d = (*limiter)->Decide(identity, FromNanos(h.t_ns), h.cost);
      if (d.reason == DecisionReason::kInvalidRequest) {
        return MakeError(fmt::format("identity '{}' cannot be decided (a key over {} bytes?)",
                                     identity, store.max_key_bytes));
      }
      if (!d.allowed) ++rejected;
    }
    row.requests_rejected += rejected;
    if (rejected > 0) ++row.identities_rejected;
  }
  return row;
}

Result<Recommendation> Recommend(const TrafficByIdentity& traffic,
                                 const RecommendOptions& options) {
  if (auto ok = ValidateRecommendOptions(options); !ok) return std::unexpected(ok.error());
  if (traffic.empty()) return MakeError("the trace has no requests");

  Recommendation r;
  r.options = options;
  r.identities = traffic.size();
  const std::vector<int64_t> peaks = SortedPeaks(traffic, options.per);
  r.distribution = {NearestRank(peaks, 50), NearestRank(peaks, 90), NearestRank(peaks, 95),
                    NearestRank(peaks, 99), peaks.back()};
  r.limit = ScaleByHeadroom(static_cast<double>(NearestRank(peaks, options.percentile)),
                            options.headroom);
  const std::vector<int64_t> burst_peaks = SortedPeaks(traffic, BurstWindow(options));
  r.burst = ScaleByHeadroom(static_cast<double>(NearestRank(burst_peaks, options.percentile)),
                            options.headroom);

  std::set<int64_t> candidates(options.candidates.begin(), options.candidates.end());
  if (candidates.empty()) {
    const PeakDistribution& d = r.distribution;
    candidates = {d.p50, d.p90, d.p95, d.p99, d.max, r.limit};
  }
  for (int64_t limit : candidates) {
    if (limit < 1) continue;  // a peak of 0: cost-0 traffic; no limit to try
    auto row = ReplayWhatIf(traffic, options, limit);
    if (!row) return std::unexpected(row.error());
    r.what_if.push_back(*row);
  }
  return r;
}

nlohmann::ordered_json RecommendationJson(const Recommendation& r) {
  const PeakDistribution& d = r.distribution;
  nlohmann::ordered_json what_if = nlohmann::ordered_json::array();
  for (const WhatIfRow& w : r.what_if) {
    what_if.push_back(nlohmann::ordered_json{{"limit", w.limit},
                                             {"identities_rejected", w.identities_rejected},
                                             {"requests_rejected", w.requests_rejected}});
  }
  return nlohmann::ordered_json{
      {"per_s", static_cast<double>(r.options.per.count()) / 1e9},
      {"percentile", r.options.percentile},
      {"headroom", r.options.headroom},
      {"identities", r.identities},
      {"distribution",
       {{"p50", d.p50}, {"p90", d.p90}, {"p95", d.p95}, {"p99", d.p99}, {"max", d.max}}},
      {"suggested", {{"limit", r.limit}, {"burst", r.burst}}},
      {"what_if", what_if}};
}

void PrintRecommendation(std::FILE* out, const Recommendation& r) {
  const PeakDistribution& d = r.distribution;
  const std::string per = FormatDuration(r.options.per);
  fmt::print(out, "{} identities; peak hits per {} window over identities:\n", r.identities, per);
  fmt::print(out, "  p50 {}  p90 {}  p95 {}  p99 {}  max {}\n", d.p50, d.p90, d.p95, d.p99, d.max);
  fmt::print(out, "suggested: limit {} per {} (p{} x {}), burst {} (p{} of peaks per {}, x {})\n",
             r.limit, per, r.options.percentile, r.options.headroom, r.burst, r.options.percentile,
             FormatDuration(BurstWindow(r.options)), r.options.headroom);
  fmt::print(out, "what-if ({}, burst = limit, replayed):\n", AlgorithmName(r.options.algorithm));
  fmt::print(out, "  {:>12} {:>20} {:>18}\n", "limit", "identities_rejected", "requests_rejected");
  for (const WhatIfRow& w : r.what_if) {
    fmt::print(out, "  {:>12} {:>20} {:>18}\n", w.limit, w.identities_rejected,
               w.requests_rejected);
  }
}

Result<void> WritePeaksCsv(const TrafficByIdentity& traffic, const RecommendOptions& options,
                           std::FILE* out) {
  std::string buf = "peak,burst_peak,identity\n";
  for (const auto& [identity, hits] : traffic) {
    fmt::format_to(std::back_inserter(buf), "{},{},", PeakHits(hits, options.per),
                   PeakHits(hits, BurstWindow(options)));
    if (identity.find_first_of(",\"\r\n") == std::string::npos) {
      buf += identity;
    } else {
      buf += '"';
      for (char c : identity) {
        if (c == '"') buf += '"';
        buf += c;
      }
      buf += '"';
    }
    buf += '\n';
  }
  if (std::fwrite(buf.data(), 1, buf.size(), out) != buf.size() || std::fflush(out) != 0) {
    return MakeError("cannot write the peaks file");
  }
  return {};
}

}  // namespace sluice::cli
