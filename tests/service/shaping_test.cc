// Shapers in the service: an admitted request's delay (the longest of its enforced shapers'),
// max_delay refusing what would wait longer, and what a refused request, a shadow or soft
// shaper and a charge do to the queues. Memory store, manual clock; the expected delays are
// worked out by hand from the rate (one release every 1/r = 100 ms, nginx limit_req's order).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"
#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 10/s shapers (one release every 100 ms): `slow` queues 20 (2 s), `short` queues 20 but waits
// at most 300 ms; `meter` refuses its 3rd request within a second; `watch` is a shadow shaper.
constexpr char kConfig[] = R"yaml(
domain: shop
descriptors:
  - key: slow
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 20,
                 shaper: true}
  - key: short
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 20,
                 shaper: true, max_delay: 300ms}
  - key: meter
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: fixed_window}
  - key: watch
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 20,
                 shaper: true, mode: shadow}
  - key: gentle
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 20,
                 shaper: true, mode: soft}
)yaml";

class Shaping : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = LoadConfig(dir_.Write("shop.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, nullptr);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }

  CheckResponse Check(std::vector<std::string> keys, bool charge = false) {
    CheckRequest r;
    r.domain = "shop";
    r.charge = charge;
    for (std::string& k : keys) r.descriptors.push_back({{{std::move(k), "v"}}, {}, {}});
    auto response = service_->Check(r);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? std::move(*response) : CheckResponse{};
  }

  ManualClock clock_{FromNanos(int64_t{1'000'000} * 1'000'000'000)};  // second-aligned
  test::TempConfigDir dir_{"shaping"};
  std::unique_ptr<RateLimitService> service_;
};

TEST_F(Shaping, AdmittedRequestsAreDelayedOneIntervalApartUntilTheQueueIsFull) {
  for (int i = 0; i < 20; ++i) {
    const CheckResponse r = Check({"slow"});
    ASSERT_EQ(r.overall, Code::kOk) << i;
    EXPECT_EQ(r.delay, milliseconds(100) * i) << i;
    EXPECT_EQ(r.statuses[0].delay, r.delay);
  }
  const CheckResponse full = Check({"slow"});
  EXPECT_EQ(full.overall, Code::kOverLimit);
  EXPECT_EQ(full.delay, Duration(0));
  EXPECT_EQ(full.statuses[0].retry_after, milliseconds(100));
}

TEST_F(Shaping, MaxDelayRefusesWhatWouldWaitLongerAndItTakesNothing) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Check({"short"}).delay, milliseconds(100) * i);
  const CheckResponse over = Check({"short"});  // would wait 400 ms
  EXPECT_EQ(over.overall, Code::kOverLimit);
  EXPECT_EQ(over.statuses[0].retry_after, milliseconds(100));
  EXPECT_EQ(over.statuses[0].remaining, 16) << "the queue had room: it took nothing";
  clock_.Advance(milliseconds(100));
  const CheckResponse later = Check({"short"});
  EXPECT_EQ(later.overall, Code::kOk);
  EXPECT_EQ(later.delay, milliseconds(300));
}

TEST_F(Shaping, ARequestWaitsForItsSlowestShaper) {
  for (int i = 0; i < 5; ++i) Check({"slow"});  // slow's queue: 500 ms ahead
  Check({"short"});                             // short's: 100 ms ahead
  const CheckResponse both = Check({"slow", "short"});
  ASSERT_EQ(both.overall, Code::kOk);
  EXPECT_EQ(both.statuses[0].delay, milliseconds(500));
  EXPECT_EQ(both.statuses[1].delay, milliseconds(100));
  EXPECT_EQ(both.delay, milliseconds(500));
}

TEST_F(Shaping, ARequestAnotherLimitRefusesLeavesNoPlaceInTheQueue) {
  Check({"meter"});
  Check({"meter"});
  for (int i = 0; i < 3; ++i) {
    const CheckResponse r = Check({"slow", "meter"});
    EXPECT_EQ(r.overall, Code::kOverLimit);
    EXPECT_EQ(r.delay, Duration(0));
    EXPECT_EQ(r.statuses[0].delay, Duration(0));
  }
  EXPECT_EQ(Check({"slow"}).delay, Duration(0)) << "the refused requests were given back";
  EXPECT_EQ(Check({"slow"}).delay, milliseconds(100));
}

TEST_F(Shaping, ShadowAndSoftShapersNeverDelay) {
  for (int i = 0; i < 25; ++i) {
    const CheckResponse r = Check({"watch", "gentle"});
    EXPECT_EQ(r.overall, Code::kOk) << i;
    EXPECT_EQ(r.delay, Duration(0)) << i;
    // Past 20 queued the shadow and soft limits say they would have refused.
    EXPECT_EQ(r.statuses[0].shadow_over_limit, i >= 20) << i;
    EXPECT_EQ(r.statuses[1].soft_over_limit, i >= 20) << i;
  }
}

TEST_F(Shaping, AChargeIsNotHeldButTakesItsPlace) {
  const CheckResponse charged = Check({"slow"}, /*charge=*/true);
  EXPECT_EQ(charged.overall, Code::kOk);
  EXPECT_EQ(charged.delay, Duration(0));
  EXPECT_EQ(Check({"slow"}).delay, milliseconds(100));
}

}  // namespace
}  // namespace sluice::server
