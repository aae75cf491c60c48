// Reading what servers say: Retry-After in both forms, the draft-11 RateLimit fields (the
// draft's examples), the legacy families, and a table of malformed values that must be ignored
// or clamped, never trusted. The oracle is the RFCs' own examples and hand-computed times
// (784111777 is Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date).
#include "sluice/client/server_hints.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::client {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kExampleDate = 784111777;
const Timestamp kBeforeExample = FromNanos((kExampleDate - 120) * 1'000'000'000);
const HintLimits kLong{.max_wait = std::chrono::hours(24)};

TEST(RetryAfterTest, DelaySecondsIsTheWait) {
  const auto w = ParseRetryAfter("120", kBeforeExample, kLong);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->wait, 120s);
  EXPECT_FALSE(w->clamped);
  EXPECT_EQ(ParseRetryAfter("0", kBeforeExample)->wait, 0s);
  EXPECT_EQ(ParseRetryAfter(" 7 ", kBeforeExample)->wait, 7s);  // OWS around a field value
}

TEST(RetryAfterTest, EveryHttpDateFormIsTheTimeUntilThatDate) {
  for (const char* date : {"Sun, 06 Nov 1994 08:49:37 GMT",   // IMF-fixdate
                           "Sunday, 06-Nov-94 08:49:37 GMT",  // obsolete RFC 850
                           "Sun Nov  6 08:49:37 1994"}) {     // obsolete asctime
    const auto w = ParseRetryAfter(date, kBeforeExample, kLong);
    ASSERT_TRUE(w) << date;
    EXPECT_EQ(w->wait, 120s) << date;
  }
}

TEST(RetryAfterTest, ADateInThePastIsNoWait) {
  const Timestamp later = FromNanos((kExampleDate + 3600) * 1'000'000'000);
  const auto w = ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", later);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->wait, 0s);
}

TEST(RetryAfterTest, ATwoDigitYearMoreThanFiftyYearsAheadIsLastCentury) {
  // now = 2026-12-04: "77" read as 2077 would be more than 50 years ahead, so it is 1977, long
  // past; "26" is this year.
  const Timestamp now = FromNanos(int64_t{1796342400} * 1'000'000'000);  // 2026-12-04T00:00Z
  EXPECT_EQ(ParseRetryAfter("Thursday, 01-Jan-77 00:00:00 GMT", now)->wait, 0s);
  const auto soon = ParseRetryAfter("Friday, 04-Dec-26 00:01:00 GMT", now);
  ASSERT_TRUE(soon);
  EXPECT_EQ(soon->wait, 60s);
}

TEST(RetryAfterTest, AHugeWaitIsClampedAndSaysSo) {
  const HintLimits limits{.max_wait = 300s};
  for (const char* huge :
       {"86400", "99999999999999999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"}) {
    const auto w = ParseRetryAfter(huge, kBeforeExample, limits);
    ASSERT_TRUE(w) << huge;
    EXPECT_EQ(w->wait, 300s) << huge;
    EXPECT_TRUE(w->clamped) << huge;
  }
  EXPECT_FALSE(ParseRetryAfter("300", kBeforeExample, limits)->clamped);
}

TEST(RetryAfterTest, MalformedValuesAreIgnored) {
  for (const char* bad : {"", " ", "-1", "+5", "1.5", "1e3", "0x10", "soon", "12 s", "1,2",
                          "Sun, 06 Nov 1994 08:49:37",            // no GMT
                          "Sun, 6 Nov 1994 08:49:37 GMT",         // one-digit day in IMF
                          "Sun, 31 Feb 1994 08:49:37 GMT",        // no such day
                          "Sun, 06 Nov 1994 24:00:00 GMT",        // no such hour
                          "Sun, 06 Foo 1994 08:49:37 GMT",        // no such month
                          "Sun, 06 Nov 1994 08:49:37 GMT junk",   // trailing garbage
                          "Sunday, 06-Nov-1994 08:49:37 GMT"}) {  // RFC 850 has two digits
    EXPECT_FALSE(ParseRetryAfter(bad, kBeforeExample)) << "'" << bad << "'";
  }
}

TEST(RateLimitFieldsTest, TheDraftsExamples) {
  // draft-ietf-httpapi-ratelimit-headers-11: a policy and its state.
  auto policies = ParseRateLimitPolicy(R"("default";q=100;w=10)");
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_EQ(policies[0].name, "default");
  EXPECT_EQ(policies[0].quota, 100);
  EXPECT_EQ(policies[0].window, 10s);
  auto states = ParseRateLimit(R"("default";r=50;t=30)");
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].name, "default");
  EXPECT_EQ(states[0].remaining, 50);
  ASSERT_TRUE(states[0].reset);
  EXPECT_EQ(states[0].reset->wait, 30s);
}

