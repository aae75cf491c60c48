// Changing a limit mid-period (docs/quotas.md): a service whose one monthly quota is reloaded
// with another requests_per_unit, on any store, and the scenarios every store passes, with
// expectations computed by hand. limit_change_test.cc runs them on the memory store,
// limit_change_redis_test.cc on a real redis-server.
#ifndef SLUICE_TESTS_SERVICE_LIMIT_CHANGE_H_
#define SLUICE_TESTS_SERVICE_LIMIT_CHANGE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "service/rate_limit_service.h"
#include "sluice/algorithm.h"
#include "sluice/clock.h"
#include "sluice/store.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {

inline constexpr int64_t kDayNs = int64_t{86400} * 1'000'000'000;
inline constexpr Duration kMonth{30 * kDayNs};  // `unit: month`
// 30 days / 800: the time one hit of an 800-a-month quota takes to refill (3,240 s).
inline constexpr Duration kPerHitAt800 = std::chrono::seconds(3240);

// One tenant's monthly quota of `algorithm` in a service on `store`, at a manual clock that
// starts where a month-long window opens (day 20010 is a multiple of 30).
class MonthlyQuota {
 public:
  // `unit`: the quota's period, a month unless a store's range needs a shorter one (Redis's
  // sliding window log: limit x period below 2^53 us).
  MonthlyQuota(Algorithm algorithm, std::shared_ptr<Store> store, std::string unit = "month")
      : algorithm_(algorithm), store_(std::move(store)), unit_(std::move(unit)) {}

  void Start(int64_t limit) {
    auto config = Load(limit);
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto service = RateLimitService::Create(*config, store_, options, nullptr);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }
  void Reload(int64_t limit) {
    auto config = Load(limit);
    ASSERT_TRUE(config.has_value()) << config.error().message;
    auto reloaded = service_->Reload(*config);
    ASSERT_TRUE(reloaded.has_value()) << reloaded.error().message;
  }
  // The tenant's request of `hits`: its one status.
  DescriptorStatus Check(int64_t hits, const std::string& tenant = "acme") {
    CheckRequest r;
    r.domain = "quota";
    r.hits = hits;
    r.descriptors.push_back({{{"tenant", tenant}}, {}, {}});
    auto response = service_->Check(r);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? response->statuses.at(0) : DescriptorStatus{};
  }
  // What the admin API reads: the counter's remaining, deciding nothing.
  int64_t Remaining(const std::string& tenant = "acme") {
    auto state = service_->State("quota", {{"tenant", tenant}});
    EXPECT_TRUE(state.has_value()) << state.error().message;
    return state ? state->remaining : -1;
  }

  ManualClock& clock() { return clock_; }
  Timestamp start() const { return kStart; }
  bool bucket() const { return HasBurst(algorithm_); }
  Duration period() const {
    return unit_ == "month"  ? kMonth
           : unit_ == "hour" ? Duration(std::chrono::hours(1))
                             : Duration(kDayNs);
  }

 private:
  Result<std::shared_ptr<const Config>> Load(int64_t limit) {
    const std::string yaml =
        "domain: quota\ndescriptors:\n  - key: tenant\n    rate_limit: "
        "{name: monthly, unit: " +
        unit_ + ", requests_per_unit: " + std::to_string(limit) +
        ", algorithm: " + std::string(AlgorithmName(algorithm_)) + "}\n";
    return LoadConfig(dir_.Write("quota.yaml", yaml));
  }

  static constexpr Timestamp kStart = FromNanos(20010 * kDayNs);
  const Algorithm algorithm_;
  std::shared_ptr<Store> store_;
  const std::string unit_;
  ManualClock clock_{kStart};
  TempConfigDir dir_{"limit-change"};
  std::unique_ptr<RateLimitService> service_;
};

// 1,000 a month, 900 used, raised to 5,000: 4,100 left, and exactly that many pass.
inline void ExpectRaisingKeepsWhatWasUsed(MonthlyQuota& q) {
  q.Start(1000);
  const DescriptorStatus used = q.Check(900);
  ASSERT_EQ(used.code, Code::kOk);
  EXPECT_EQ(used.remaining, 100);
  q.Reload(5000);
  EXPECT_EQ(q.Remaining(), 4100);
  EXPECT_EQ(q.Check(4100).code, Code::kOk);
  EXPECT_EQ(q.Check(1).code, Code::kOverLimit);
  // A tenant that had used nothing has the whole new quota.
  EXPECT_EQ(q.Remaining("other"), 5000);
}

// 1,000 a month, 900 used, lowered to 800: refused until the period ends (a window) or 101 hits
// have refilled at 800 a month (a bucket, 100 in debt: 101 x 3,240 s; buckets are always tested
// with a month). A sliding window counter
// weighs the previous window's 900 by the part of it still in the sliding window: the estimate
// falls to 799 once 101/900 of a month (290,880 s) of the next window have passed.
inline void ExpectLoweringBelowTheUsageRefuses(MonthlyQuota& q, Algorithm algorithm) {
  q.Start(1000);
  ASSERT_EQ(q.Check(900).code, Code::kOk);
  q.Reload(800);
  EXPECT_EQ(q.Remaining(), 0);
  const DescriptorStatus refused = q.Check(1);
  EXPECT_EQ(refused.code, Code::kOverLimit);
  Timestamp passes = q.start() + q.period();
  if (q.bucket()) {
    passes = q.start() + 101 * kPerHitAt800;
    EXPECT_EQ(refused.retry_after, 101 * kPerHitAt800);
  } else if (algorithm == Algorithm::kSlidingWindowCounter) {
    passes = q.start() + kMonth + std::chrono::seconds(290'880);
  }
  q.clock().Set(passes - std::chrono::seconds(1));
  EXPECT_EQ(q.Check(1).code, Code::kOverLimit);
  q.clock().Set(passes);
  EXPECT_EQ(q.Check(1).code, Code::kOk);
}

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_SERVICE_LIMIT_CHANGE_H_
