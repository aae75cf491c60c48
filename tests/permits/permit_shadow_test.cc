// Shadow concurrency slots and slots no acquire can ever get, through POST /v1/acquire on the
// memory store (manual clock) and a real redis-server (docs/load-protection.md, "Shadow mode"
// and "Shedding on a concurrency limit"). The oracle is the config's numbers, counted by hand:
// a shadow slot of max_in_flight 2 holds 2 and then answers what it would have refused, holding
// nothing; a shed level `above: 0.5` of 1 slot admits floor(0.5 x 1) = 0, so it answers never,
// as the same level on a rate limit of 1 does.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "http/http_api.h"
#include "metrics/metrics.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"
#include "support/redis_server.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: alone
    shadow_mode: true
    concurrency: {max_in_flight: 2, permit_ttl: 30s}
  - key: beside
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: fixed_window}
    concurrency: {max_in_flight: 1, permit_ttl: 20s}
  - key: enforced
    concurrency: {max_in_flight: 1, permit_ttl: 10s}
  - key: slots_never
    concurrency: {max_in_flight: 1, permit_ttl: 30s, shed: [{priority: low, above: 0.5}]}
  - key: hits_never
    rate_limit:
      unit: minute
      requests_per_unit: 1
      algorithm: fixed_window
      shed: [{priority: low, above: 0.5}]
)yaml";

using Entries = std::vector<std::pair<std::string, std::string>>;

std::string Body(const Entries& descriptors, const std::string& priority = "") {
  json body = {{"domain", "api"}, {"descriptors", json::array()}};
  for (const auto& [k, v] : descriptors) {
    body["descriptors"].push_back({{"entries", {{{"key", k}, {"value", v}}}}});
  }
  if (!priority.empty()) body["priority"] = priority;
  return body.dump();
}

