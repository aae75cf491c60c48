// sluice::DecideAll over any Limiter: which checks are refunded (a recording fake); and over memory
// limiters under threads (run under TSan: make test-tsan picks the Memory* suites) no limit ever
// keeps more than its capacity, and what is kept is exactly what the admitted requests took. What
// every store's DecideAll does (all or nothing against the pure algorithms, a limit checked twice,
// foreign limiters) is the store suite's: tests/store/store_suite.h.
#include "sluice/decide_all.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

constexpr int64_t kStart = 1'700'000'000'000'000'000;

std::unique_ptr<Limiter> MustMake(const LimitSpec& spec) {
  auto l = MakeMemoryLimiter(spec);
  EXPECT_TRUE(l.has_value()) << (l ? "" : l.error().message);
  return l ? std::move(*l) : nullptr;
}

// A limiter that answers what it is told and records refunds.
class FakeLimiter final : public Limiter {
 public:
  explicit FakeLimiter(Decision answer) : answer_(answer) {}
  Decision Decide(std::string_view, Timestamp, int64_t) override { return answer_; }
  Decision Charge(std::string_view, Timestamp, int64_t) override {
    ++charges;
    return answer_;
  }
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    refunds.push_back({std::string(key), at, now, cost});
  }
  void Reset(std::string_view) override {}
  StoreStats Stats() const override { return {}; }
  const LimitSpec& spec() const override { return spec_; }

  struct Refunded {
    std::string key;
    Timestamp at;
    Timestamp now;
    int64_t cost;
  };
  std::vector<Refunded> refunds;
  int charges = 0;

 private:
  Decision answer_;
  LimitSpec spec_{Algorithm::kTokenBucket, 10, seconds(1), 10, false};
};

Decision Answer(bool allowed, bool degraded, int64_t remaining) {
  Decision d;
  d.allowed = allowed;
  d.degraded = degraded;
  d.reason = degraded  ? DecisionReason::kStoreUnavailable
             : allowed ? DecisionReason::kAdmitted
                       : DecisionReason::kOverLimit;
  d.limit = 10;
  d.remaining = remaining;
  return d;
}

TEST(DecideAll, RefundsOnlyAdmissionsThatTookSomething) {
  FakeLimiter admits(Answer(true, false, 9));
  FakeLimiter fail_open(Answer(true, true, 0));  // degraded: took nothing
  FakeLimiter refuses(Answer(false, false, 0));
  const Timestamp now = FromNanos(kStart);
  const std::vector<LimitCheck> checks = {
      {&admits, "a", 3}, {&fail_open, "b", 1}, {&refuses, "c", 1}};
  std::vector<Decision> out(3);
  DecideAll(checks, now, out);
  ASSERT_EQ(admits.refunds.size(), 1u);
  EXPECT_EQ(admits.refunds[0].key, "a");
  EXPECT_EQ(admits.refunds[0].at, now);
  EXPECT_EQ(admits.refunds[0].now, now);
  EXPECT_EQ(admits.refunds[0].cost, 3);
  EXPECT_TRUE(fail_open.refunds.empty());
  EXPECT_TRUE(refuses.refunds.empty());
  EXPECT_TRUE(out[0].allowed) << "each limit's own verdict";
  EXPECT_EQ(out[0].remaining, 10) << "9 + 3, never above the limit";
  EXPECT_EQ(out[1].remaining, 0);
  EXPECT_FALSE(out[2].allowed);
}

TEST(DecideAll, NothingIsRefundedWhenEveryLimitAdmits) {
  FakeLimiter a(Answer(true, false, 4));
  FakeLimiter fail_open(Answer(true, true, 0));
  const std::vector<LimitCheck> checks = {{&a, "a", 1}, {&fail_open, "b", 1}};
  std::vector<Decision> out(2);
  DecideAll(checks, FromNanos(kStart), out);
  EXPECT_TRUE(a.refunds.empty());
  EXPECT_EQ(out[0].remaining, 4);
}

