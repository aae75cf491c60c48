// The response fields decided once in the service (ratelimit_headers.h), which both front ends
// copy: when Retry-After is sent and its value, the soft-over-limit flag, and the order of all.
#include "service/ratelimit_headers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Headers = std::vector<std::pair<std::string, std::string>>;

class RateLimitHeadersTest : public ::testing::Test {
 protected:
  RateLimitHeadersTest() {
    minute_.name = "per_minute";
    minute_.kind = LimitKind::kLimited;
    minute_.unit = Unit::kMinute;
    minute_.requests_per_unit = 10;
    second_.name = "per_second";
    second_.kind = LimitKind::kLimited;
    second_.unit = Unit::kSecond;
    second_.requests_per_unit = 5;
  }

  DescriptorStatus Status(const Limit& limit, Code code, Duration retry_after,
                          Mode mode = Mode::kEnforce) {
    DescriptorStatus s;
    s.limit = &limit;
    s.code = code;
    s.mode = mode;
    s.remaining = code == Code::kOk ? 3 : 0;
    s.reset_after = seconds(2);
    s.retry_after = retry_after;
    s.over_limit = code == Code::kOverLimit;
    return s;
  }

  static std::string Get(const Headers& headers, const std::string& name) {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return "<absent>";
  }

  static CheckResponse Response(std::vector<DescriptorStatus> statuses) {
    CheckResponse r;
    r.statuses = std::move(statuses);
    for (const DescriptorStatus& s : r.statuses) {
      if (s.code == Code::kOverLimit) r.overall = Code::kOverLimit;
    }
    return r;
  }

  Limit minute_;
  Limit second_;
};

TEST_F(RateLimitHeadersTest, NoRetryAfterWhenAllowed) {
  const auto r = Response({Status(minute_, Code::kOk, Duration{0})});
  EXPECT_EQ(Get(RateLimitHeaders(r, {}), "Retry-After"), "<absent>");
}

TEST_F(RateLimitHeadersTest, RetryAfterIsTheLongestWaitInWholeSecondsRoundedUp) {
  EXPECT_EQ(
      Get(RateLimitHeaders(Response({Status(minute_, Code::kOverLimit, milliseconds(1200))}), {}),
          "Retry-After"),
      "2");
  EXPECT_EQ(Get(RateLimitHeaders(Response({Status(minute_, Code::kOverLimit, seconds(3))}), {}),
                "Retry-After"),
            "3");
  const auto two = Response({Status(second_, Code::kOverLimit, milliseconds(300)),
                             Status(minute_, Code::kOverLimit, milliseconds(4100))});
  EXPECT_EQ(Get(RateLimitHeaders(two, {}), "Retry-After"), "5");
}

TEST_F(RateLimitHeadersTest, RetryAfterIsAtLeastOneSecond) {
  const auto r = Response({Status(minute_, Code::kOverLimit, Duration{0})});
  EXPECT_EQ(Get(RateLimitHeaders(r, {}), "Retry-After"), "1");
  // Over with no limit to say when (nothing matched carries a wait): still 1.
  CheckResponse bare;
  bare.overall = Code::kOverLimit;
  bare.statuses.emplace_back();
  EXPECT_EQ(Get(RateLimitHeaders(bare, {}), "Retry-After"), "1");
}

TEST_F(RateLimitHeadersTest, HitsThatCanNeverPassWaitOneWindow) {
  const auto r = Response({Status(minute_, Code::kOverLimit, kNever)});
  EXPECT_EQ(Get(RateLimitHeaders(r, {}), "Retry-After"), "60");
}

TEST_F(RateLimitHeadersTest, AShadowOrSoftOverLimitIsNoReasonToWait) {
  auto r = Response({Status(minute_, Code::kOk, Duration{0}, Mode::kSoft)});
  r.statuses[0].soft_over_limit = true;
  r.statuses[0].retry_after = seconds(30);
  EXPECT_EQ(Get(RateLimitHeaders(r, {}), "Retry-After"), "<absent>");
}

TEST_F(RateLimitHeadersTest, TheSoftOverLimitFlagOnlyWhereTheCarrierSendsIt) {
  auto r = Response({Status(minute_, Code::kOk, Duration{0}, Mode::kSoft)});
  r.statuses[0].soft_over_limit = true;
  EXPECT_EQ(Get(RateLimitHeaders(r, {.soft_over_limit = true}), "Sluice-Soft-Over-Limit"), "?1");
  EXPECT_EQ(Get(RateLimitHeaders(r, {}), "Sluice-Soft-Over-Limit"), "<absent>");
  r.statuses[0].soft_over_limit = false;
  EXPECT_EQ(Get(RateLimitHeaders(r, {.soft_over_limit = true}), "Sluice-Soft-Over-Limit"),
            "<absent>");
}

TEST_F(RateLimitHeadersTest, EveryFieldInItsOrder) {
  auto r = Response({Status(second_, Code::kOverLimit, milliseconds(200)),
                     Status(minute_, Code::kOk, Duration{0}, Mode::kSoft)});
  r.statuses[1].soft_over_limit = true;
  EXPECT_EQ(RateLimitHeaders(r, {.legacy = true, .soft_over_limit = true}),
            (Headers{{"RateLimit-Policy", R"("per_second";q=5;w=1, "per_minute";q=10;w=60)"},
                     {"RateLimit", R"("per_second";r=0;t=2, "per_minute";r=3;t=2)"},
                     {"Retry-After", "1"},
                     {"X-RateLimit-Limit", "5"},
                     {"X-RateLimit-Remaining", "0"},
                     {"X-RateLimit-Reset", "2"},
                     {"Sluice-Soft-Over-Limit", "?1"}}));
}

}  // namespace
}  // namespace sluice::server
