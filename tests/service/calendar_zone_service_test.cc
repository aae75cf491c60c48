// A zone per customer through the service on the memory store, with a manual clock: a rule's
// timezone_from takes the zone from a descriptor entry, which neither changes which rule
// matches nor makes another counter; the plan file's zone for an identity wins over the
// request's; an unknown zone is HTTP's error and, from Envoy, the rule's zone and a metric.
// The month starts are the oracle, from `TZ=<zone> date -d '2026-02-01 00:00' +%s`:
//   Asia/Tokyo 2026-02-01 = 1769871600, 03-01 = 1772290800
//   America/New_York 2026-02-01 = 1769922000, 03-01 = 1772341200
//   Europe/Lisbon (the rule's zone) 2026-03-01 = 1772323200
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "service/rate_limit_service.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using std::chrono::seconds;

constexpr int64_t kTokyoFeb = 1769871600, kTokyoMar = 1772290800;
constexpr int64_t kNewYorkMar = 1772341200, kLisbonMar = 1772323200;

constexpr char kConfig[] = R"yaml(
domain: api
plan_key: tenant
plan_source: file:plans.yaml
plans:
  default:
    - key: tenant
      rate_limit: {name: monthly, calendar: month, timezone: Europe/Lisbon,
                   timezone_from: tz, requests_per_unit: 2}
)yaml";

constexpr char kPlans[] = R"yaml(
identities:
  acme: default
  kyoto: {plan: default, timezone: Asia/Tokyo}
)yaml";

Timestamp At(int64_t unix_seconds) { return FromNanos(unix_seconds * 1'000'000'000); }

class ZoneService : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("plans.yaml", kPlans);
    auto config = LoadConfig(dir_.Write("api.yaml", kConfig));
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    options.zone_warning = [this](const std::string& m) { warnings_.push_back(m); };
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
  }
  Result<CheckResponse> Ask(const std::string& tenant, const std::string& tz,
                            Caller caller = Caller::kHttpJson) {
    CheckRequest r;
    r.domain = "api";
    r.caller = caller;
    std::vector<std::pair<std::string, std::string>> entries = {{"tenant", tenant}};
    if (!tz.empty()) entries.emplace_back("tz", tz);
    r.descriptors.push_back({std::move(entries), {}, {}});
    return service_->Check(r);
  }
  CheckResponse Check(const std::string& tenant, const std::string& tz,
                      Caller caller = Caller::kHttpJson) {
    auto response = Ask(tenant, tz, caller);
    EXPECT_TRUE(response.has_value()) << response.error().message;
    return response ? std::move(*response) : CheckResponse{};
  }
  std::string Metrics() const {
    struct Sink : StatsSink {
      std::string out;
      void Add(const StatFamily& f, std::span<const StatLabel> labels, double v) override {
        out += std::string(f.name);
        for (const StatLabel& l : labels) out += " " + std::string(l.value);
        out += " " + std::to_string(static_cast<int64_t>(v)) + "\n";
      }
    } sink;
    service_->ReportStats(sink);
    return sink.out;
  }

  ManualClock clock_;
  server::Metrics metrics_;
  std::vector<std::string> warnings_;
  test::TempConfigDir dir_{"calzone"};
  std::unique_ptr<RateLimitService> service_;
};

// At 2026-02-28 16:00Z it is already March 1st in Tokyo (01:00 JST) and still February in New
// York and Lisbon: the Tokyo customer's month has just begun, the others' end in hours.
TEST_F(ZoneService, TwoIdentitiesInTwoZonesHaveTheirOwnMonths) {
  clock_.Set(At(kTokyoMar + 3600));
  const CheckResponse tokyo = Check("t1", "Asia/Tokyo");
  ASSERT_EQ(tokyo.overall, Code::kOk);
  // A fresh March window in Tokyo: it ends at Tokyo's April 1st (31 days after March 1st).
  EXPECT_EQ(tokyo.statuses[0].reset_after, seconds(kTokyoMar + 31 * 86400 - (kTokyoMar + 3600)));
  const CheckResponse ny = Check("n1", "America/New_York");
  ASSERT_EQ(ny.overall, Code::kOk);
  EXPECT_EQ(ny.statuses[0].reset_after, seconds(kNewYorkMar - (kTokyoMar + 3600)));
  const CheckResponse lisbon = Check("l1", "");  // the rule's zone
  EXPECT_EQ(lisbon.statuses[0].reset_after, seconds(kLisbonMar - (kTokyoMar + 3600)));
}

