// The JSON codec of POST /v1/check: every accepted shape, every rejected one (with the field it
// names), and the rendered response.
#include "http/check_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "service/check_rules.h"

namespace sluice::server {
namespace {

// The error POST /v1/check answers for `body`: the parser's (syntax), else the service's rules'
// for an HTTP caller (service/check_rules.h), in the words HTTP has always used.
std::string ParseError(const std::string& body, const CheckLimits& limits = {}) {
  auto r = ParseCheckRequest(body, limits);
  if (r) {
    EXPECT_EQ(r->caller, Caller::kHttpJson);
    auto valid = ValidateCheck(*r, limits);
    EXPECT_FALSE(valid.has_value()) << body;
    return valid ? "" : valid.error().message;
  }
  return r.error().message;
}

TEST(CheckJson, ParsesTheIssueExample) {
  auto r = ParseCheckRequest(
      R"({"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k1"}],"hits":3}],"hits":2})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->domain, "api");
  EXPECT_EQ(r->hits, 2);
  ASSERT_EQ(r->descriptors.size(), 1u);
  EXPECT_EQ(r->descriptors[0].hits, 3);
  ASSERT_EQ(r->descriptors[0].entries.size(), 1u);
  EXPECT_EQ(r->descriptors[0].entries[0].first, "api_key");
  EXPECT_EQ(r->descriptors[0].entries[0].second, "k1");
  EXPECT_FALSE(r->descriptors[0].limit_override.has_value());
}

TEST(CheckJson, HitsDefaultToOneAndKeepEntryOrder) {
  auto r = ParseCheckRequest(
      R"({"domain":"d","descriptors":[{"entries":[{"key":"b","value":"2"},{"key":"a","value":"1"}]}]})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->hits, 1);
  EXPECT_FALSE(r->descriptors[0].hits.has_value());
  EXPECT_EQ(r->descriptors[0].entries[0].first, "b");
  EXPECT_EQ(r->descriptors[0].entries[1].first, "a");
}

TEST(CheckJson, ParsesALimitOverride) {
  auto r = ParseCheckRequest(
      R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
          "limit":{"requests_per_unit":5,"unit":"MINUTE"}}]})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_TRUE(r->descriptors[0].limit_override.has_value());
  EXPECT_EQ(r->descriptors[0].limit_override->requests_per_unit, 5);
  EXPECT_EQ(r->descriptors[0].limit_override->unit, Unit::kMinute);
}

TEST(CheckJson, RejectsMalformedAndWrongTypes) {
  EXPECT_EQ(ParseError("{\"domain\":"), "the body is not valid JSON");
  EXPECT_EQ(ParseError(""), "the body is not valid JSON");
  EXPECT_EQ(ParseError("[]"), "the body must be a JSON object");
  EXPECT_EQ(ParseError(R"({"domain":1,"descriptors":[]})"), "domain: must be a string");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":{}})"), "descriptors: must be an array");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":1}]}]})"),
            "descriptors[0].entries[0].value: must be a string");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}],
                          "hits":1.5})"),
            "hits: must be an integer");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
                          "hits":"1"}]})"),
            "descriptors[0].hits: must be an integer");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}],
                          "hits":-1})"),
            "hits: must be between 0 and 1000000000");
}

TEST(CheckJson, RejectsUnknownAndMissingFields) {
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[],"extra":1})"), "unknown field 'extra'");
  EXPECT_EQ(ParseError(R"({"descriptors":[]})"), "missing 'domain'");
  EXPECT_EQ(ParseError(R"({"domain":"d"})"), "missing 'descriptors'");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k"}]}]})"),
            "descriptors[0].entries[0]: missing 'value'");
  EXPECT_EQ(
      ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v","x":1}]}]})"),
      "descriptors[0].entries[0]: unknown field 'x'");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
                          "limit":{"requests_per_unit":1,"unit":"fortnight"}}]})"),
            "descriptors[0].limit.unit: unknown unit 'fortnight' (second, minute, hour, day, "
            "week, month or year)");
}

TEST(CheckJson, RejectsEmptiesAndSizesOverTheLimits) {
  EXPECT_EQ(ParseError(R"({"domain":"","descriptors":[]})"), "domain: must not be empty");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[]})"), "descriptors: must not be empty");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[]}]})"),
            "descriptors[0].entries: must not be empty");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"","value":"v"}]}]})"),
            "descriptors[0].entries[0].key: must not be empty");

  CheckLimits small;
  small.max_descriptors = 2;
  small.max_entries = 1;
  small.max_key_bytes = 3;
  small.max_value_bytes = 4;
  small.max_hits = 10;
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"long","value":"v"}]}]})",
                       small),
            "descriptors[0].entries[0].key: 4 bytes, over the 3-byte limit");
  EXPECT_EQ(
      ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"12345"}]}]})",
                 small),
      "descriptors[0].entries[0].value: 5 bytes, over the 4-byte limit");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"},
                          {"key":"k","value":"v"}]}]})",
                       small),
            "descriptors[0].entries: 2 entries, over the limit of 1");
  const std::string d = R"({"entries":[{"key":"k","value":"v"}]})";
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[)" + d + "," + d + "," + d + "]}", small),
            "descriptors: 3 descriptors, over the limit of 2");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[)" + d + R"(],"hits":11})", small),
            "hits: must be between 0 and 10");
}

// Any integer is hits to the parser; one beyond int64 is refused by the rules like any other
// out of range.
TEST(CheckJson, HitsBeyondInt64AreOutOfRange) {
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}],
                          "hits":18446744073709551615})"),
            "hits: must be between 0 and 1000000000");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
                          "hits":9223372036854775808}]})"),
            "descriptors[0].hits: must be between 0 and 1000000000");
}