TEST(RateLimitFieldsTest, SeveralPoliciesWithUnknownParametersIgnored) {
  auto policies = ParseRateLimitPolicy(
      R"("permin";q=50;w=60, "perhr";q=1000;w=3600;qu="requests";pk=:cHsxMjM0:, "day";q=9;x-new=?1)");
  ASSERT_EQ(policies.size(), 3u);
  EXPECT_EQ(policies[0].name, "permin");
  EXPECT_EQ(policies[1].quota, 1000);
  EXPECT_EQ(policies[1].window, 3600s);
  EXPECT_EQ(policies[2].name, "day");
  EXPECT_FALSE(policies[2].window);  // w is optional
  // sluiced's own form (docs/server.md).
  auto states = ParseRateLimit(R"("plan_pro";r=0;t=15, "per_ip";r=199;t=1)");
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[1].name, "per_ip");
  EXPECT_EQ(states[1].remaining, 199);
}

TEST(RateLimitFieldsTest, MembersWithoutTheirRequiredParameterAreSkipped) {
  auto policies =
      ParseRateLimitPolicy(R"("a";w=10, "b";q=-1, "c";q=1.5, "d";q="5", e;q=5, "f";q=3)");
  ASSERT_EQ(policies.size(), 1u);
  EXPECT_EQ(policies[0].name, "f");
  auto states = ParseRateLimit(R"("a";t=10, "b";r=-1, (1 2);r=3, "c";r=4;t=-1)");
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].name, "c");
  EXPECT_FALSE(states[0].reset);
}

TEST(RateLimitFieldsTest, AFieldThatIsNotAStructuredListIsIgnoredWhole) {
  for (const char* bad :
       {R"("a";q=5,)", R"("a";q=5 "b";q=6)", R"("a;q=5)", R"("a";Q=5)", R"("a";q=1234567890123456)",
        R"("a";q=5, , "b";q=6)", "\"a\x01\";q=5", R"("a";q=5;=1)", R"(("a";q=5)"}) {
    EXPECT_TRUE(ParseRateLimitPolicy(bad).empty()) << bad;
  }
  EXPECT_TRUE(ParseRateLimitPolicy("").empty());
}

TEST(RateLimitFieldsTest, EveryBareItemTypeIsAValidParameter) {
  // RFC 9651's types as unknown parameters: the field stays valid and q is read.
  auto policies = ParseRateLimitPolicy(
      R"("a";q=5;dec=-1.5;t=tok/en:x;b=:aGk=:;yes;no=?0;d=@1659578233;s=%"caf%c3%a9", (1 "x");q=1)");
  ASSERT_EQ(policies.size(), 1u);  // the inner list is a member, but not a policy
  EXPECT_EQ(policies[0].quota, 5);
  for (const char* bad : {R"("a";q=5;x=1.2345)",  // a Decimal has at most 3 decimals
                          R"("a";q=5;x=1.)",      // and at least 1
                          R"("a";q=5;x=:not b64:)", R"("a";q=5;x=?2)", R"("a";q=5;x=%"%C3%A9")"}) {
    EXPECT_TRUE(ParseRateLimitPolicy(bad).empty()) << bad;
  }
}

TEST(RateLimitFieldsTest, AHugeResetIsClamped) {
  auto states = ParseRateLimit(R"("a";r=1;t=999999999999999)", {.max_wait = 60s});
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].reset->wait, 60s);
  EXPECT_TRUE(states[0].reset->clamped);
}