// The tz entry is not part of the counter: the same tenant sending it or not uses one counter,
// matched by the same rule.
TEST_F(ZoneService, TheZoneEntryNeitherMatchesNorKeys) {
  clock_.Set(At(kTokyoFeb + 86400));
  const CheckResponse a = Check("t2", "Asia/Tokyo");
  const CheckResponse b = Check("t2", "");
  ASSERT_NE(a.statuses[0].limit, nullptr);
  EXPECT_EQ(a.statuses[0].limit, b.statuses[0].limit);
  EXPECT_EQ(a.statuses[0].counter_key, b.statuses[0].counter_key);
  EXPECT_EQ(a.statuses[0].counter_key.find("tz"), std::string::npos) << a.statuses[0].counter_key;
  EXPECT_EQ(b.statuses[0].remaining, 0);  // two of two taken from one counter
  EXPECT_EQ(Check("t2", "Asia/Tokyo").overall, Code::kOverLimit);
}

// A window opened in Tokyo decides a New York request until Tokyo's month ends (switching
// zones cannot reopen it); each such request is counted.
TEST_F(ZoneService, ASwitchMidWindowIsDecidedInTheRecordedZone) {
  clock_.Set(At(kTokyoMar - 3600));  // Feb 28 23:00 JST; Feb 28 10:00 EST
  ASSERT_EQ(Check("t3", "Asia/Tokyo").statuses[0].reset_after, seconds(3600));
  const CheckResponse ny = Check("t3", "America/New_York");
  EXPECT_EQ(ny.statuses[0].reset_after, seconds(3600));  // Tokyo's end, not New York's
  EXPECT_EQ(ny.statuses[0].remaining, 0);
  EXPECT_EQ(Check("t3", "America/New_York").overall, Code::kOverLimit);
  EXPECT_NE(Metrics().find("sluice_calendar_zone_mismatches_total api monthly 2"),
            std::string::npos)
      << Metrics();
  // An admin read (in the rule's zone, Lisbon) is not a request: not counted.
  ASSERT_TRUE(service_->State("api", {{"tenant", "t3"}}).has_value());
  EXPECT_NE(Metrics().find("sluice_calendar_zone_mismatches_total api monthly 2"),
            std::string::npos)
      << Metrics();
  // Tokyo's month ended: the next window is the request's zone's (New York's February).
  clock_.Advance(seconds(3600));
  const CheckResponse next = Check("t3", "America/New_York");
  ASSERT_EQ(next.overall, Code::kOk);
  EXPECT_EQ(next.statuses[0].reset_after, seconds(kNewYorkMar - kTokyoMar));
}

// kyoto's plan file entry gives Asia/Tokyo: it wins over the zone the request names.
TEST_F(ZoneService, ThePlanFileZoneWinsOverTheRequest) {
  clock_.Set(At(kTokyoMar + 3600));
  const CheckResponse r = Check("kyoto", "America/New_York");
  EXPECT_EQ(r.statuses[0].reset_after, seconds(kTokyoMar + 31 * 86400 - (kTokyoMar + 3600)));
  // An identity the plan file gives no zone (acme) takes the request's.
  const CheckResponse acme = Check("acme", "America/New_York");
  EXPECT_EQ(acme.statuses[0].reset_after, seconds(kNewYorkMar - (kTokyoMar + 3600)));
}

TEST_F(ZoneService, AnUnknownZoneIsHttpsErrorNamingIt) {
  clock_.Set(At(kTokyoFeb));
  auto r = Ask("u1", "Mars/Olympus_Mons");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("'Mars/Olympus_Mons'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("'tz'"), std::string::npos) << r.error().message;
}

TEST_F(ZoneService, AnUnknownZoneFromEnvoyIsTheRulesZoneCountedAndLogged) {
  clock_.Set(At(kTokyoMar + 3600));
  const CheckResponse r = Check("u2", "Mars/Olympus_Mons", Caller::kEnvoy);
  ASSERT_EQ(r.overall, Code::kOk);
  EXPECT_EQ(r.statuses[0].reset_after, seconds(kLisbonMar - (kTokyoMar + 3600)));  // not UTC's
  Check("u2", "Mars/Olympus_Mons", Caller::kEnvoy);
  EXPECT_NE(Metrics().find("sluice_calendar_unknown_zones_total api 2"), std::string::npos)
      << Metrics();
  ASSERT_EQ(warnings_.size(), 1u);  // at most one per 10 s
  EXPECT_NE(warnings_[0].find("Mars/Olympus_Mons"), std::string::npos) << warnings_[0];
}

}  // namespace
}  // namespace sluice::server