TEST(DecideAll, AFailClosedStoreOrANullLimiterRefusesTheRequest) {
  FakeLimiter a(Answer(true, false, 4));
  FakeLimiter fail_closed(Answer(false, true, 0));
  std::vector<Decision> out(2);
  const std::vector<LimitCheck> closed = {{&a, "a", 1}, {&fail_closed, "b", 1}};
  DecideAll(closed, FromNanos(kStart), out);
  EXPECT_EQ(a.refunds.size(), 1u);
  const std::vector<LimitCheck> null = {{&a, "a", 1}, {nullptr, "b", 1}};
  DecideAll(null, FromNanos(kStart), out);
  EXPECT_EQ(a.refunds.size(), 2u);
  EXPECT_EQ(out[1].reason, DecisionReason::kInvalidRequest);
  EXPECT_EQ(out[1].retry_after, kNever);
}

// Threads send requests that each check a random subset of five limits on two shared keys, all
// at one instant (nothing refills, so every bound is the capacity). Whatever the interleaving,
// a limit keeps at most its capacity, and exactly the cost of the requests that passed.
TEST(MemoryDecideAllConcurrency, KeptQuotaIsExactlyWhatAdmittedRequestsTook) {
  const std::vector<LimitSpec> specs = {
      {Algorithm::kTokenBucket, 60, hours(1), 60, false},
      {Algorithm::kFixedWindow, 50, hours(1), 0, false},
      {Algorithm::kSlidingWindowLog, 70, hours(1), 0, false},
      {Algorithm::kSlidingWindowCounter, 55, hours(1), 0, false},
      {Algorithm::kGcra, 45, hours(1), 45, false},
  };
  std::vector<std::unique_ptr<Limiter>> limiters;
  for (const LimitSpec& spec : specs) limiters.push_back(MustMake(spec));
  constexpr int kThreads = 4;
  constexpr size_t kKeys = 2;
  const char* const keys[kKeys] = {"shared-a", "shared-b"};
  const Timestamp now = FromNanos(kStart);
  // taken[limit][key]: the cost of the admitted requests that checked it.
  std::vector<std::vector<std::atomic<int64_t>>> taken(specs.size());
  for (auto& row : taken) row = std::vector<std::atomic<int64_t>>(kKeys);
  std::atomic<int> passed{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < 2000; ++i) {
        std::vector<LimitCheck> checks;
        std::vector<std::pair<size_t, size_t>> which;
        const int64_t cost = 1 + static_cast<int64_t>(rng() % 2);
        for (size_t l = 0; l < specs.size(); ++l) {
          if (rng() % 2 != 0) continue;
          const size_t k = rng() % kKeys;
          checks.push_back({limiters[l].get(), keys[k], cost});
          which.emplace_back(l, k);
        }
        if (checks.empty()) continue;
        std::vector<Decision> out(checks.size());
        DecideAll(checks, now, out);
        const bool ok =
            std::all_of(out.begin(), out.end(), [](const Decision& d) { return d.allowed; });
        if (ok) {
          for (const auto& [l, k] : which) taken[l][k].fetch_add(cost);
          passed.fetch_add(1);
        } else {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t l = 0; l < specs.size(); ++l) {
    for (size_t k = 0; k < kKeys; ++k) {
      const int64_t kept = taken[l][k].load();
      const Decision d = limiters[l]->Decide(keys[k], now, 0);
      EXPECT_LE(kept, d.limit) << AlgorithmName(specs[l].algorithm) << " " << keys[k];
      EXPECT_EQ(d.remaining, d.limit - kept)
          << AlgorithmName(specs[l].algorithm) << " " << keys[k] << ": refunds were exact";
    }
  }
  EXPECT_GT(passed.load(), 100);
  EXPECT_GT(refused.load(), 1000);
}

}  // namespace
}  // namespace sluice
