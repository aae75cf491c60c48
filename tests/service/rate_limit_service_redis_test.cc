// RateLimitService::CheckAsync on the Redis store, against a real redis-server: the same answers
// as the blocking Check, all or nothing across a request's limits, shadow and soft limits
// observed asynchronously, many checks in flight from one thread counting exactly, and the
// failure policy when Redis is gone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: route
    rate_limit: {name: per_route, unit: minute, requests_per_unit: 2, algorithm: fixed_window}
  - key: shadowed
    rate_limit: {name: shadowed, unit: minute, requests_per_unit: 1, mode: shadow,
                 algorithm: fixed_window}
  - key: closed
    rate_limit: {name: closed, unit: minute, requests_per_unit: 5, failure_mode: closed}
)yaml";

class AsyncRedisService : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    // Two hundred scripts in flight on a loaded CI machine can take longer than the default
    // 50 ms: a timed-out one is a degraded decision (allowed, failure_mode open), not a count.
    OpenStoreOptions store_options;
    store_options.redis_command_timeout = std::chrono::milliseconds(5000);
    auto opened = OpenStore("redis://127.0.0.1:" + std::to_string(redis_.port()), store_options);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }

  static CheckRequest Request(std::vector<std::vector<std::pair<std::string, std::string>>> ds) {
    CheckRequest r;
    r.domain = "api";
    for (auto& entries : ds) r.descriptors.push_back({std::move(entries), {}, {}});
    return r;
  }

  Result<CheckResponse> CheckAsyncWait(const CheckRequest& r) {
    std::promise<Result<CheckResponse>> promise;
    auto answer = promise.get_future();
    service_->CheckAsync(
        r, [&promise](Result<CheckResponse> response) { promise.set_value(std::move(response)); });
    if (answer.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "no answer";
      return MakeError("no answer");
    }
    return answer.get();
  }

  CheckResponse MustCheckAsync(const CheckRequest& r) {
    auto response = CheckAsyncWait(r);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? std::move(*response) : CheckResponse{};
  }

  sluice::testing::RedisServer redis_;
  test::TempConfigDir dir_{"svc-redis"};
  Metrics metrics_;
  std::unique_ptr<RateLimitService> service_;
};

TEST_F(AsyncRedisService, AnswersAsTheBlockingCheckDoes) {
  for (int i = 0; i < 12; ++i) {
    const bool async = i % 2 == 0;
    const CheckRequest r = Request({{{"api_key", "same"}}});
    auto response = async ? CheckAsyncWait(r) : service_->Check(r);
    ASSERT_TRUE(response.has_value()) << response.error().message;
    EXPECT_EQ(response->overall, i < 10 ? Code::kOk : Code::kOverLimit) << i;
    EXPECT_EQ(response->statuses[0].remaining, std::max(0, 9 - i)) << i;
    EXPECT_FALSE(response->statuses[0].degraded);
  }
  EXPECT_FALSE(CheckAsyncWait(Request({})).has_value()) << "a bad request is an error";
  EXPECT_EQ(MustCheckAsync(Request({{{"nothing", "x"}}})).statuses[0].limit, nullptr);
}

TEST_F(AsyncRedisService, AnUnknownDomainIsAnsweredByTheRules) {
  CheckRequest r = Request({{{"api_key", "k"}}});
  r.domain = "nope";
  auto refused = CheckAsyncWait(r);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message, "unknown domain 'nope'");
  r.caller = Caller::kEnvoy;
  const CheckResponse none = MustCheckAsync(r);
  EXPECT_EQ(none.overall, Code::kOk);
  ASSERT_EQ(none.statuses.size(), 1u);
  EXPECT_EQ(none.statuses[0].limit, nullptr);
}

