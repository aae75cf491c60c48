// The RateLimitService on the memory store with a manual clock: matching to limits, all or
// nothing across a request's limits, the three modes, blocked and unlimited rules, request
// validation, reload keeping counters, the RateLimit headers' exact text, and metrics.
#include "service/rate_limit_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "service/ratelimit_headers.h"
#include "sluice/open_store.h"
#include "store/forwarding.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: route
    rate_limit: {name: per_route, unit: minute, requests_per_unit: 2, algorithm: fixed_window}
  - key: tb
    rate_limit: {name: bucket, unit: second, requests_per_unit: 10, burst: 50}
  - key: shadowed
    rate_limit: {name: shadowed, unit: minute, requests_per_unit: 1, mode: shadow,
                 algorithm: fixed_window}
  - key: soft
    rate_limit: {name: soft, unit: minute, requests_per_unit: 1, mode: soft,
                 algorithm: fixed_window}
  - key: ip
    value: 203.0.113.66
    rate_limit: {name: blocked, unit: second, requests_per_unit: 0}
  - key: internal
    rate_limit: {unlimited: true}
)yaml";

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    Write(kConfig);
    auto config = LoadConfig(config_file_);
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }
  void Write(const std::string& yaml) { config_file_ = dir_.Write("api.yaml", yaml); }

  static CheckRequest Request(std::vector<std::vector<std::pair<std::string, std::string>>> ds,
                              int64_t hits = 1) {
    CheckRequest r;
    r.domain = "api";
    r.hits = hits;
    for (auto& entries : ds) r.descriptors.push_back({std::move(entries), {}, {}});
    return r;
  }
  CheckResponse MustCheck(const CheckRequest& r) {
    auto response = service_->Check(r);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? std::move(*response) : CheckResponse{};
  }
  std::string ErrorOf(const CheckRequest& r) {
    auto response = service_->Check(r);
    EXPECT_FALSE(response.has_value());
    return response ? "" : response.error().message;
  }

  // Minute-aligned, so fixed windows do not roll over inside a test.
  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  test::TempConfigDir dir_{"svc"};
  std::filesystem::path config_file_;
  std::unique_ptr<RateLimitService> service_;
};

