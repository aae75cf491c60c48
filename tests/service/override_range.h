// Descriptor `limit` overrides over the whole range (issue 25), on any store: every unit x
// requests_per_unit values chosen for their factors, up to 2^32-1, are served -- before, rates
// such as 30001 per day were refused (a 400 over HTTP) -- and they count: the whole allowance
// is admitted at once, and the next hit, at the same instant, is over the limit.
#ifndef SLUICE_TESTS_SERVICE_OVERRIDE_RANGE_H_
#define SLUICE_TESTS_SERVICE_OVERRIDE_RANGE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "config/limit_unit.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/store.h"
#include "support/temp_config_dir.h"

namespace sluice::server::test {

// `store` decides at the times it is given (a Redis store without its server's clock): the
// service's clock stands still, so no refill comes between the two checks of a rate.
inline void ExpectEveryOverrideRateServedAndCounted(std::shared_ptr<Store> store) {
  TempConfigDir dir("override-range");
  auto config = LoadConfig(dir.Write("api.yaml", R"yaml(
domain: api
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 10}
)yaml"));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ManualClock clock{FromNanos(int64_t{1'780'000'000} * 1'000'000'000)};
  ServiceOptions options;
  options.clock = &clock;
  auto service = RateLimitService::Create(*config, std::move(store), options, nullptr);
  ASSERT_TRUE(service.has_value()) << service.error().message;
  for (Unit unit : kAllUnits) {
    for (int64_t rate : {int64_t{1}, int64_t{7}, int64_t{30001}, int64_t{999999},
                         int64_t{2147483647}, int64_t{4294967295}}) {
      const std::string what = std::to_string(rate) + "/" + std::string(UnitName(unit));
      const auto check = [&](int64_t hits) {
        CheckRequest r;
        r.domain = "api";
        r.hits = hits;
        r.descriptors.push_back(
            {{{"api_key", what}}, {}, LimitOverride{rate, LimitPeriod::Of(unit)}});
        auto response = (*service)->Check(r);
        EXPECT_TRUE(response.has_value()) << what << ": " << response.error().message;
        return response ? response->statuses[0] : DescriptorStatus{};
      };
      const DescriptorStatus all = check(rate);
      EXPECT_EQ(all.code, Code::kOk) << what;
      EXPECT_EQ(all.remaining, 0) << what;
      EXPECT_EQ(check(1).code, Code::kOverLimit) << what;
    }
  }
}

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_SERVICE_OVERRIDE_RANGE_H_
