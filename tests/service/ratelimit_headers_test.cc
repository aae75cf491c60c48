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
    minute_.period = LimitPeriod::Of(Unit::kMinute);
    minute_.requests_per_unit = 10;
    second_.name = "per_second";
    second_.kind = LimitKind::kLimited;
    second_.period = LimitPeriod::Of(Unit::kSecond);
    second_.requests_per_unit = 5;
    five_minutes_.name = "per_5m";
    five_minutes_.kind = LimitKind::kLimited;
    five_minutes_.period = *ParsePeriod("5m");
    five_minutes_.requests_per_unit = 600;
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
  Limit five_minutes_;
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

// A `period` no unit names: the policy's window is its length, and a request that can never pass
// waits one of it.
TEST_F(RateLimitHeadersTest, APeriodIsTheWindow) {
  const auto r = Response({Status(five_minutes_, Code::kOverLimit, kNever)});
  const Headers h = RateLimitHeaders(r, {});
  EXPECT_EQ(Get(h, "RateLimit-Policy"), R"("per_5m";q=600;w=300)");
  EXPECT_EQ(Get(h, "Retry-After"), "300");
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

// --grpc-response-headers upstream: envoyproxy/ratelimit's three fields of one status, chosen as
// its service.go chooses (read there, written here by hand), whatever else is asked for.
TEST_F(RateLimitHeadersTest, UpstreamIsThreeFieldsOfTheStatusWithTheLeastRemaining) {
  auto r = Response({Status(minute_, Code::kOk, Duration{0}), Status(second_, Code::kOk, {})});
  r.statuses[0].remaining = 7;
  r.statuses[0].reset_after = milliseconds(41'200);
  r.statuses[1].remaining = 4;
  r.statuses[1].reset_after = milliseconds(300);
  EXPECT_EQ(
      RateLimitHeaders(r, {.set = HeaderSet::kUpstream, .legacy = true}),
      (Headers{{"RateLimit-Limit", "5"}, {"RateLimit-Remaining", "4"}, {"RateLimit-Reset", "1"}}));
  // A tie keeps the first; an unmatched, unlimited or replaced status is never chosen.
  r.statuses[0].remaining = 4;
  DescriptorStatus unmatched;
  Limit unlimited = minute_;
  unlimited.kind = LimitKind::kUnlimited;
  DescriptorStatus open = Status(unlimited, Code::kOk, {});
  open.remaining = 0;
  DescriptorStatus replaced = Status(second_, Code::kOk, {});
  replaced.remaining = 0;
  replaced.replaced = true;
  r.statuses.insert(r.statuses.begin(), {unmatched, open, replaced});
  EXPECT_EQ(
      RateLimitHeaders(r, {.set = HeaderSet::kUpstream}),
      (Headers{
          {"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "4"}, {"RateLimit-Reset", "42"}}));
}

TEST_F(RateLimitHeadersTest, UpstreamPrefersTheLastOverLimitStatusAndSendsNoRetryAfter) {
  auto r = Response({Status(second_, Code::kOverLimit, seconds(1)),
                     Status(minute_, Code::kOk, Duration{0}),
                     Status(minute_, Code::kOverLimit, seconds(30))});
  r.statuses[1].remaining = 0;  // less than nothing cannot win over an over-limit status
  r.statuses[2].reset_after = seconds(30);
  EXPECT_EQ(
      RateLimitHeaders(r, {.set = HeaderSet::kUpstream}),
      (Headers{
          {"RateLimit-Limit", "10"}, {"RateLimit-Remaining", "0"}, {"RateLimit-Reset", "30"}}));
  // A shadow limit over its limit says OK to Envoy: not an over-limit status.
  auto shadow = Response({Status(minute_, Code::kOk, Duration{0}),
                          Status(second_, Code::kOk, Duration{0}, Mode::kShadow)});
  shadow.statuses[0].remaining = 2;
  shadow.statuses[1].remaining = 0;
  shadow.statuses[1].shadow_over_limit = true;
  EXPECT_EQ(Get(RateLimitHeaders(shadow, {.set = HeaderSet::kUpstream}), "RateLimit-Limit"), "5")
      << "the least remaining, not an override";
}

TEST_F(RateLimitHeadersTest, UpstreamNeverTakesTheLargestRemainingAndSkipsAnAnswerWithoutLimits) {
  auto r = Response({Status(minute_, Code::kOk, Duration{0})});
  r.statuses[0].remaining = int64_t{1} << 40;  // UINT32_MAX on the wire: never "less"
  EXPECT_EQ(RateLimitHeaders(r, {.set = HeaderSet::kUpstream}), Headers{});
  EXPECT_EQ(RateLimitHeaders(Response({DescriptorStatus{}}), {.set = HeaderSet::kUpstream}),
            Headers{});
}

TEST_F(RateLimitHeadersTest, OffIsNothingEvenOverTheLimitWithLegacyHeaders) {
  const auto r = Response({Status(second_, Code::kOverLimit, seconds(1))});
  EXPECT_EQ(RateLimitHeaders(r, {.set = HeaderSet::kOff, .legacy = true, .soft_over_limit = true}),
            Headers{});
}

TEST_F(RateLimitHeadersTest, HeaderSetNames) {
  for (const HeaderSet set : {HeaderSet::kDraft11, HeaderSet::kUpstream, HeaderSet::kOff}) {
    EXPECT_EQ(ParseHeaderSet(HeaderSetName(set)), set);
  }
  EXPECT_EQ(ParseHeaderSet("draft11"), HeaderSet::kDraft11);
  EXPECT_EQ(ParseHeaderSet("upstream"), HeaderSet::kUpstream);
  EXPECT_EQ(ParseHeaderSet("off"), HeaderSet::kOff);
  EXPECT_EQ(ParseHeaderSet("Draft11"), std::nullopt);
}

}  // namespace
}  // namespace sluice::server
