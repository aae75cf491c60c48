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
    auto valid = ValidateCheck(*r);
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
  EXPECT_EQ(r->descriptors[0].limit_override->period.unit, Unit::kMinute);
}

TEST(CheckJson, ParsesAPeriodOverride) {
  auto r = ParseCheckRequest(
      R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
          "limit":{"requests_per_unit":600,"period":"5m"}}]})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_TRUE(r->descriptors[0].limit_override.has_value());
  EXPECT_EQ(r->descriptors[0].limit_override->requests_per_unit, 600);
  EXPECT_EQ(r->descriptors[0].limit_override->period.length, std::chrono::minutes(5));
  EXPECT_FALSE(r->descriptors[0].limit_override->period.unit.has_value());

  const std::string head = R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],)";
  EXPECT_EQ(
      ParseError(head + R"("limit":{"requests_per_unit":1,"unit":"second","period":"5m"}}]})"),
      "descriptors[0].limit: needs requests_per_unit and either unit or period");
  EXPECT_EQ(ParseError(head + R"("limit":{"requests_per_unit":1}}]})"),
            "descriptors[0].limit: needs requests_per_unit and either unit or period");
  EXPECT_EQ(ParseError(head + R"("limit":{"requests_per_unit":1,"period":300}}]})"),
            "descriptors[0].limit.period: must be a string");
  EXPECT_EQ(ParseError(head + R"("limit":{"requests_per_unit":1,"period":"400d"}}]})"),
            "descriptors[0].limit.period: period must be from 1s to 366d (got 400d)");
}

TEST(CheckJson, RendersAPeriodInSeconds) {
  Limit limit;
  limit.name = "burst";
  limit.kind = LimitKind::kLimited;
  limit.period = *ParsePeriod("1500ms");
  limit.requests_per_unit = 3;
  limit.spec.algorithm = Algorithm::kFixedWindow;
  limit.spec.limit = 3;
  limit.spec.period = limit.period.length;
  std::string out;
  AppendLimitJson(out, &limit);
  // No unit names it: the unit is left out, the period given in seconds, exactly.
  EXPECT_EQ(out, R"({"name":"burst","requests_per_unit":3,"period_s":1.5,)"
                 R"("algorithm":"fixed_window","burst":3})");
  limit.period = *ParsePeriod("300s");
  out.clear();
  AppendLimitJson(out, &limit);
  EXPECT_NE(out.find(R"("requests_per_unit":3,"period_s":300,)"), std::string::npos) << out;
}

TEST(CheckJson, RefusesACalendarOverrideAndRendersACalendarRule) {
  const std::string head = R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],)";
  EXPECT_EQ(ParseError(head + R"("limit":{"requests_per_unit":1,"calendar":"month"}}]})"),
            "descriptors[0].limit.calendar: a per-request limit cannot be a calendar window; "
            "configure calendar on a rule");
  EXPECT_EQ(ParseError(head + R"("limit":{"requests_per_unit":1,"unit":"day",)"
                              R"("timezone":"Asia/Tokyo"}}]})"),
            "descriptors[0].limit.timezone: a per-request limit cannot be a calendar window; "
            "configure calendar on a rule");

  Limit limit;
  limit.name = "monthly";
  limit.kind = LimitKind::kLimited;
  limit.period = LimitPeriod::Of(Unit::kMonth);
  limit.requests_per_unit = 1000;
  limit.spec.algorithm = Algorithm::kFixedWindow;
  limit.spec.limit = 1000;
  limit.spec.period = limit.period.length;
  limit.spec.calendar = {CalendarUnit::kMonth, "Europe/Lisbon", false};
  std::string out;
  AppendLimitJson(out, &limit);
  EXPECT_EQ(out, R"({"name":"monthly","requests_per_unit":1000,"unit":"month",)"
                 R"("period_s":2592000,"calendar":"month","timezone":"Europe/Lisbon",)"
                 R"("algorithm":"fixed_window","burst":1000})");
  limit.spec.calendar = {CalendarUnit::kWeek, "UTC", true};
  out.clear();
  AppendLimitJson(out, &limit);
  EXPECT_NE(out.find(R"("calendar":"week","timezone":"UTC","week_start":"sunday",)"),
            std::string::npos)
      << out;
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
            "hits: must not be negative");
}

// docs/server.md: any integer from 0 to 2^64-1, those beyond 2^63-1 read as 2^63-1; 2^64 and
// above are no 64-bit integer, a 400.
TEST(CheckJson, HitsUpTo2To64Minus1AreReadClampedAndBeyondRefused) {
  const auto hits = [](std::string_view n) {
    return ParseCheckRequest(
        R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}],"hits":)" +
        std::string(n) + "}");
  };
  EXPECT_EQ(hits("9223372036854775807")->hits, INT64_MAX);
  EXPECT_EQ(hits("9223372036854775808")->hits, INT64_MAX);
  EXPECT_EQ(hits("18446744073709551615")->hits, INT64_MAX);
  ASSERT_FALSE(hits("18446744073709551616").has_value());
  EXPECT_EQ(hits("18446744073709551616").error().message, "hits: must be an integer");
  EXPECT_FALSE(hits("100000000000000000000").has_value());
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