TEST_F(Service, CountsPerValueAndRejectsOverTheLimit) {
  for (int i = 0; i < 10; ++i) {
    const CheckResponse r = MustCheck(Request({{{"api_key", "k1"}}}));
    ASSERT_EQ(r.overall, Code::kOk) << i;
    EXPECT_EQ(r.statuses[0].remaining, 9 - i);
    ASSERT_NE(r.statuses[0].limit, nullptr);
    EXPECT_EQ(r.statuses[0].limit->name, "per_key");
  }
  const CheckResponse over = MustCheck(Request({{{"api_key", "k1"}}}));
  EXPECT_EQ(over.overall, Code::kOverLimit);
  EXPECT_EQ(over.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(over.statuses[0].retry_after, seconds(60)) << "the window ends in a minute";
  // Another value of the same key has its own counter.
  EXPECT_EQ(MustCheck(Request({{{"api_key", "k2"}}})).statuses[0].remaining, 9);
}

TEST_F(Service, DrainingIsNotReadyAndStillChecks) {
  EXPECT_TRUE(service_->Ready());
  service_->StartDraining();
  EXPECT_FALSE(service_->Ready());
  EXPECT_FALSE(service_->Ready()) << "draining is for good";
  EXPECT_EQ(MustCheck(Request({{{"api_key", "k1"}}})).statuses[0].remaining, 9);
}

TEST_F(Service, ARejectedRequestTakesNoQuotaFromItsOtherLimits) {
  auto both = Request({{{"api_key", "k1"}}, {{"route", "/pay"}}});
  EXPECT_EQ(MustCheck(both).overall, Code::kOk);
  EXPECT_EQ(MustCheck(both).overall, Code::kOk);
  for (int i = 0; i < 3; ++i) {
    const CheckResponse r = MustCheck(both);
    EXPECT_EQ(r.overall, Code::kOverLimit);
    EXPECT_EQ(r.statuses[0].code, Code::kOk) << "per_key alone had room";
    EXPECT_EQ(r.statuses[1].code, Code::kOverLimit);
  }
  // Only the two admitted requests were counted against per_key.
  auto state = service_->State("api", {{"api_key", "k1"}});
  ASSERT_TRUE(state.has_value()) << state.error().message;
  EXPECT_EQ(state->remaining, 8);
}

TEST_F(Service, ShadowAndSoftLimitsAllowButSayTheyAreOver) {
  auto shadow = Request({{{"shadowed", "x"}}});
  EXPECT_FALSE(MustCheck(shadow).statuses[0].shadow_over_limit);
  const CheckResponse s = MustCheck(shadow);
  EXPECT_EQ(s.overall, Code::kOk);
  EXPECT_TRUE(s.statuses[0].shadow_over_limit);
  EXPECT_EQ(s.statuses[0].mode, Mode::kShadow);

  auto soft = Request({{{"soft", "x"}}});
  MustCheck(soft);
  const CheckResponse f = MustCheck(soft);
  EXPECT_EQ(f.overall, Code::kOk);
  EXPECT_EQ(f.statuses[0].code, Code::kOk);
  EXPECT_TRUE(f.statuses[0].soft_over_limit);
}

TEST_F(Service, AShadowLimitCountsNothingForARejectedRequest) {
  auto mixed = Request({{{"route", "/r"}}, {{"shadowed", "y"}}});
  MustCheck(Request({{{"route", "/r"}}}));
  MustCheck(Request({{{"route", "/r"}}}));
  const CheckResponse r = MustCheck(mixed);  // route is full: rejected
  EXPECT_EQ(r.overall, Code::kOverLimit);
  EXPECT_FALSE(r.statuses[1].shadow_over_limit) << "it would have fit";
  // The shadow limit still has its one request left.
  EXPECT_FALSE(MustCheck(Request({{{"shadowed", "y"}}})).statuses[0].shadow_over_limit);
}

TEST_F(Service, BlockedUnlimitedAndUnmatchedDescriptors) {
  const CheckResponse blocked = MustCheck(Request({{{"ip", "203.0.113.66"}}}));
  EXPECT_EQ(blocked.overall, Code::kOverLimit);
  // The rule is per second; the clock starts minute-aligned: a whole second to the unit's end.
  EXPECT_EQ(blocked.statuses[0].reset_after, seconds(1));
  clock_.Advance(milliseconds(300));
  EXPECT_EQ(MustCheck(Request({{{"ip", "203.0.113.66"}}})).statuses[0].reset_after,
            milliseconds(700));
  const CheckResponse other_ip = MustCheck(Request({{{"ip", "198.51.100.1"}}}));
  EXPECT_EQ(other_ip.overall, Code::kOk);
  EXPECT_EQ(other_ip.statuses[0].limit, nullptr) << "no rule for other addresses";
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(MustCheck(Request({{{"internal", "svc"}}})).overall, Code::kOk);
  }
}

TEST_F(Service, HitsComeFromTheDescriptorOrTheRequest) {
  EXPECT_EQ(MustCheck(Request({{{"api_key", "h"}}}, 4)).statuses[0].remaining, 6);
  CheckRequest r = Request({{{"api_key", "h"}}}, 4);
  r.descriptors[0].hits = 5;
  EXPECT_EQ(MustCheck(r).statuses[0].remaining, 1);
  EXPECT_EQ(MustCheck(Request({{{"api_key", "h"}}}, 2)).overall, Code::kOverLimit);
  // Hits beyond the capacity can never pass.
  const CheckResponse huge = MustCheck(Request({{{"tb", "z"}}}, 51));
  EXPECT_EQ(huge.overall, Code::kOverLimit);
  EXPECT_EQ(huge.statuses[0].retry_after, kNever);
  // Its key is untouched (a full reset is 0 away), but the answer says to come back in one
  // unit, as Retry-After does: never 0, which reads as "retry now".
  EXPECT_EQ(huge.statuses[0].reset_after, huge.statuses[0].limit->period.length);
  EXPECT_GT(huge.statuses[0].reset_after, Duration(0));
}

