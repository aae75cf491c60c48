// The permit API end to end in-process: config, the HTTP routes (HttpApi) over the real service on
// the memory store with a manual clock. Acquire, release, renew and expiry; malformed and unknown
// permits; all or nothing with a rate limit; checks skipping concurrency rules; the metrics.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "http/http_api.h"
#include "service/permit_token.h"
#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kConfig[] = R"yaml(
domain: api
descriptors:
  - key: tenant
    concurrency: {max_in_flight: 2, permit_ttl: 30s}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: both
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window}
    concurrency: {max_in_flight: 1, permit_ttl: 10s}
)yaml";

std::string Body(std::initializer_list<std::pair<const char*, const char*>> descriptors) {
  nlohmann::json body = {{"domain", "api"}, {"descriptors", nlohmann::json::array()}};
  for (const auto& [k, v] : descriptors) {
    body["descriptors"].push_back({{"entries", {{{"key", k}, {"value", v}}}}});
  }
  return body.dump();
}

std::string PermitBody(const std::string& permit) {
  return nlohmann::json{{"permit", permit}}.dump();
}

std::string Header(const HttpReply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

class PermitApi : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.Set(Timestamp(seconds(1'700'000'000)));
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    auto store = OpenStore("memory");
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
  // An acquire's permit; "" (and a test failure) when it was not granted.
  std::string MustAcquire(const std::string& body) {
    const HttpReply r = Post("/v1/acquire", body);
    EXPECT_EQ(r.status, 200) << r.body;
    const auto json = nlohmann::json::parse(r.body);
    return json["permit"].is_string() ? json["permit"].get<std::string>() : "";
  }
  bool Released(const std::string& permit) {
    const HttpReply r = Post("/v1/release", PermitBody(permit));
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body)["released"].get<bool>();
  }
  std::string Metrics() { return metrics_.Render(); }

  test::TempConfigDir dir_{"permit-api"};
  ManualClock clock_;
  sluice::server::Metrics metrics_;
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<HttpApi> api_;
};

TEST_F(PermitApi, AcquireUpToMaxInFlightThenReleaseFreesASlot) {
  const std::string a = MustAcquire(Body({{"tenant", "acme"}}));
  const std::string b = MustAcquire(Body({{"tenant", "acme"}}));
  ASSERT_FALSE(a.empty());
  ASSERT_NE(a, b);
  EXPECT_LE(a.size(), kMaxPermitBytes);

  clock_.Advance(seconds(5));
  const HttpReply full = Post("/v1/acquire", Body({{"tenant", "acme"}}));
  EXPECT_EQ(full.status, 429) << full.body;
  // The earliest held permit expires 25 s from now.
  EXPECT_EQ(Header(full, "Retry-After"), "25");
  const auto json = nlohmann::json::parse(full.body);
  EXPECT_TRUE(json["permit"].is_null());
  EXPECT_EQ(json["statuses"][0]["in_flight"], 2);
  EXPECT_EQ(json["statuses"][0]["permit_retry_after_ms"], 25000);

  // Another tenant has its own slots.
  EXPECT_FALSE(MustAcquire(Body({{"tenant", "other"}})).empty());

  EXPECT_TRUE(Released(a));
  EXPECT_FALSE(Released(a)) << "already released";
  EXPECT_FALSE(MustAcquire(Body({{"tenant", "acme"}})).empty());
}

TEST_F(PermitApi, AnAcquireAnswersItsPermitTtl) {
  const HttpReply r = Post("/v1/acquire", Body({{"tenant", "acme"}, {"both", "x"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto json = nlohmann::json::parse(r.body);
  EXPECT_EQ(json["overall"], "OK");
  EXPECT_EQ(json["permit_ttl_ms"], 10000) << "the shortest of its slots'";
}

TEST_F(PermitApi, AnAcquireWithoutConcurrencyRulesHasNoPermit) {
  const HttpReply r = Post("/v1/acquire", Body({{"user", "u1"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto json = nlohmann::json::parse(r.body);
  EXPECT_TRUE(json["permit"].is_null());
  EXPECT_TRUE(json["permit_ttl_ms"].is_null());
}

TEST_F(PermitApi, PermitsExpireAfterTheirTtlAndAreCounted) {
  MustAcquire(Body({{"tenant", "acme"}}));
  MustAcquire(Body({{"tenant", "acme"}}));
  clock_.Advance(seconds(30) - milliseconds(1));
  EXPECT_EQ(Post("/v1/acquire", Body({{"tenant", "acme"}})).status, 429);
  clock_.Advance(milliseconds(1));
  EXPECT_FALSE(MustAcquire(Body({{"tenant", "acme"}})).empty());
  const std::string m = Metrics();
  EXPECT_NE(m.find("sluice_permits_expired_total{domain=\"api\",limit=\"api.tenant\"} 2"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("sluice_in_flight{domain=\"api\",limit=\"api.tenant\"} 1"), std::string::npos);
}

TEST_F(PermitApi, RenewExtendsAHeldPermit) {
  const std::string a = MustAcquire(Body({{"tenant", "acme"}}));
  MustAcquire(Body({{"tenant", "acme"}}));
  clock_.Advance(seconds(20));
  const HttpReply renewed = Post("/v1/renew", PermitBody(a));
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  const auto json = nlohmann::json::parse(renewed.body);
  EXPECT_TRUE(json["renewed"].get<bool>());
  EXPECT_EQ(json["permit_ttl_ms"], 30000);
  // 30 s after the first acquire the other permit has expired; the renewed one holds until 50 s.
  clock_.Advance(seconds(25));
  EXPECT_FALSE(MustAcquire(Body({{"tenant", "acme"}})).empty());
  EXPECT_EQ(Post("/v1/acquire", Body({{"tenant", "acme"}})).status, 429);
  clock_.Advance(seconds(5));
  const auto expired = nlohmann::json::parse(Post("/v1/renew", PermitBody(a)).body);
  EXPECT_FALSE(expired["renewed"].get<bool>());
  EXPECT_TRUE(expired["permit_ttl_ms"].is_null());
}

// The store keeps expiries to the microsecond and reports its time floored, its expiries rounded
// up: a renew's permit_ttl_ms is still the limit's permit_ttl, never a millisecond more, which a
// holder counting from its send would hold past the store's expiry.
TEST_F(PermitApi, ARenewAnswersThePermitTtlOffAWholeMicrosecond) {
  clock_.Advance(std::chrono::nanoseconds(500));
  const std::string a = MustAcquire(Body({{"tenant", "acme"}}));
  clock_.Advance(seconds(1));
  const auto json = nlohmann::json::parse(Post("/v1/renew", PermitBody(a)).body);
  ASSERT_TRUE(json["renewed"].get<bool>()) << json;
  EXPECT_EQ(json["permit_ttl_ms"], 30000);
}

// A descriptor sent twice in one acquire takes one slot (one request in flight; the store grants
// an id it already holds without a second slot), and its release frees that slot and says so.
TEST_F(PermitApi, ADescriptorSentTwiceTakesOneSlotAndReleasesIt) {
  const HttpReply r = Post("/v1/acquire", Body({{"tenant", "acme"}, {"tenant", "acme"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto json = nlohmann::json::parse(r.body);
  EXPECT_EQ(json["statuses"][1]["in_flight"], 1);
  const std::string permit = json["permit"].get<std::string>();
  const auto renewed = nlohmann::json::parse(Post("/v1/renew", PermitBody(permit)).body);
  EXPECT_TRUE(renewed["renewed"].get<bool>()) << renewed;
  EXPECT_TRUE(Released(permit));
  EXPECT_FALSE(Released(permit)) << "already released";
  EXPECT_NE(Metrics().find("sluice_in_flight{domain=\"api\",limit=\"api.tenant\"} 0"),
            std::string::npos);
}

TEST_F(PermitApi, MalformedPermitsAre400AndUnknownOnes200False) {
  const std::string good = MustAcquire(Body({{"tenant", "acme"}}));
  for (const std::string& body :
       {std::string("not json"), std::string("{}"), std::string(R"({"permit":1})"),
        std::string(R"({"permit":"x","other":1})"), PermitBody(""), PermitBody("!!!!"),
        PermitBody(good + "A"), PermitBody(good.substr(0, good.size() - 3)),
        PermitBody("B" + good.substr(1)), PermitBody(std::string(kMaxPermitBytes + 4, 'A'))}) {
    for (const char* route : {"/v1/release", "/v1/renew"}) {
      const HttpReply r = Post(route, body);
      EXPECT_EQ(r.status, 400) << route << " " << body.substr(0, 80) << " -> " << r.body;
    }
  }
  // Well-formed, but no store holds it: another random id for the same slot.
  auto token = DecodePermit(good);
  ASSERT_TRUE(token.has_value());
  token->random[0] ^= 1;
  EXPECT_FALSE(Released(EncodePermit(*token)));
  // Naming a pool no limit has.
  token->keys = {"nowhere|@concurrency#tenant=acme"};
  EXPECT_FALSE(Released(EncodePermit(*token)));
  EXPECT_TRUE(Released(good));
}

TEST_F(PermitApi, ChargeIsRefusedWithAcquire) {
  const HttpReply r = Post(
      "/v1/acquire",
      R"({"domain":"api","charge":true,"descriptors":[{"entries":[{"key":"tenant","value":"a"}]}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("charge"), std::string::npos) << r.body;
}

TEST_F(PermitApi, OnlyPostIsAllowed) {
  for (const char* route : {"/v1/acquire", "/v1/release", "/v1/renew"}) {
    const HttpReply r = api_->Handle({"GET", route, "", ""});
    EXPECT_EQ(r.status, 405) << route;
    EXPECT_EQ(Header(r, "Allow"), "POST");
  }
}

// A rate limit that refuses gives back the slot the acquire took.
TEST_F(PermitApi, ARateLimitRefusalGivesBackTheSlots) {
  const std::string a = MustAcquire(Body({{"tenant", "acme"}, {"user", "u1"}}));
  ASSERT_FALSE(a.empty());
  const HttpReply refused = Post("/v1/acquire", Body({{"tenant", "acme"}, {"user", "u1"}}));
  ASSERT_EQ(refused.status, 429) << refused.body;
  // The refused acquire holds nothing: one slot of two is still free.
  EXPECT_NE(Metrics().find("sluice_in_flight{domain=\"api\",limit=\"api.tenant\"} 1"),
            std::string::npos);
  EXPECT_FALSE(MustAcquire(Body({{"tenant", "acme"}})).empty());
}

// The answer to a refused acquire says what it holds: nothing. A slot it took and gave back has
// no expiry (permit_expires_us 0, as the docs say of a slot not held), and in_flight, the
// permits of its key held after the call, does not count it.
TEST_F(PermitApi, ARefusedAcquireReportsItsSlotsGivenBack) {
  ASSERT_FALSE(MustAcquire(Body({{"tenant", "acme"}, {"user", "u1"}})).empty());
  const HttpReply refused = Post("/v1/acquire", Body({{"tenant", "acme"}, {"user", "u1"}}));
  ASSERT_EQ(refused.status, 429) << refused.body;
  const auto json = nlohmann::json::parse(refused.body);
  EXPECT_TRUE(json["permit"].is_null());
  const auto& slot = json["statuses"][0];
  EXPECT_EQ(slot["code"], "OK") << "the slot itself was granted";
  EXPECT_EQ(slot["in_flight"], 1) << refused.body;
  EXPECT_EQ(slot["permit_expires_us"], 0) << refused.body;
  EXPECT_GT(slot["store_time_us"].get<int64_t>(), 0) << "the store was asked";
}

// A slot that refuses leaves the rate limits uncounted.
TEST_F(PermitApi, ASlotRefusalCountsNoRateLimit) {
  // both: 2 per minute and 1 in flight.
  const std::string a = MustAcquire(Body({{"both", "x"}}));
  const HttpReply refused = Post("/v1/acquire", Body({{"both", "x"}}));
  ASSERT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(nlohmann::json::parse(refused.body)["statuses"][0]["remaining"], 1)
      << "looked at, not counted";
  EXPECT_TRUE(Released(a));
  // Had the refused acquire counted, the rate limit would now refuse.
  const std::string b = MustAcquire(Body({{"both", "x"}}));
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(Released(b));
  EXPECT_EQ(Post("/v1/acquire", Body({{"both", "x"}})).status, 429) << "2 per minute taken";
}

// A check cannot release, so it skips the concurrency rule (answered OK) and counts it, for every
// caller: HTTP's /v1/check, forward-auth (the same caller) and Envoy's gRPC.
TEST_F(PermitApi, ChecksSkipConcurrencyRulesAndCountThem) {
  MustAcquire(Body({{"tenant", "acme"}}));
  MustAcquire(Body({{"tenant", "acme"}}));
  EXPECT_EQ(Post("/v1/check", Body({{"tenant", "acme"}})).status, 200);
  CheckRequest envoy;
  envoy.domain = "api";
  envoy.caller = Caller::kEnvoy;
  envoy.descriptors.push_back({{{"tenant", "acme"}}, {}, {}});
  envoy.descriptors.push_back({{{"both", "y"}}, {}, {}});
  auto answer = service_->Check(envoy);
  ASSERT_TRUE(answer.has_value()) << answer.error().message;
  EXPECT_EQ(answer->overall, Code::kOk);
  EXPECT_EQ(answer->statuses[1].remaining, 1) << "the rate limit beside it is still checked";
  const std::string m = Metrics();
  EXPECT_NE(m.find("sluice_descriptors_unchecked_total{reason=\"concurrency\"} 3"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("sluice_acquire_duration_seconds_count 2"), std::string::npos);
}

TEST_F(PermitApi, TheLimitsListingShowsConcurrency) {
  HttpApiOptions options;
  options.admin_token = "t";
  HttpApi admin(service_.get(), &metrics_, options);
  HttpRequestView get{"GET", "/v1/limits", "", ""};
  get.authorization = "Bearer t";
  const HttpReply r = admin.Handle(get);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto limits = nlohmann::json::parse(r.body)["domains"][0]["limits"];
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0]["kind"], "unlimited");
  EXPECT_EQ(
      limits[0]["concurrency"],
      nlohmann::json({{"max_in_flight", 2}, {"permit_ttl_ms", 30000}, {"failure_mode", "open"}}));
  EXPECT_FALSE(limits[1].contains("concurrency"));
}

TEST_F(PermitApi, AReloadKeepsThePoolsOfUnchangedLimits) {
  const std::string a = MustAcquire(Body({{"tenant", "acme"}}));
  MustAcquire(Body({{"tenant", "acme"}}));
  const std::string changed = std::string(kConfig) + R"yaml(  - key: extra
    rate_limit: {unit: second, requests_per_unit: 5}
)yaml";
  auto config = LoadConfig(dir_.Write("api.yaml", changed));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_TRUE(service_->Reload(*config).has_value());
  EXPECT_EQ(Post("/v1/acquire", Body({{"tenant", "acme"}})).status, 429);
  EXPECT_TRUE(Released(a));
}

// A reload that changes the numbers on the memory store keeps the permits held, as on Redis
// (docs/load-protection.md): they release with released=true and count against the new
// max_in_flight until released or expired at their own expiry.
TEST_F(PermitApi, AReloadThatChangesTheNumbersKeepsThePermits) {
  const std::string a = MustAcquire(Body({{"tenant", "acme"}}));
  const std::string b = MustAcquire(Body({{"tenant", "acme"}}));
  std::string lowered(kConfig);
  const std::string from = "max_in_flight: 2, permit_ttl: 30s";
  lowered.replace(lowered.find(from), from.size(), "max_in_flight: 1, permit_ttl: 60s");
  auto config = LoadConfig(dir_.Write("api.yaml", lowered));
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_TRUE(service_->Reload(*config).has_value());
  EXPECT_EQ(Post("/v1/acquire", Body({{"tenant", "acme"}})).status, 429) << "2 held of 1";
  EXPECT_TRUE(Released(a));
  EXPECT_EQ(Post("/v1/acquire", Body({{"tenant", "acme"}})).status, 429) << "1 held of 1";
  clock_.Advance(seconds(30));  // b's own expiry, from the old permit_ttl
  const std::string c = MustAcquire(Body({{"tenant", "acme"}}));
  EXPECT_FALSE(Released(b));
  EXPECT_TRUE(Released(c));
}

}  // namespace
}  // namespace sluice::server