std::string Header(const HttpReply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

class PermitShadow : public ::testing::TestWithParam<bool> {  // true: on Redis
 protected:
  void SetUp() override {
    clock_.Set(Timestamp(seconds(1'700'000'000)));
    if (GetParam()) redis_ = std::make_unique<sluice::testing::RedisServer>();
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    EXPECT_TRUE((*config)->warnings().empty()) << (*config)->warnings().front();
    auto store = OpenStore(GetParam() ? "redis://127.0.0.1:" + std::to_string(redis_->port())
                                      : std::string("memory"));
    ASSERT_TRUE(store.has_value()) << store.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto service = RateLimitService::Create(*config, *store, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    metrics_.SetStatsSource([this](StatsSink& sink) { service_->ReportStats(sink); });
    api_ = std::make_unique<HttpApi>(service_.get(), &metrics_, HttpApiOptions{});
  }
  void TearDown() override { metrics_.SetStatsSource(nullptr); }

  HttpReply Post(std::string_view path, const std::string& body) {
    return api_->Handle({"POST", path, "", body});
  }
  json Acquire(const Entries& descriptors, int status = 200, const std::string& priority = "") {
    last_ = Post("/v1/acquire", Body(descriptors, priority));
    EXPECT_EQ(last_.status, status) << last_.body;
    return json::parse(last_.body);
  }
  bool Call(std::string_view path, const json& permit, const char* field) {
    const HttpReply r = Post(path, json{{"permit", permit}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)[field].get<bool>();
  }
  int64_t Decisions(const std::string& limit, const std::string& result) {
    const std::string text = metrics_.Render();
    const std::string line =
        "sluice_decisions_total{domain=\"api\",limit=\"" + limit + "\",result=\"" + result + "\"} ";
    const size_t at = text.find(line);
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + line.size()));
  }
  // The refusal wait a slot answers: exact on the memory store (the manual clock), within the
  // ttl on Redis (its own clock).
  void ExpectWait(const json& ms, int64_t memory_ms, int64_t ttl_ms) {
    ASSERT_TRUE(ms.is_number_integer()) << ms;
    if (GetParam()) {
      EXPECT_GT(ms.get<int64_t>(), 0);
      EXPECT_LE(ms.get<int64_t>(), ttl_ms);
    } else {
      EXPECT_EQ(ms.get<int64_t>(), memory_ms);
    }
  }

  std::unique_ptr<sluice::testing::RedisServer> redis_;
  test::TempConfigDir dir_{"permit-shadow"};
  ManualClock clock_;
  sluice::server::Metrics metrics_;
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<HttpApi> api_;
  HttpReply last_;
};

// A shadow slot alone: the first 2 acquires hold a slot each; the third is admitted, holds
// nothing, has no permit, and says what it would have answered; it is counted as a shadow
// refusal. A release frees a held slot as for an enforced limit.
TEST_P(PermitShadow, AFullShadowSlotAdmitsHoldingNothingAndSaysWhatItWouldHaveDone) {
  const json a = Acquire({{"alone", "acme"}});
  ASSERT_TRUE(a["permit"].is_string());
  EXPECT_EQ(a["statuses"][0]["in_flight"], 1);
  clock_.Advance(seconds(5));
  const json b = Acquire({{"alone", "acme"}});
  ASSERT_TRUE(b["permit"].is_string());
  EXPECT_EQ(b["statuses"][0]["in_flight"], 2);
  EXPECT_GT(b["statuses"][0]["permit_expires_us"].get<int64_t>(), 0);

  const json over = Acquire({{"alone", "acme"}});
  EXPECT_EQ(over["overall"], "OK");
  EXPECT_TRUE(over["permit"].is_null()) << "nothing held: nothing to release";
  EXPECT_TRUE(over["permit_ttl_ms"].is_null());
  const json& s = over["statuses"][0];
  EXPECT_EQ(s["code"], "OK");
  EXPECT_EQ(s["mode"], "shadow");
  EXPECT_EQ(s["shadow_over_limit"], true);
  EXPECT_EQ(s["in_flight"], 2);
  EXPECT_EQ(s["permit_expires_us"], 0);
  // What it would have said: until a's expiry, 25 s after the 5 s that passed.
  ExpectWait(s["permit_retry_after_ms"], 25'000, 30'000);
  ExpectWait(s["retry_after_ms"], 25'000, 30'000);
  EXPECT_EQ(Header(last_, "Retry-After"), "<absent>") << "a 200";
  EXPECT_EQ(Decisions("api.alone", "shadow_over_limit"), 1);
  EXPECT_EQ(Decisions("api.alone", "over_limit"), 0);
  EXPECT_EQ(Decisions("api.alone", "ok"), 2);

  // The held slots are what in_flight counts: a release frees one, which the next acquire
  // takes (held, 2 again).
  EXPECT_TRUE(Call("/v1/release", a["permit"], "released"));
  const json again = Acquire({{"alone", "acme"}});
  EXPECT_TRUE(again["permit"].is_string());
  EXPECT_EQ(again["statuses"][0]["in_flight"], 2);
  EXPECT_EQ(again["statuses"][0]["shadow_over_limit"], false);
  EXPECT_TRUE(Call("/v1/release", b["permit"], "released"));
  EXPECT_TRUE(Call("/v1/release", again["permit"], "released"));
}

// Beside a rate limit and an enforced slot in one acquire: the permit names only the slots
// held, so its release and renew are whole; the shadow descriptor's rate limit counts the
// request it let through.
TEST_P(PermitShadow, APermitNamesOnlyTheSlotsItHolds) {
  const json first = Acquire({{"beside", "x"}, {"enforced", "e1"}});
  ASSERT_TRUE(first["permit"].is_string());
  EXPECT_EQ(first["permit_ttl_ms"], 10'000) << "the shortest of the two slots'";
  EXPECT_EQ(first["statuses"][0]["remaining"], 99);

  // beside=x is full: shadow. enforced=e2 is free: held. The permit holds e2 only.
  const json second = Acquire({{"beside", "x"}, {"enforced", "e2"}});
  EXPECT_EQ(second["overall"], "OK");
  EXPECT_EQ(second["statuses"][0]["shadow_over_limit"], true);
  EXPECT_EQ(second["statuses"][0]["in_flight"], 1);
  EXPECT_EQ(second["statuses"][0]["remaining"], 98) << "its rate limit counted the request";
  EXPECT_EQ(second["statuses"][1]["in_flight"], 1);
  ASSERT_TRUE(second["permit"].is_string());
  EXPECT_EQ(second["permit_ttl_ms"], 10'000);
  EXPECT_TRUE(Call("/v1/renew", second["permit"], "renewed"));
  EXPECT_TRUE(Call("/v1/release", second["permit"], "released"));
  EXPECT_FALSE(Call("/v1/release", second["permit"], "released")) << "already released";
  EXPECT_EQ(Decisions("api.beside", "shadow_over_limit"), 1);

  // An enforced slot refusing gives back the shadow slot the acquire took: beside=y is left
  // with nothing held.
  const json refused = Acquire({{"beside", "y"}, {"enforced", "e1"}}, 429);
  EXPECT_TRUE(refused["permit"].is_null());
  EXPECT_EQ(refused["statuses"][0]["in_flight"], 0);
  EXPECT_EQ(refused["statuses"][1]["code"], "OVER_LIMIT");
  const json y = Acquire({{"beside", "y"}});
  EXPECT_EQ(y["statuses"][0]["in_flight"], 1);
  EXPECT_EQ(y["statuses"][0]["shadow_over_limit"], false);

  EXPECT_TRUE(Call("/v1/release", first["permit"], "released"));
}

// A shed level that admits no slot (floor(0.5 x 1) = 0) answers never, as the same level on a
// rate limit of 1 does: retry_after_ms null, and a Retry-After of the limit's own unit (the
// permit_ttl; a rate limit's window). Critical still gets the slot.
TEST_P(PermitShadow, ASlotNoAcquireOfItsPriorityCanGetAnswersNever) {
  const json hits = Acquire({{"hits_never", "h"}}, 429, "low");
  EXPECT_TRUE(hits["statuses"][0]["retry_after_ms"].is_null()) << hits;
  EXPECT_EQ(Header(last_, "Retry-After"), "60");

  const json empty = Acquire({{"slots_never", "s"}}, 429, "low");
  EXPECT_TRUE(empty["statuses"][0]["retry_after_ms"].is_null()) << empty;
  EXPECT_TRUE(empty["statuses"][0]["permit_retry_after_ms"].is_null()) << empty;
  EXPECT_EQ(Header(last_, "Retry-After"), "30");

  const json critical = Acquire({{"slots_never", "s"}}, 200, "critical");
  ASSERT_TRUE(critical["permit"].is_string());
  // Held by critical now: a normal refusal for critical (until its expiry), still never for low.
  const json full = Acquire({{"slots_never", "s"}}, 429, "critical");
  ExpectWait(full["statuses"][0]["permit_retry_after_ms"], 30'000, 30'000);
  const json low = Acquire({{"slots_never", "s"}}, 429, "low");
  EXPECT_TRUE(low["statuses"][0]["permit_retry_after_ms"].is_null()) << low;
  EXPECT_EQ(low["statuses"][0]["in_flight"], 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, PermitShadow, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Redis" : "Memory";
                         });

}  // namespace
}  // namespace sluice::server