TEST(ServerHintsTest, ReadsEveryFieldCaseInsensitivelyAndJoinsRepeatedOnes) {
  const std::vector<Header> headers = {{"retry-after", "3"},
                                       {"RATELIMIT-POLICY", R"("a";q=10;w=1)"},
                                       {"RateLimit-Policy", R"("b";q=100;w=60)"},
                                       {"ratelimit", R"("a";r=0;t=1)"}};
  const ServerHints h = ReadServerHints(headers, kBeforeExample);
  EXPECT_EQ(h.retry_after->wait, 3s);
  ASSERT_EQ(h.policies.size(), 2u);
  EXPECT_EQ(h.policies[1].name, "b");
  ASSERT_EQ(h.states.size(), 1u);
  EXPECT_EQ(h.states[0].remaining, 0);
}

TEST(ServerHintsTest, LegacyXRateLimitWithADeltaReset) {
  const std::vector<Header> headers = {
      {"X-RateLimit-Limit", "60"}, {"X-RateLimit-Remaining", "59"}, {"X-RateLimit-Reset", "42"}};
  const ServerHints h = ReadServerHints(headers, kBeforeExample);
  ASSERT_EQ(h.policies.size(), 1u);
  EXPECT_EQ(h.policies[0].quota, 60);
  ASSERT_EQ(h.states.size(), 1u);
  EXPECT_EQ(h.states[0].remaining, 59);
  EXPECT_EQ(h.states[0].reset->wait, 42s);
}

TEST(ServerHintsTest, GitHubsEpochResetIsTheTimeUntilThen) {
  // GitHub: x-ratelimit-reset is a Unix time in seconds.
  const Timestamp now = FromNanos(int64_t{1796342400} * 1'000'000'000);
  const std::vector<Header> headers = {{"x-ratelimit-limit", "5000"},
                                       {"x-ratelimit-remaining", "4999"},
                                       {"x-ratelimit-reset", "1796342490"}};
  const ServerHints h = ReadServerHints(headers, now);
  ASSERT_EQ(h.states.size(), 1u);
  EXPECT_EQ(h.states[0].reset->wait, 90s);
  // An epoch reset already past is no wait; one absurdly far ahead is clamped.
  EXPECT_EQ(ParseLegacyReset("1796342000", now)->wait, 0s);
  EXPECT_TRUE(ParseLegacyReset("9999999999999", now)->clamped);
  // The threshold between the two readings: ten years of seconds is still a delta.
  EXPECT_EQ(ParseLegacyReset(std::to_string(kEpochResetThreshold), now, {.max_wait = 1s})->wait,
            1s);
}

TEST(ServerHintsTest, TheEarlierDraftsFieldsWithAPolicyList) {
  const std::vector<Header> headers = {
      {"RateLimit-Limit", "100, 100;w=60"}, {"RateLimit-Remaining", "7"}, {"RateLimit-Reset", "9"}};
  const ServerHints h = ReadServerHints(headers, kBeforeExample);
  ASSERT_EQ(h.policies.size(), 1u);
  EXPECT_EQ(h.policies[0].quota, 100);
  EXPECT_EQ(h.states[0].remaining, 7);
  EXPECT_EQ(h.states[0].reset->wait, 9s);
}

TEST(ServerHintsTest, TheDraftElevenFieldsWinOverLegacyOnes) {
  const std::vector<Header> headers = {{"X-RateLimit-Remaining", "500"},
                                       {"RateLimit", R"("a";r=1;t=2)"}};
  const ServerHints h = ReadServerHints(headers, kBeforeExample);
  ASSERT_EQ(h.states.size(), 1u);
  EXPECT_EQ(h.states[0].remaining, 1);
}

TEST(ServerHintsTest, MalformedLegacyValuesAreIgnored) {
  const std::vector<Header> headers = {{"X-RateLimit-Limit", "lots"},
                                       {"X-RateLimit-Remaining", "-3"},
                                       {"X-RateLimit-Reset", "soon"},
                                       {"Retry-After", "-1"}};
  const ServerHints h = ReadServerHints(headers, kBeforeExample);
  EXPECT_FALSE(h.retry_after);
  EXPECT_TRUE(h.policies.empty());
  EXPECT_TRUE(h.states.empty());
}

}  // namespace
}  // namespace sluice::client
