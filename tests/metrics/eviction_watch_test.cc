// The log of live counters evicted: the first at once, then at most one line an interval, each
// with the count since the line before, and nothing while none are evicted.
#include "metrics/eviction_watch.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::server {
namespace {

using std::chrono::seconds;

constexpr Timestamp kStart = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);

TEST(EvictionWatch, NothingIsLoggedWhileNothingIsEvicted) {
  EvictionWatch watch(seconds(10), 3);
  EXPECT_FALSE(watch.Observe(3, kStart).has_value()) << "evictions before watching are not news";
  EXPECT_FALSE(watch.Observe(3, kStart + seconds(60)).has_value());
}

TEST(EvictionWatch, TheFirstIsLoggedAtOnceThenOneLineAnIntervalWithTheCount) {
  EvictionWatch watch(seconds(10), 0);
  const auto first = watch.Observe(1, kStart);
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->find("1 live counter evicted"), std::string::npos) << *first;
  // A burst within the interval: held back...
  EXPECT_FALSE(watch.Observe(500, kStart + seconds(1)).has_value());
  EXPECT_FALSE(watch.Observe(900, kStart + seconds(9)).has_value());
  // ...and reported whole once the interval has passed.
  const auto second = watch.Observe(901, kStart + seconds(10));
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->find("900 live counters evicted"), std::string::npos) << *second;
  EXPECT_NE(second->find("--memory-max-bytes"), std::string::npos) << "it says what to do";
  // Quiet again: no line, and the next eviction after a quiet interval is logged at once.
  EXPECT_FALSE(watch.Observe(901, kStart + seconds(30)).has_value());
  const auto third = watch.Observe(902, kStart + seconds(31));
  ASSERT_TRUE(third.has_value());
  EXPECT_NE(third->find("1 live counter evicted"), std::string::npos) << *third;
}

}  // namespace
}  // namespace sluice::server
