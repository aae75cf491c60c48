// ns per Metrics::RecordDecision (the per-limit, per-request hot path): one series shared by
// all threads (worst case: its counters' cache lines move between cores), one series per
// thread, and 1,000 series; then a heavy-hitter record and a /metrics render for scale.
// Run: build/bin/metrics_bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "metrics/usage_views.h"
#include "sluice/clock.h"

namespace sluice::server {
namespace {

Metrics& Shared() {
  static Metrics metrics;
  return metrics;
}

std::vector<std::string> Names(const std::string& prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

void BM_RecordDecisionOneSeries(benchmark::State& state) {
  Metrics& m = Shared();
  for (auto _ : state) m.RecordDecision("api", "per_user", DecisionResult::kOk, 0.5);
}
BENCHMARK(BM_RecordDecisionOneSeries)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecordDecisionSeriesPerThread(benchmark::State& state) {
  Metrics& m = Shared();
  const std::string limit = "thread" + std::to_string(state.thread_index());
  for (auto _ : state) m.RecordDecision("api", limit, DecisionResult::kOk, 0.5);
}
BENCHMARK(BM_RecordDecisionSeriesPerThread)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecordDecision1000Series(benchmark::State& state) {
  Metrics& m = Shared();
  static const std::vector<std::string> limits = Names("limit", 1000);
  size_t i = static_cast<size_t>(state.thread_index()) * 500;
  for (auto _ : state) {
    m.RecordDecision("api", limits[i], DecisionResult::kOk, 0.85);
    i = i + 1 == limits.size() ? 0 : i + 1;
  }
}
BENCHMARK(BM_RecordDecision1000Series)->Threads(1)->Threads(2)->UseRealTime();

void BM_RecordHeavyHitter(benchmark::State& state) {
  Metrics& m = Shared();
  static const std::vector<std::string> ids = Names("limit#user-", 5000);  // > top_capacity
  size_t i = static_cast<size_t>(state.thread_index()) * 2500;
  for (auto _ : state) {
    m.RecordHeavyHitter("api", ids[i], true, false);
    i = i + 1 == ids.size() ? 0 : i + 1;
  }
}
BENCHMARK(BM_RecordHeavyHitter)->Threads(1)->Threads(2)->UseRealTime();

void BM_Render1000Series(benchmark::State& state) {
  Metrics m;
  for (const auto& limit : Names("limit", 1000)) {
    m.RecordDecision("api", limit, DecisionResult::kOk, 0.5);
  }
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = m.Render();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Render1000Series)->Unit(benchmark::kMillisecond);

// UsageViews::Record (per limit decision with --usage-tracking on): 100,000 identities over
// one limit, their counters climbing (so peaks keep growing: the locked path is taken as
// often as it can be), and one hot identity every thread hammers.
UsageViews& SharedViews() {
  static ManualClock clock;
  static UsageViews views({.clock = &clock});
  return views;
}

void BM_UsageRecordManyIdentities(benchmark::State& state) {
  UsageViews& v = SharedViews();
  static const std::vector<std::string> ids = Names("user-", 100'000);
  size_t i = static_cast<size_t>(state.thread_index()) * 50'000;
  int64_t used = 0;
  for (auto _ : state) {
    v.Record("api", "per_user", ids[i], Timestamp{}, 1000, used, UsageOutcome::kAllowed);
    i = i + 1 == ids.size() ? 0 : i + 1;
    used = used == 999 ? 0 : used + 1;
  }
}
BENCHMARK(BM_UsageRecordManyIdentities)->Threads(1)->Threads(2)->UseRealTime();

void BM_UsageRecordHotIdentity(benchmark::State& state) {
  UsageViews& v = SharedViews();
  int64_t used = 0;
  for (auto _ : state) {
    v.Record("api", "hot", "the-one-key", Timestamp{}, 1000, used, UsageOutcome::kAllowed);
    used = used == 999 ? 0 : used + 1;
  }
}
BENCHMARK(BM_UsageRecordHotIdentity)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace sluice::server

BENCHMARK_MAIN();
