// POST /v1/check on a shaper: delay_ms is the wait nginx's limit_req (without nodelay) would
// impose, computed here from the arrival times alone -- each admitted request leaves 1/r after
// the one before it, or at once when the queue is empty; one over the queue or over max_delay is
// 429 and takes no place. The real service on the memory store, a manual clock, no network.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "config/config.h"
#include "http/http_api.h"
#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

// 4 per second (one release every 250 ms), a queue of 8 (2 s), waits of at most 1100 ms.
constexpr char kConfig[] = R"yaml(
domain: up
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: leaky_bucket, burst: 8,
                 shaper: true, max_delay: 1100ms}
)yaml";

constexpr int64_t kIntervalNs = 250'000'000;
constexpr int64_t kMaxDelayNs = 1'100'000'000;
constexpr int64_t kQueue = 8;

// nginx limit_req's schedule: the next release time; a request may leave no sooner.
struct Schedule {
  int64_t next_release = 0;
  // The delay a request arriving at t gets, or -1 when it is refused.
  int64_t Offer(int64_t t) {
    const int64_t release = std::max(next_release, t);
    const int64_t wait = release - t;
    // Requests ahead of this one: those whose release is still to come.
    const int64_t ahead = (wait + kIntervalNs - 1) / kIntervalNs;
    if (ahead + 1 > kQueue || wait > kMaxDelayNs) return -1;
    next_release = release + kIntervalNs;
    return wait;
  }
};

TEST(ShapingDelay, DelayMsIsTheLimitReqScheduleAndRefusalsTakeNothing) {
  test::TempConfigDir dir("shaping-http");
  auto config = LoadConfig(dir.Write("up.yaml", kConfig));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ManualClock clock(FromNanos(int64_t{5'000'000} * 1'000'000'000));
  ServiceOptions options;
  options.clock = &clock;
  auto opened = OpenStore("memory");
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  auto service = RateLimitService::Create(*config, *opened, options, nullptr);
  ASSERT_TRUE(service.has_value()) << service.error().message;
  Metrics metrics;
  HttpApi api(service->get(), &metrics, {});
  const std::string body =
      R"({"domain":"up","descriptors":[{"entries":[{"key":"client","value":"c1"}]}]})";

  Schedule nginx;
  std::mt19937_64 rng(14);
  int64_t t = 0;
  int delayed = 0, refused = 0;
  for (int i = 0; i < 600; ++i) {
    // Mostly bursts at one instant, with gaps of 0 to 1.5 release intervals (in whole ms:
    // the milliseconds the API shows are then exact).
    if (rng() % 2 == 0) t += static_cast<int64_t>(rng() % 376) * 1'000'000;
    clock.Set(FromNanos(int64_t{5'000'000} * 1'000'000'000 + t));
    const HttpReply reply = api.Handle({"POST", "/v1/check", "", body});
    const nlohmann::json answer = nlohmann::json::parse(reply.body);
    const int64_t want = nginx.Offer(t);
    if (want < 0) {
      ASSERT_EQ(reply.status, 429) << "request " << i << " at " << t << " ns: " << reply.body;
      EXPECT_EQ(answer["delay_ms"], 0);
      ++refused;
      continue;
    }
    ASSERT_EQ(reply.status, 200) << "request " << i << " at " << t << " ns: " << reply.body;
    ASSERT_EQ(answer["delay_ms"], want / 1'000'000) << "request " << i;
    // Said, not waited: the caller holds its own request (docs/server.md).
    EXPECT_EQ(reply.send_at, std::chrono::steady_clock::time_point{}) << "request " << i;
    delayed += want > 0;
  }
  EXPECT_GT(delayed, 100);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace sluice::server