TEST(CheckJson, RendersEveryStatusField) {
  Limit limit;
  limit.name = "per_key";
  limit.requests_per_unit = 10;
  limit.unit = Unit::kMinute;
  limit.spec.algorithm = Algorithm::kGcra;
  limit.spec.limit = 10;
  limit.spec.burst = 20;
  CheckResponse response;
  response.overall = Code::kOverLimit;
  DescriptorStatus over;
  over.code = Code::kOverLimit;
  over.limit = &limit;
  over.remaining = 0;
  over.reset_after = std::chrono::milliseconds(1500);
  over.retry_after = Duration(2'000'001);  // rounds up to 3 ms
  over.over_limit = true;
  DescriptorStatus none;  // no rule matched
  response.statuses = {over, none};
  EXPECT_EQ(
      RenderCheckResponse(response),
      R"({"overall":"OVER_LIMIT","statuses":[)"
      R"({"code":"OVER_LIMIT","limit":{"name":"per_key","requests_per_unit":10,"unit":"minute",)"
      R"("algorithm":"gcra","burst":20},"remaining":0,"reset_after_ms":1500,)"
      R"("retry_after_ms":3,"mode":"enforce","soft_over_limit":false,)"
      R"("shadow_over_limit":false,"degraded":false,"replaced":false},)"
      R"({"code":"OK","limit":null,"remaining":0,"reset_after_ms":0,"retry_after_ms":0,)"
      R"("mode":"enforce","soft_over_limit":false,"shadow_over_limit":false,)"
      R"("degraded":false,"replaced":false}]})"
      "\n");
}

// The largest request CheckLimits allows, built by nlohmann::json (an independent writer),
// compact: every bound at its maximum, a limit override on every descriptor.
std::string LargestCheckBody(const CheckLimits& limits) {
  nlohmann::json entries = nlohmann::json::array();
  for (size_t e = 0; e < limits.max_entries; ++e) {
    entries.push_back({{"key", std::string(limits.max_key_bytes, 'k')},
                       {"value", std::string(limits.max_value_bytes, 'v')}});
  }
  nlohmann::json descriptor = {{"entries", entries},
                               {"hits", limits.max_hits},
                               {"limit", {{"requests_per_unit", UINT32_MAX}, {"unit", "minute"}}}};
  nlohmann::json descriptors = nlohmann::json::array();
  for (size_t d = 0; d < limits.max_descriptors; ++d) descriptors.push_back(descriptor);
  return nlohmann::json{{"domain", std::string(limits.max_key_bytes, 'd')},
                        {"charge", false},  // longer than true
                        {"hits", limits.max_hits},
                        {"descriptors", descriptors}}
      .dump();
}

TEST(CheckJson, ChargeIsABoolean) {
  const std::string tail = R"(,"descriptors":[{"entries":[{"key":"k","value":"v"}]}]})";
  auto charged = ParseCheckRequest(R"({"domain":"d","charge":true)" + tail, kCheckLimits);
  ASSERT_TRUE(charged.has_value()) << charged.error().message;
  EXPECT_TRUE(charged->charge);
  auto plain = ParseCheckRequest(R"({"domain":"d","charge":false)" + tail, kCheckLimits);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->charge);
  auto absent = ParseCheckRequest(R"({"domain":"d")" + tail, kCheckLimits);
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->charge);
  for (const char* bad : {R"("charge":1)", R"("charge":"true")", R"("charge":null)"}) {
    auto r = ParseCheckRequest(R"({"domain":"d",)" + std::string(bad) + tail, kCheckLimits);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().message, "charge: must be true or false") << bad;
  }
}

TEST(CheckJson, TheBodyCapIsTheSizeOfTheLargestValidRequest) {
  for (const CheckLimits& limits : {kCheckLimits, CheckLimits{2, 3, 10, 20, 99}}) {
    const std::string largest = LargestCheckBody(limits);
    EXPECT_EQ(MaxCheckBodyBytes(limits), largest.size());
    auto parsed = ParseCheckRequest(largest, limits);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    EXPECT_EQ(parsed->descriptors.size(), limits.max_descriptors);
    EXPECT_TRUE(ValidateCheck(*parsed, limits).has_value());
  }
}

TEST(CheckJson, RefusesNestingDeeperThanACheckAtOnce) {
  const std::string deep(1 << 20, '[');
  EXPECT_EQ(ParseError(deep), "the body nests deeper than a check request can (5 levels)");
  // Five levels, as a valid check has, are only refused for their shape.
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":[1]}]}]})"),
            "the body nests deeper than a check request can (5 levels)");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":1,"value":"v"}]}]})"),
            "descriptors[0].entries[0].key: must be a string");
}

TEST(CheckJson, RefusesMoreValuesThanACheckCanHave) {
  const CheckLimits limits{2, 3, 10, 20, 99};  // 5 + 2 * (6 + 3 * 3) = 35 values at most
  std::string flat = R"({"domain":"d","descriptors":[)";
  for (int i = 0; i < 31; ++i) flat += "0,";
  EXPECT_EQ(ParseError(flat + "0]}", limits), "descriptors[0]: must be an object") << "35 values";
  EXPECT_EQ(ParseError(flat + "0,0]}", limits),
            "the body has more JSON values than a check request can (35)");
  // The default bound against a megabyte of zeros: refused without parsing them all.
  std::string zeros = "[";
  for (int i = 0; i < 500'000; ++i) zeros += "0,";
  zeros += "0]";
  EXPECT_EQ(ParseError(zeros), "the body has more JSON values than a check request can (" +
                                   std::to_string(5 + 64 * (6 + 3 * 16)) + ")");
}

}  // namespace
}  // namespace sluice::server