TEST_F(Service, BadRequestsAreClearErrors) {
  CheckRequest unknown = Request({{{"api_key", "k"}}});
  unknown.domain = "nope";
  EXPECT_NE(ErrorOf(unknown).find("nope"), std::string::npos);
  EXPECT_NE(ErrorOf(Request({})).find("descriptor"), std::string::npos);
  EXPECT_NE(ErrorOf(Request({{}})).find("entries"), std::string::npos);
  EXPECT_NE(ErrorOf(Request({{{"", "v"}}})).find("empty key"), std::string::npos);
  EXPECT_NE(ErrorOf(Request({{{"api_key", "k"}}}, -1)).find("hits"), std::string::npos);
  // Sizes are not errors (request_bounds_test.cc).
}

TEST_F(Service, ReloadKeepsTheCountersOfUnchangedLimits) {
  for (int i = 0; i < 4; ++i) MustCheck(Request({{{"api_key", "k"}}, {{"tb", "t"}}}));
  // per_key unchanged; the bucket's rate changes, and it keeps the 4 it used (limit_change.h).
  std::string changed = kConfig;
  changed.replace(changed.find("requests_per_unit: 10, burst: 50"), 32,
                  "requests_per_unit: 20, burst: 50");
  Write(changed);
  auto config = LoadConfig(config_file_);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_TRUE(service_->Reload(*config).has_value());
  const CheckResponse r = MustCheck(Request({{{"api_key", "k"}}, {{"tb", "t"}}}));
  EXPECT_EQ(r.statuses[0].remaining, 5) << "per_key kept its count of 4";
  EXPECT_EQ(r.statuses[1].remaining, 45) << "the changed bucket kept its 4";
  EXPECT_EQ(r.statuses[1].limit->requests_per_unit, 20);
}

// Envoy's per-request `limit` overrides are not in the config, so a reload must not forget
// their counters either.
TEST_F(Service, ReloadKeepsTheCountersOfLimitOverrides) {
  CheckRequest r = Request({{{"api_key", "o"}}});
  r.descriptors[0].limit_override = LimitOverride{5, LimitPeriod::Of(Unit::kHour)};
  for (int i = 0; i < 3; ++i) MustCheck(r);
  auto config = LoadConfig(config_file_);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_TRUE(service_->Reload(*config).has_value());
  const CheckResponse after = MustCheck(r);
  ASSERT_NE(after.statuses[0].limit, nullptr);
  EXPECT_EQ(after.statuses[0].limit->requests_per_unit, 5);
  EXPECT_EQ(after.statuses[0].remaining, 1) << "3 before the reload, 1 after";
}

// The store gauges are the store's own Stats(): a counter of an override limit is held by the
// store like any other, so it is counted.
TEST_F(Service, StoreTotalsCountTheCountersOfConfiguredAndOverrideLimits) {
  ASSERT_EQ(service_->StoreTotals().keys, 0u);
  MustCheck(Request({{{"api_key", "a"}}, {{"api_key", "b"}}}));
  EXPECT_EQ(service_->StoreTotals().keys, 2u) << "two identities of per_key";
  CheckRequest r = Request({{{"api_key", "o"}}});
  r.descriptors[0].limit_override = LimitOverride{5, LimitPeriod::Of(Unit::kHour)};
  MustCheck(r);
  EXPECT_EQ(service_->StoreTotals().keys, 3u) << "and one of the override limit";
}