TEST_F(AsyncRedisService, ARejectedRequestTakesNothingFromItsOtherLimits) {
  for (int i = 0; i < 2; ++i) MustCheckAsync(Request({{{"route", "/r"}}}));
  const CheckResponse both = MustCheckAsync(Request({{{"api_key", "k"}}, {{"route", "/r"}}}));
  EXPECT_EQ(both.overall, Code::kOverLimit);
  EXPECT_EQ(both.statuses[0].code, Code::kOk);
  EXPECT_EQ(both.statuses[0].remaining, 10) << "reported as after the give-back";
  EXPECT_EQ(both.statuses[1].code, Code::kOverLimit);
  EXPECT_EQ(MustCheckAsync(Request({{{"api_key", "k"}}})).statuses[0].remaining, 9)
      << "the rejected request took nothing";
}

TEST_F(AsyncRedisService, ShadowLimitsAreObservedAsynchronously) {
  const CheckResponse first = MustCheckAsync(Request({{{"shadowed", "s"}}}));
  EXPECT_FALSE(first.statuses[0].shadow_over_limit);
  const CheckResponse second = MustCheckAsync(Request({{{"api_key", "s"}}, {{"shadowed", "s"}}}));
  EXPECT_EQ(second.overall, Code::kOk);
  EXPECT_TRUE(second.statuses[1].shadow_over_limit);
  EXPECT_EQ(second.statuses[1].code, Code::kOk);
}

TEST_F(AsyncRedisService, ManyChecksInFlightFromOneThreadCountExactly) {
  constexpr int kChecks = 200;
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  int allowed = 0;
  int degraded = 0;
  const CheckRequest r = Request({{{"api_key", "busy"}}});
  for (int i = 0; i < kChecks; ++i) {
    service_->CheckAsync(r, [&](Result<CheckResponse> response) {
      std::lock_guard<std::mutex> lock(mu);
      ++answered;
      allowed += response.has_value() && response->overall == Code::kOk;
      degraded += response.has_value() && response->statuses[0].degraded;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == kChecks; }));
  EXPECT_EQ(degraded, 0) << "Redis did not answer within the command timeout";
  EXPECT_EQ(allowed, 10);
}

TEST_F(AsyncRedisService, RedisGoneFailsByEachLimitsPolicy) {
  redis_.Stop();
  const CheckResponse open = MustCheckAsync(Request({{{"api_key", "down"}}}));
  EXPECT_EQ(open.overall, Code::kOk);
  EXPECT_TRUE(open.statuses[0].degraded);
  const CheckResponse closed = MustCheckAsync(Request({{{"closed", "down"}}}));
  EXPECT_EQ(closed.overall, Code::kOverLimit);
  EXPECT_TRUE(closed.statuses[0].degraded);
  ASSERT_TRUE(redis_.Restart());
}

// On Redis an override's counter is the Redis key of its (rate, key), whatever the service does
// with the limiters of its rates: a 5/day key stays refused while 2,000 other rates (more than
// the service keeps limiters for) are used, one key each (per second: within the Redis store's
// range today).
TEST_F(AsyncRedisService, AnOverrideCounterOutlivesItsLimiter) {
  const auto overridden = [](const std::string& key, int64_t rate, Unit unit = Unit::kDay) {
    CheckRequest r;
    r.domain = "api";
    r.descriptors.push_back({{{"api_key", key}}, {}, LimitOverride{rate, LimitPeriod::Of(unit)}});
    return r;
  };
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(MustCheckAsync(overridden("tenant", 5)).statuses.at(0).code, Code::kOk) << i;
  }
  for (int64_t rate = 100; rate < 2'100; ++rate) {
    ASSERT_EQ(MustCheckAsync(overridden("caller-" + std::to_string(rate), rate, Unit::kSecond))
                  .statuses.at(0)
                  .code,
              Code::kOk)
        << rate;
  }
  EXPECT_EQ(MustCheckAsync(overridden("tenant", 5)).statuses.at(0).code, Code::kOverLimit);
  EXPECT_EQ(MustCheckAsync(overridden("tenant", 6)).statuses.at(0).code, Code::kOk)
      << "another rate, another counter";
}

}  // namespace
}  // namespace sluice::server
