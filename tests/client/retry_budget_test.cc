// The retry budget: during an outage where every call fails, the retries a client makes stay
// within retry_ratio of its calls plus the reserve; a quiet client still gets its reserve; the
// ttl forgets old calls. The oracle is counting: calls and retries made, in a loop on a manual
// timeline.
#include "sluice/client/retry_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "sluice/client/pacer.h"

namespace sluice::client {
namespace {

using namespace std::chrono_literals;

TEST(RetryBudgetTest, AnOutageAddsAtMostTheRatioOfCallsPlusTheReserve) {
  // 100 calls a second for 60 s, each failing and retried up to 3 times if the budget allows:
  // without a budget that is 4x the calls; with ratio 0.1 and a reserve of 1/s, about 1.11x.
  RetryBudget budget({.retry_ratio = 0.1, .min_retries_per_second = 1, .ttl = 10s});
  int64_t calls = 0, retries = 0;
  for (int ms = 0; ms < 60000; ms += 10) {
    const Timestamp now = FromNanos(int64_t{ms} * 1'000'000);
    budget.OnCall(now);
    ++calls;
    for (int r = 0; r < 3 && budget.TryRetry(now); ++r) ++retries;
  }
  // At most: ratio * calls + the reserve over 60 s and one ttl more (the window's slack).
  EXPECT_LE(retries, static_cast<int64_t>(0.1 * calls + 1.0 * 70));
  EXPECT_GE(retries, static_cast<int64_t>(0.9 * (0.1 * calls + 1.0 * 60)));
}

TEST(RetryBudgetTest, AQuietClientHasItsReserveThenWaitsForItToComeBack) {
  RetryBudget budget({.retry_ratio = 0.1, .min_retries_per_second = 2, .ttl = 10s});
  const Timestamp t0 = FromNanos(0);
  int granted = 0;
  while (budget.TryRetry(t0)) ++granted;
  EXPECT_EQ(granted, 20);  // 2/s over a 10 s ttl
  EXPECT_FALSE(budget.TryRetry(t0 + 5s));
  EXPECT_TRUE(budget.TryRetry(t0 + 10s));  // the first slot's retries have left the window
}

TEST(RetryBudgetTest, CallsEarnRetriesAndTheyExpireWithTheTtl) {
  RetryBudget budget({.retry_ratio = 0.5, .min_retries_per_second = 0, .ttl = 1s});
  const Timestamp t0 = FromNanos(0);
  EXPECT_FALSE(budget.TryRetry(t0));
  for (int i = 0; i < 4; ++i) budget.OnCall(t0);
  EXPECT_DOUBLE_EQ(budget.Balance(t0), 2.0);
  EXPECT_TRUE(budget.TryRetry(t0));
  EXPECT_TRUE(budget.TryRetry(t0));
  EXPECT_FALSE(budget.TryRetry(t0));
  EXPECT_DOUBLE_EQ(budget.Balance(t0 + 1s), 0.0);  // the calls and the retries left together
  budget.OnCall(t0 + 1s);
  budget.OnCall(t0 + 1s);
  EXPECT_TRUE(budget.TryRetry(t0 + 1s));
  // Time going backwards counts as the latest time seen.
  EXPECT_FALSE(budget.TryRetry(t0));
}

TEST(RetryBudgetTest, BadOptionsAreRefusedByName) {
  EXPECT_NE(ValidateRetryBudgetOptions({.retry_ratio = -0.1}).error().message.find("retry_ratio"),
            std::string::npos);
  EXPECT_FALSE(ValidateRetryBudgetOptions({.min_retries_per_second = std::nan("")}));
  EXPECT_FALSE(ValidateRetryBudgetOptions({.ttl = 1ns}));
  EXPECT_TRUE(ValidateRetryBudgetOptions({}));
}

// Run under TSan too (make test-tsan): one budget and one pacer shared by four threads.
TEST(ClientConcurrencyTest, ABudgetSharedByFourThreadsNeverGrantsMoreThanItHolds) {
  RetryBudget budget({.retry_ratio = 0.5, .min_retries_per_second = 0, .ttl = 3600s});
  const Timestamp t0 = FromNanos(0);
  std::atomic<int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        budget.OnCall(t0);
        if (budget.TryRetry(t0)) ++granted;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(granted.load(), 2000);
  EXPECT_DOUBLE_EQ(budget.Balance(t0), 2000.0 - static_cast<double>(granted.load()));
  // balance - 0.5 * (threads between their call and their retry) stays under 1: a call leaves
  // it as it is, a retry spends 1 when the balance holds it. At the end no thread is between.
  EXPECT_LT(budget.Balance(t0), 1.0);
}

TEST(ClientConcurrencyTest, APacerSharedByFourThreadsStaysConsistent) {
  Pacer pacer;
  const Timestamp t0 = FromNanos(0);
  const std::vector<Header> headers = {{"RateLimit-Policy", R"("p";q=100;w=1)"},
                                       {"RateLimit", R"("p";r=50;t=1)"}};
  const ServerHints hints = ReadServerHints(headers, t0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        pacer.OnSend(t0);
        pacer.Observe(hints, t0);
        EXPECT_GE(pacer.NextSendTime(t0), t0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The last word was r=50 over 1 s, the last send at t0: the next at t0 + min(1s/50, 1s/100).
  EXPECT_EQ(pacer.NextSendTime(t0), t0 + std::chrono::milliseconds(10));
}

}  // namespace
}  // namespace sluice::client
