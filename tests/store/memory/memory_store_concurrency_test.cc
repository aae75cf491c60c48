// Concurrency: run under TSan in CI (make test-tsan). Exact admission counts show that no
// decision is lost or duplicated when threads share a key.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

constexpr int64_t kStart = 1'700'000'000'000'000'000;
constexpr int kThreads = 4;

std::unique_ptr<MemoryLimiter> MustMake(const LimitSpec& spec, MemoryStoreOptions options = {}) {
  auto l = MakeMemoryLimiter(spec, options);
  EXPECT_TRUE(l.has_value());
  return l ? std::move(*l) : nullptr;
}

TEST(MemoryStoreConcurrency, SharedKeyAdmitsExactlyTheCapacity) {
  for (Algorithm a : kAllAlgorithms) {
    const bool bucket = HasBurst(a);
    auto limiter = MustMake({a, 1000, hours(1), bucket ? 1000 : 0, false});
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) {
          if (limiter->Decide("shared", FromNanos(kStart), 1).allowed) admitted.fetch_add(1);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(admitted.load(), 1000) << AlgorithmName(a);
  }
}

// Decisions on keys already present race with new keys that grow and rebuild the same table:
// a shared key must stay exact through every rehash, and every thread's own keys keep their
// counts.
TEST(MemoryStoreConcurrency, SharedDecisionsStayExactWhileNewKeysGrowTheTable) {
  for (Algorithm a : kAllAlgorithms) {
    const bool bucket = HasBurst(a);
    MemoryStoreOptions options;
    options.shards = 1;  // one table: every insert rehashes under the shared deciders
    auto limiter = MustMake({a, 2000, hours(1), bucket ? 2000 : 0, false}, options);
    std::atomic<int> admitted{0};
    std::vector<int> own_admitted(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string own = "own-" + std::to_string(t);
        for (int i = 0; i < 3000; ++i) {
          if (limiter->Decide("shared", FromNanos(kStart), 1).allowed) admitted.fetch_add(1);
          if (limiter->Decide(own, FromNanos(kStart), 1).allowed) ++own_admitted[t];
          limiter->Decide("new-" + std::to_string(t) + "-" + std::to_string(i), FromNanos(kStart),
                          1);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(admitted.load(), 2000) << AlgorithmName(a);
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(own_admitted[t], 2000) << AlgorithmName(a);
    EXPECT_EQ(limiter->Stats().keys, size_t{1 + kThreads + kThreads * 3000}) << AlgorithmName(a);
  }
}

TEST(MemoryStoreConcurrency, DistinctKeysPerThreadEachGetTheirOwnAllowance) {
  auto limiter = MustMake({Algorithm::kTokenBucket, 10, hours(1), 50, false});
  std::vector<int> admitted(kThreads * 100, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 60; ++round) {
        for (int k = 0; k < 100; ++k) {
          const int id = t * 100 + k;
          if (limiter->Decide("t" + std::to_string(id), FromNanos(kStart), 1).allowed)
            ++admitted[id];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int id = 0; id < kThreads * 100; ++id) EXPECT_EQ(admitted[id], 50) << id;
}

TEST(MemoryStoreConcurrency, EvictionSweepAndStatsRaceWithDecisions) {
  // Tiny bound, time moving, many keys: eviction, expiry, Sweep and Stats all interleave.
  MemoryStoreOptions options;
  options.max_bytes = 256 << 10;
  options.shards = 4;
  auto limiter = MustMake({Algorithm::kSlidingWindowLog, 20, seconds(1), 0, false}, options);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> now{kStart};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20'000; ++i) {
        const int64_t ts = now.fetch_add(1000);
        limiter->Decide("k" + std::to_string((i * 7 + t) % 5000), FromNanos(ts), 1 + i % 3);
      }
    });
  }
  std::thread sweeper([&] {
    while (!stop.load()) {
      limiter->Sweep(FromNanos(now.load()));
      const StoreStats s = limiter->Stats();
      ASSERT_LE(s.bytes, s.max_bytes);
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  sweeper.join();
  const StoreStats s = limiter->Stats();
  EXPECT_LE(s.bytes, s.max_bytes);
  EXPECT_GT(s.keys, 0u);
}

}  // namespace
}  // namespace sluice