TEST(CheckJson, RejectsEmpties) {
  EXPECT_EQ(ParseError(R"({"domain":"","descriptors":[]})"), "domain: must not be empty");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[]})"), "descriptors: must not be empty");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[]}]})"),
            "descriptors[0].entries: must not be empty");
  EXPECT_EQ(ParseError(R"({"domain":"d","descriptors":[{"entries":[{"key":"","value":"v"}]}]})"),
            "descriptors[0].entries[0].key: must not be empty");
}

// Past the bounds a request is still one: the service decides what it checks of it.
TEST(CheckJson, SizesAndCountsPastTheBoundsAreAccepted) {
  const std::string d = R"({"entries":[{"key":"k","value":"v"}]})";
  std::string many = R"({"domain":"d","hits":4294967295,"descriptors":[)" + d;
  for (int i = 0; i < 1100; ++i) many += "," + d;
  many += "]}";
  std::string entries = R"({"key":"k","value":"v"})";
  for (int i = 0; i < 64; ++i) entries += R"(,{"key":"k","value":"v"})";
  for (const std::string& body :
       {many, R"({"domain":"d","descriptors":[{"entries":[)" + entries + "]}]}",
        R"({"domain":"d","descriptors":[{"entries":[{"key":")" + std::string(5000, 'k') +
            R"(","value":")" + std::string(5000, 'v') + R"("}],"hits":9007199254740991}]})"}) {
    auto r = ParseCheckRequest(body);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_TRUE(ValidateCheck(*r).has_value());
  }
}

TEST(CheckJson, RendersEveryStatusField) {
  Limit limit;
  limit.name = "per_key";
  limit.requests_per_unit = 10;
  limit.period = LimitPeriod::Of(Unit::kMinute);
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
      R"({"overall":"OVER_LIMIT","delay_ms":0,"statuses":[)"
      R"({"code":"OVER_LIMIT","limit":{"name":"per_key","requests_per_unit":10,"unit":"minute",)"
      R"("period_s":60,)"
      R"("algorithm":"gcra","burst":20},"remaining":0,"reset_after_ms":1500,)"
      R"("retry_after_ms":3,"mode":"enforce","soft_over_limit":false,)"
      R"("shadow_over_limit":false,"degraded":false,"replaced":false},)"
      R"({"code":"OK","limit":null,"remaining":0,"reset_after_ms":0,"retry_after_ms":0,)"
      R"("mode":"enforce","soft_over_limit":false,"shadow_over_limit":false,)"
      R"("degraded":false,"replaced":false}]})"
      "\n");
}

// The largest bounded request (check_json.h), built by nlohmann::json (an independent writer),
// compact: max_descriptors descriptors of max_entries one-byte entries, one more with every
// size at its bound, the longest hits and a limit override on every descriptor (the longest
// period), the longest configurable domain.
std::string LargestCheckBody(const CheckLimits& limits) {
  const auto descriptor = [&](size_t key_bytes, size_t value_bytes) {
    nlohmann::json entries = nlohmann::json::array();
    for (size_t e = 0; e < limits.max_entries; ++e) {
      entries.push_back(
          {{"key", std::string(key_bytes, 'k')}, {"value", std::string(value_bytes, 'v')}});
    }
    return nlohmann::json{
        {"entries", entries},
        {"hits", UINT64_MAX},
        {"limit",
         {{"requests_per_unit", UINT32_MAX}, {"period", "31622400000000000ns"}}}};  // 366 days
  };
  nlohmann::json descriptors = nlohmann::json::array();
  for (size_t d = 0; d < limits.max_descriptors; ++d) descriptors.push_back(descriptor(1, 1));
  descriptors.push_back(descriptor(limits.max_key_bytes, limits.max_value_bytes));
  return nlohmann::json{{"domain", std::string(kMaxConfiguredDomainBytes, 'd')},
                        {"charge", false},  // longer than true
                        {"hits", UINT64_MAX},
                        {"priority", std::string(kMaxPriorityBytes, 'p')},
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

TEST(CheckJson, TheBodyCapIsTheSizeOfTheLargestBoundedRequest) {
  for (const CheckLimits& limits : {kCheckLimits, CheckLimits{2, 3, 10, 20, 65535}}) {
    const std::string largest = LargestCheckBody(limits);
    EXPECT_EQ(MaxCheckBodyBytes(limits), largest.size());
    auto parsed = ParseCheckRequest(largest, limits);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    EXPECT_EQ(parsed->descriptors.size(), limits.max_descriptors + 1);
    EXPECT_TRUE(ValidateCheck(*parsed).has_value());
  }
  EXPECT_EQ(MaxCheckBodyBytes(), 2'019'208u);  // docs/server.md quotes it
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
  const CheckLimits limits{1, 3, 10, 20, 65535};  // 6 + 2 * (6 + 3 * 3) = 36 values at most
  std::string flat = R"({"domain":"d","descriptors":[)";
  for (int i = 0; i < 32; ++i) flat += "0,";
  EXPECT_EQ(ParseError(flat + "0]}", limits), "descriptors[0]: must be an object") << "36 values";
  EXPECT_EQ(ParseError(flat + "0,0]}", limits),
            "the body has more JSON values than a check request can (36)");
  // The default bound against a megabyte of zeros: refused without parsing them all.
  std::string zeros = "[";
  for (int i = 0; i < 500'000; ++i) zeros += "0,";
  zeros += "0]";
  EXPECT_EQ(ParseError(zeros), "the body has more JSON values than a check request can (" +
                                   std::to_string(6 + 1025 * (6 + 3 * 64)) + ")");
}

}  // namespace
}  // namespace sluice::server