TEST_F(Service, TheRateLimitHeadersHaveTheDraftSyntax) {
  for (int i = 0; i < 2; ++i) MustCheck(Request({{{"route", "/h"}}}));
  clock_.Advance(seconds(15));
  const CheckResponse r = MustCheck(Request({{{"api_key", "k"}}, {{"route", "/h"}}}));
  ASSERT_EQ(r.overall, Code::kOverLimit);
  const auto headers = RateLimitHeaders(r, HeaderOptions{.legacy = true});
  auto get = [&](const std::string& name) {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return std::string("<missing>");
  };
  EXPECT_EQ(get("RateLimit-Policy"), R"("per_key";q=10;w=60, "per_route";q=2;w=60)");
  // per_key gave its hit back: 10 left (its reset is the decision's, an upper bound); both
  // windows end in 45 s.
  EXPECT_EQ(get("RateLimit"), R"("per_key";r=10;t=45, "per_route";r=0;t=45)");
  EXPECT_EQ(get("Retry-After"), "45");
  EXPECT_EQ(get("X-RateLimit-Limit"), "2");
  EXPECT_EQ(get("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(get("X-RateLimit-Reset"), "45");
}

TEST_F(Service, DecisionsAreCountedInTheMetrics) {
  for (int i = 0; i < 3; ++i) MustCheck(Request({{{"route", "/m"}}}));
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find(R"(sluice_decisions_total{domain="api",limit="per_route",result="ok"} 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(R"(sluice_decisions_total{domain="api",limit="per_route",result="over_limit"} 1)"),
      std::string::npos);
}

// The rules (check_rules.h) decide what an unknown domain means for the caller; the service
// answers "limit nothing" itself, deciding nothing and recording nothing.
TEST_F(Service, AnUnknownDomainIsAnErrorOrLimitsNothingByCaller) {
  CheckRequest r = Request({{{"api_key", "k"}}, {{"route", "/u"}}});
  r.domain = "nope";
  r.caller = Caller::kHttpJson;
  EXPECT_EQ(ErrorOf(r), "unknown domain 'nope'");
  r.caller = Caller::kDirect;
  EXPECT_EQ(ErrorOf(r), "unknown domain 'nope'");
  r.caller = Caller::kEnvoy;
  const std::string before = metrics_.Render();
  for (int i = 0; i < 2; ++i) {
    const CheckResponse none = MustCheck(r);
    EXPECT_EQ(none.overall, Code::kOk);
    ASSERT_EQ(none.statuses.size(), 2u);
    for (const DescriptorStatus& s : none.statuses) {
      EXPECT_EQ(s.code, Code::kOk);
      EXPECT_EQ(s.limit, nullptr);
    }
    EXPECT_TRUE(RateLimitHeaders(none, HeaderOptions{.legacy = true}).empty());
  }
  EXPECT_EQ(metrics_.Render(), before);
  bool answered = false;
  service_->CheckAsync(r, [&](Result<CheckResponse> none) {
    ASSERT_TRUE(none.has_value()) << none.error().message;
    EXPECT_EQ(none->statuses.size(), 2u);
    answered = true;
  });
  EXPECT_TRUE(answered) << "answered before CheckAsync returned";
}

// A store layer nothing above the store knows of: its families reach /metrics through the
// service and Metrics with no change outside the layer (here, outside this test).
constexpr StatFamily kWidgets{"sluice_test_widgets", StatKind::kGauge, "Widgets of the layer."};
constexpr StatFamily kLimitWidgets{"sluice_test_limit_widgets_total", StatKind::kCounter,
                                   "Widgets of one limit."};

class WidgetLimiter final : public internal::ForwardingLimiter {
 public:
  using ForwardingLimiter::ForwardingLimiter;
  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override {
    ForwardingLimiter::ReportStats(sink, limit_labels);
    sink.Add(kLimitWidgets, limit_labels, 2);
  }
};

class WidgetLayer final : public internal::ForwardingStore<Store> {
 public:
  using ForwardingStore::ForwardingStore;
  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    auto inner = inner_store().MakeLimiter(spec, options);
    if (!inner) return std::unexpected(inner.error());
    return std::unique_ptr<Limiter>(std::make_unique<WidgetLimiter>(this, std::move(*inner)));
  }
  void ReportStats(StatsSink& sink) const override {
    ForwardingStore::ReportStats(sink);
    sink.Add(kWidgets, {}, 3);
  }
};

TEST(ServiceStats, ANewLayersFamiliesReachMetrics) {
  test::TempConfigDir dir{"widgets"};
  auto config = LoadConfig(dir.Write("api.yaml", kConfig));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  auto memory = OpenStore("memory");
  ASSERT_TRUE(memory.has_value());
  Metrics metrics;
  auto service =
      RateLimitService::Create(*config, std::make_shared<WidgetLayer>(*memory), {}, &metrics);
  ASSERT_TRUE(service.has_value()) << service.error().message;
  metrics.SetStatsSource([&s = **service](StatsSink& sink) { s.ReportStats(sink); });
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("# HELP sluice_test_widgets Widgets of the layer.\n"
                      "# TYPE sluice_test_widgets gauge\nsluice_test_widgets 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE sluice_test_limit_widgets_total counter\n"
                      "sluice_test_limit_widgets_total{domain=\"api\",limit=\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_store_keys 0\n"), std::string::npos) << "and the generic ones";
  metrics.SetStatsSource(nullptr);
}

}  // namespace
}  // namespace sluice::server
