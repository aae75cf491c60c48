// Concurrency: threads record into shared and new series (first use races on insertion) and into
// heavy-hitter sketches while another renders. Run under TSan; the exact totals afterwards show
// that no increment was lost.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "metrics/metrics.h"
#include "metrics/prometheus_validator.h"

namespace sluice::server {
namespace {

constexpr int kThreads = 4;
constexpr int kPerThread = 20'000;
constexpr int kLimits = 64;

TEST(MetricsConcurrency, ThreadsRecordWhileAnotherRenders) {
  Metrics m(0.8, 32);
  std::atomic<bool> stop{false};
  std::atomic<int> renders{0};
  std::thread renderer([&] {
    while (!stop.load()) {
      const auto e = test::ParseExposition(m.Render());
      for (const auto& error : e.errors) ADD_FAILURE() << error;
      renders.fetch_add(1);
      m.Top("api", 5);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Record only once rendering runs, so the two overlap even on a loaded machine (where the
      // recorders could otherwise finish before the renderer is first scheduled).
      while (renders.load() == 0) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        // Every thread walks the same limits, so each series' creation is raced.
        const std::string limit = "limit" + std::to_string(i % kLimits);
        const bool over = i % 4 == 0;
        m.RecordDecision("api", limit, over ? DecisionResult::kOverLimit : DecisionResult::kOk,
                         over ? 1.0 : 0.85);
        m.RecordDuration(std::chrono::microseconds(i % 100));
        if (over) m.RecordHeavyHitter("api", "user" + std::to_string((i + t) % 50), true, false);
        if (i % 1000 == 0) m.RecordStoreError();
      }
    });
  }
  for (auto& th : threads) th.join();
  stop.store(true);
  renderer.join();
  EXPECT_GT(renders.load(), 0);

  const auto e = test::ParseExposition(m.Render());
  ASSERT_TRUE(e.errors.empty());
  double ok = 0;
  double over = 0;
  double near = 0;
  double util_count = 0;
  for (const auto& s : e.samples) {
    if (s.name == "sluice_decisions_total") {
      for (const auto& [k, v] : s.labels) {
        if (k == "result" && v == "ok") ok += s.value;
        if (k == "result" && v == "over_limit") over += s.value;
      }
    } else if (s.name == "sluice_near_limit_total") {
      near += s.value;
    } else if (s.name == "sluice_limit_utilization_count") {
      util_count += s.value;
    }
  }
  constexpr double kTotal = kThreads * kPerThread;
  EXPECT_EQ(ok, kTotal * 3 / 4);
  EXPECT_EQ(over, kTotal / 4);
  EXPECT_EQ(near, kTotal * 3 / 4);
  EXPECT_EQ(util_count, kTotal);
  EXPECT_EQ(test::SampleValue(e, "sluice_decision_duration_seconds_count", {}), kTotal);
  EXPECT_EQ(test::SampleValue(e, "sluice_store_errors_total", {}), kThreads * kPerThread / 1000);

  uint64_t hits = 0;
  for (const auto& h : m.Top("api", 100)) hits += h.rejected + h.near_limit + h.error;
  // 50 identities share 32 counters, but Space-Saving's counts always sum to N.
  EXPECT_EQ(hits, kTotal / 4);
}

}  // namespace
}  // namespace sluice::server
