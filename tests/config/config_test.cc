// Loading valid configs: the shipped example, ratelimit's README examples, every extension,
// plans, directories. Expected values come from the YAML text, read by hand.
#include "config/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/descriptor.h"
#include "support/server_test_util.h"

namespace sluice::server {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using test::Fixture;
using test::MustLoad;
using test::MustMatch;

const Limit* FindNamed(const Domain& d, std::string_view name) {
  for (const Limit& l : d.limits) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The shipped example.

TEST(ExampleConfig, Loads) {
  auto config = MustLoad(std::string(SLUICE_EXAMPLES_DIR) + "/sluice.yaml");
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(config->domains().size(), 1u);
  const Domain* api = config->FindDomain("api");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->plan_key, "api_key");
  EXPECT_EQ(api->plans.size(), 4u);  // default, free, pro, enterprise
  EXPECT_EQ(api->identity_plans.size(), 4u);
  EXPECT_EQ(api->PlanFor("key_live_pro_7f3a"), "pro");
  EXPECT_EQ(api->PlanFor("key_unknown"), "default");

  const Limit* per_ip = FindNamed(*api, "per_ip");
  ASSERT_NE(per_ip, nullptr);
  EXPECT_EQ(per_ip->spec.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(per_ip->spec.limit, 50);
  EXPECT_EQ(per_ip->spec.period, seconds(1));
  EXPECT_EQ(per_ip->spec.burst, 200);

  const Limit* search = FindNamed(*api, "search_per_ip");
  ASSERT_NE(search, nullptr);
  EXPECT_EQ(search->mode, Mode::kShadow);

  const Limit* pay = FindNamed(*api, "payments_create");
  ASSERT_NE(pay, nullptr);
  EXPECT_EQ(pay->spec.algorithm, Algorithm::kSlidingWindowLog);
  EXPECT_EQ(pay->failure_mode, FailureMode::kClosed);
  EXPECT_EQ(pay->spec.period, minutes(1));

  const Limit* ent = FindNamed(*api, "plan_enterprise");
  ASSERT_NE(ent, nullptr);
  EXPECT_EQ(ent->mode, Mode::kSoft);
  EXPECT_EQ(ent->plan, "enterprise");

  const Limit* blocked = FindNamed(*api, "blocked_ip");
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->kind, LimitKind::kBlocked);
}

TEST(ExampleConfig, MatchesTheDescriptorsItsCommentPromises) {
  auto config = MustLoad(std::string(SLUICE_EXAMPLES_DIR) + "/sluice.yaml");
  ASSERT_NE(config, nullptr);
  auto name_of = [&](std::initializer_list<test::Entry> entries) -> std::string {
    const MatchResult m = MustMatch(*config, "api", entries);
    return m.limit == nullptr ? "<none>" : m.limit->name;
  };
  EXPECT_EQ(name_of({{"remote_address", "198.51.100.23"}}), "per_ip");
  EXPECT_EQ(name_of({{"remote_address", "203.0.113.66"}}), "blocked_ip");
  EXPECT_EQ(name_of({{"api_key", "key_live_pro_7f3a"}}), "plan_pro");
  EXPECT_EQ(name_of({{"api_key", "key_test_free_02"}}), "plan_free");
  EXPECT_EQ(name_of({{"api_key", "key_live_ent_19c2"}}), "plan_enterprise");
  EXPECT_EQ(name_of({{"api_key", "someone_else"}}), "plan_default");
  EXPECT_EQ(
      name_of({{"api_key", "key_live_pro_7f3a"}, {"path", "/v1/payments"}, {"method", "POST"}}),
      "payments_create");
  EXPECT_EQ(
      name_of({{"api_key", "key_live_pro_7f3a"}, {"path", "/v1/payments"}, {"method", "GET"}}),
      "<none>");
  EXPECT_EQ(name_of({{"remote_address", "198.51.100.23"}, {"path", "/v1/search/orders"}}),
            "search_per_ip");
  EXPECT_EQ(name_of({{"path", "/healthz"}}), "");  // unlimited, unnamed
  EXPECT_EQ(MustMatch(*config, "api", {{"path", "/healthz"}}).limit->kind, LimitKind::kUnlimited);
}

TEST(ExampleConfig, DirectoryOfExamplesTreatsPlansFileAsPlans) {
  // examples/ holds sluice.yaml and the plans.yaml it names: one domain, not two files.
  auto config = MustLoad(SLUICE_EXAMPLES_DIR);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->domains().size(), 1u);
  EXPECT_NE(config->FindDomain("api"), nullptr);
}

TEST(ExampleConfig, TheQuotasExampleIsTheWorkedPlan) {
  // examples/quotas/quotas.yaml: docs/quotas.md's worked example, a make run user's to try.
  auto config = MustLoad(std::string(SLUICE_EXAMPLES_DIR) + "/quotas/quotas.yaml");
  ASSERT_NE(config, nullptr);
  const Limit* monthly = MustMatch(*config, "quotas", {{"customer", "acme"}}).limit;
  ASSERT_NE(monthly, nullptr);
  EXPECT_EQ(monthly->name, "monthly");
  EXPECT_EQ(monthly->spec.calendar.unit, CalendarUnit::kMonth);
  EXPECT_EQ(monthly->spec.calendar.timezone, "Europe/Lisbon");
  EXPECT_EQ(monthly->spec.limit, 1000000);
  const Limit* cap = MustMatch(*config, "quotas", {{"customer", "acme"}, {"window", "5m"}}).limit;
  ASSERT_NE(cap, nullptr);
  EXPECT_EQ(cap->spec.period, std::chrono::minutes(5));
  EXPECT_EQ(cap->spec.limit, 600);
  const Limit* daily =
      MustMatch(*config, "quotas", {{"customer", "acme"}, {"window", "day"}}).limit;
  ASSERT_NE(daily, nullptr);
  EXPECT_EQ(daily->spec.calendar.unit, CalendarUnit::kDay);
  EXPECT_EQ(daily->spec.calendar.timezone, "Asia/Tokyo");
}

TEST(ExampleConfig, CheckConfigSummarises) {
  auto summary = CheckConfig(std::string(SLUICE_EXAMPLES_DIR) + "/sluice.yaml");
  ASSERT_TRUE(summary.has_value()) << summary.error().message;
  // 4 plan limits + per_ip, search_per_ip, blocked_ip, payments_create, healthz.
  EXPECT_EQ(*summary, "1 domain, 9 limits, 4 plans");
}

// ---------------------------------------------------------------------------------------------
// What every limit carries.

TEST(LimitMetadata, ReadmeExample1) {
  auto config = MustLoad(Fixture("readme_example1.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("db_qps");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->limits.size(), 2u);
  const Limit& users = d->limits[0];
  EXPECT_EQ(users.id, "db_qps|database=users");
  EXPECT_EQ(users.metric_name, "db_qps.database_users");
  EXPECT_EQ(users.domain, "db_qps");
  EXPECT_EQ(users.period.unit, Unit::kSecond);
  EXPECT_EQ(users.requests_per_unit, 400);
  EXPECT_EQ(users.spec.algorithm, Algorithm::kTokenBucket);  // sluice's default
  EXPECT_EQ(users.spec.limit, 400);
  EXPECT_EQ(users.spec.period, seconds(1));
  EXPECT_EQ(users.spec.burst, 0);  // capacity = requests_per_unit
  EXPECT_EQ(users.mode, Mode::kEnforce);
  EXPECT_EQ(users.failure_mode, FailureMode::kOpen);
  EXPECT_FALSE(users.detailed_metric);
  EXPECT_EQ(users.origin, Fixture("readme_example1.yaml") + ":4:5");
  EXPECT_EQ(d->limits[1].requests_per_unit, 250);
}

TEST(LimitMetadata, IdsOfNestedAndPlanLimits) {
  auto config = MustLoad(Fixture("plans_domain.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("saas");
  ASSERT_NE(d, nullptr);
  std::vector<std::string> ids;
  for (const Limit& l : d->limits) ids.push_back(l.id);
  EXPECT_EQ(ids, (std::vector<std::string>{
                     "saas|tenant|op",  // domain descriptors come first
                     "saas|region",
                     "saas|@plan=default|tenant",
                     "saas|@plan=gold|tenant",
                     "saas|@plan=gold|tenant|op=export",
                     "saas|@plan=platinum|tenant",
                 }));
}

TEST(LimitMetadata, IdsEscapeSeparatorsAndKeepPatternStars) {
  auto config = MustLoad(Fixture("escaping.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("esc|d");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->limits.size(), 2u);
  EXPECT_EQ(d->limits[0].id, "esc%7Cd|a%3Db=x%7Cy%20z");
  EXPECT_EQ(d->limits[1].id, "esc%7Cd|a%3Db=pre%25*post");
}

TEST(Extensions, EveryAlgorithmUnitAndMode) {
  auto config = MustLoad(Fixture("extensions.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("ext");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->limits.size(), 8u);
  const auto& l = d->limits;

  EXPECT_EQ(l[0].spec.algorithm, Algorithm::kTokenBucket);

  EXPECT_EQ(l[1].period.unit, Unit::kMinute);  // "MINUTE": ratelimit upper-cases units
  EXPECT_EQ(l[1].spec.period, minutes(1));
  EXPECT_EQ(l[1].spec.burst, 90);

  EXPECT_EQ(l[2].spec.algorithm, Algorithm::kLeakyBucket);
  EXPECT_TRUE(l[2].spec.shaper);
  EXPECT_EQ(l[2].spec.burst, 20);
  EXPECT_EQ(l[2].spec.max_delay, seconds(2));
  EXPECT_EQ(l[1].spec.max_delay, Duration::max()) << "unset: what the queue allows";

  EXPECT_EQ(l[3].spec.algorithm, Algorithm::kGcra);
  EXPECT_EQ(l[3].spec.period, hours(1));

  EXPECT_EQ(l[4].spec.algorithm, Algorithm::kFixedWindow);
  EXPECT_EQ(l[4].spec.period, hours(24));
  EXPECT_EQ(l[4].mode, Mode::kSoft);

  EXPECT_EQ(l[5].spec.algorithm, Algorithm::kSlidingWindowLog);
  EXPECT_EQ(l[5].spec.period, hours(24 * 7));
  EXPECT_EQ(l[5].failure_mode, FailureMode::kClosed);

  EXPECT_EQ(l[6].spec.algorithm, Algorithm::kSlidingWindowCounter);
  EXPECT_EQ(l[6].spec.period, hours(24 * 30));  // ratelimit's month: 30 days
  EXPECT_EQ(l[6].mode, Mode::kShadow);

  EXPECT_EQ(l[7].spec.period, hours(24 * 365));  // and its year: 365 days
  EXPECT_EQ(l[7].mode, Mode::kShadow);           // shadow_mode: true agrees with mode: shadow
  EXPECT_EQ(l[7].failure_mode, FailureMode::kOpen);
}

// ---------------------------------------------------------------------------------------------
// ratelimit's README examples load with the meaning the README gives them.

TEST(ReadmeExamples, AllLoad) {
  for (const char* f : {"readme_example1.yaml", "readme_example2.yaml", "readme_example3.yaml",
                        "readme_example4_flat.yaml", "readme_example4_nested.yaml",
                        "readme_example5.yaml", "readme_example6.yaml", "readme_example7.yaml",
                        "readme_example8.yaml", "readme_example9.yaml"}) {
    SCOPED_TRACE(f);
    EXPECT_NE(MustLoad(Fixture(f)), nullptr);
  }
}

TEST(ReadmeExamples, Example3ZeroRequestsBlocks) {
  auto config = MustLoad(Fixture("readme_example3.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("edge_ip");
  ASSERT_EQ(d->limits.size(), 2u);
  EXPECT_EQ(d->limits[0].kind, LimitKind::kLimited);
  EXPECT_EQ(d->limits[1].kind, LimitKind::kBlocked);
  EXPECT_EQ(d->limits[1].requests_per_unit, 0);
}

TEST(ReadmeExamples, Example5Unlimited) {
  auto config = MustLoad(Fixture("readme_example5.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("backoffice");
  ASSERT_EQ(d->limits.size(), 2u);
  EXPECT_EQ(d->limits[0].kind, LimitKind::kUnlimited);
  EXPECT_EQ(d->limits[1].kind, LimitKind::kLimited);
  EXPECT_EQ(d->limits[1].requests_per_unit, 90);
  EXPECT_EQ(d->limits[1].period.unit, Unit::kMinute);
}

TEST(ReadmeExamples, Example6ShadowModeIsPerDescriptor) {
  auto config = MustLoad(Fixture("readme_example6.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("accounts");
  ASSERT_EQ(d->limits.size(), 2u);
  EXPECT_EQ(d->limits[0].mode, Mode::kShadow);   // alice
  EXPECT_EQ(d->limits[1].mode, Mode::kEnforce);  // bob
}

TEST(ReadmeExamples, Example7NamesAndReplaces) {
  auto config = MustLoad(Fixture("readme_example7.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("reads");
  ASSERT_EQ(d->limits.size(), 2u);
  EXPECT_EQ(d->limits[0].name, "carol_reads");
  EXPECT_EQ(d->limits[0].metric_name, "carol_reads");
  EXPECT_TRUE(d->limits[1].name.empty());
  EXPECT_EQ(d->limits[1].metric_name, "reads.endpoint_report.user_carol");
  EXPECT_EQ(d->limits[1].replaces, std::vector<std::string>{"carol_reads"});
}

TEST(ReadmeExamples, Example8DetailedMetric) {
  auto config = MustLoad(Fixture("readme_example8.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("tenants");
  ASSERT_EQ(d->limits.size(), 2u);
  EXPECT_TRUE(d->limits[0].detailed_metric);
  EXPECT_FALSE(d->limits[1].detailed_metric);
}

// ---------------------------------------------------------------------------------------------
// Plans and directories.

TEST(Plans, LoadedWithTheConfig) {
  auto config = MustLoad(Fixture("plans_domain.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("saas");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->plan_key, "tenant");
  EXPECT_EQ(d->plan_source, Fixture("plans_identities.yaml"));
  EXPECT_EQ(d->PlanFor("t-gold-1"), "gold");
  EXPECT_EQ(d->PlanFor("t-plat"), "platinum");
  EXPECT_EQ(d->PlanFor("t-explicit-default"), "default");
  EXPECT_EQ(d->PlanFor("nobody"), "default");
  EXPECT_EQ(d->PlanFor(""), "default");
}

TEST(Directory, LoadsEveryYamlFileSkipsDotfilesOtherExtensionsAndPlanFiles) {
  auto config = MustLoad(Fixture("dir_ok"));
  ASSERT_NE(config, nullptr);
  // a.yaml and b.yml are domains; tiers.yaml is b's plan file; .editor-backup.yaml and
  // README.txt (both invalid YAML) are not read.
  ASSERT_EQ(config->domains().size(), 2u);
  ASSERT_NE(config->FindDomain("alpha"), nullptr);
  const Domain* beta = config->FindDomain("beta");
  ASSERT_NE(beta, nullptr);
  EXPECT_EQ(beta->PlanFor("u1"), "big");
  EXPECT_EQ(config->limit_count(), 3u);
}

// ---------------------------------------------------------------------------------------------
// Configs envoyproxy/ratelimit accepts load unchanged, with its meaning (docs/configuration.md,
// "Compatibility").

// The limit a one-entry-per-level descriptor reaches, or null.
const Limit* LimitFor(const Config& config, std::string_view domain,
                      std::initializer_list<test::Entry> entries) {
  return MustMatch(config, domain, entries).limit;
}

// The warning at "fixture:line:" that mentions `says`, or "" if there is none.
std::string WarningAt(const Config& config, const std::string& file, int line,
                      std::string_view says) {
  const std::string where = file + ":" + std::to_string(line) + ":";
  for (const std::string& w : config.warnings()) {
    if (w.starts_with(where) && w.find(says) != std::string::npos) return w;
  }
  return "";
}

// quota_mode (envoyproxy/ratelimit) marks its own rule; over_limit_hits (sluice) is kept as
// written, unset meaning the server's --over-limit-hits.
TEST(Upstream, QuotaModeAndOverLimitHitsLoad) {
  const std::string file = Fixture("quota_services.yaml");
  auto config = MustLoad(file);
  ASSERT_NE(config, nullptr);
  const Limit* small = LimitFor(*config, "quota", {{"service", "small"}});
  const Limit* large = LimitFor(*config, "quota", {{"service", "large"}});
  const Limit* plain = LimitFor(*config, "quota", {{"plain", "x"}});
  const Limit* inner = LimitFor(*config, "quota", {{"nothing_to_mark", "x"}, {"inner", "y"}});
  ASSERT_TRUE(small != nullptr && large != nullptr && plain != nullptr && inner != nullptr);
  EXPECT_TRUE(small->quota_mode);
  EXPECT_FALSE(small->over_limit_hits.has_value());
  EXPECT_TRUE(large->quota_mode);
  EXPECT_EQ(large->over_limit_hits, OverLimitHits::kCount);
  EXPECT_FALSE(plain->quota_mode);
  EXPECT_EQ(plain->over_limit_hits, OverLimitHits::kDrop);
  EXPECT_FALSE(inner->quota_mode) << "nested descriptors do not inherit quota_mode";
  EXPECT_NE(WarningAt(*config, file, 11, "metadata is ignored"), "");
  EXPECT_NE(WarningAt(*config, file, 27, "quota_mode has no effect"), "");
}

// rate_limit.sync: a bare mode takes its defaults (lease_ttl 2s, interval 100ms), a mapping sets
// them; unset is exact.
TEST(Extensions, SyncModesLoad) {
  auto config = MustLoad(Fixture("sync_modes.yaml"));
  ASSERT_NE(config, nullptr);
  const Limit* exact = LimitFor(*config, "shared", {{"exact", "x"}});
  const Limit* leased_default = LimitFor(*config, "shared", {{"leased_default", "x"}});
  const Limit* leased = LimitFor(*config, "shared", {{"leased", "x"}});
  const Limit* batched = LimitFor(*config, "shared", {{"batched", "x"}});
  const Limit* unset = LimitFor(*config, "shared", {{"unset", "x"}});
  ASSERT_TRUE(exact && leased_default && leased && batched && unset);
  using std::chrono::milliseconds;
  EXPECT_EQ(exact->sync.mode, SyncMode::kExact);
  EXPECT_EQ(unset->sync.mode, SyncMode::kExact);
  EXPECT_EQ(leased_default->sync.mode, SyncMode::kLeased);
  EXPECT_EQ(leased_default->sync.lease_ttl, milliseconds(2000));
  EXPECT_EQ(leased->sync.mode, SyncMode::kLeased);
  EXPECT_EQ(leased->sync.lease_ttl, milliseconds(500));
  EXPECT_EQ(batched->sync.mode, SyncMode::kBatched);
  EXPECT_EQ(batched->sync.interval, milliseconds(250));
  EXPECT_EQ(batched->sync.lease_ttl, milliseconds(2000)) << "untouched outside its mode";
}

// scope: global. A node of region us enforces its static part of each limit: limit x share and
// burst x share, rounded down (1000 x 0.5 = 500, 2000 x 0.5 = 1000; 999 x 0.34 = 339.66 -> 339);
// regions.global_spec keeps the whole; scope: region (and unset) is untouched.
TEST(Regions, StaticPartIsTheRegionsShareRoundedDown) {
  LoadOptions options;
  options.region = {.region = "us", .global_store = true};
  auto config = LoadConfig(Fixture("regions.yaml"), options);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  const Domain& d = *(*config)->FindDomain("world");
  const Limit* fixed = FindNamed(d, "static");
  const Limit* leased = FindNamed(d, "leased");
  const Limit* local = FindNamed(d, "local");
  ASSERT_TRUE(fixed && leased && local);
  EXPECT_TRUE(fixed->regions.global);
  EXPECT_EQ(fixed->regions.mode, RegionMode::kStatic);
  EXPECT_EQ(fixed->spec.limit, 500);
  EXPECT_EQ(fixed->spec.burst, 1000);
  EXPECT_EQ(fixed->spec.period, seconds(1));
  EXPECT_EQ(fixed->regions.global_spec.limit, 1000);
  EXPECT_EQ(fixed->regions.global_spec.burst, 2000);
  EXPECT_EQ(fixed->regions.region, "us");
  ASSERT_EQ(fixed->regions.shares.size(), 3u);
  EXPECT_EQ(fixed->regions.shares[0], (RegionShare{"ap", 200'000}));  // sorted by name
  EXPECT_EQ(fixed->regions.shares[2], (RegionShare{"us", 500'000}));
  EXPECT_EQ(leased->regions.mode, RegionMode::kLeased);
  EXPECT_EQ(leased->regions.refresh, std::chrono::milliseconds(200));
  EXPECT_EQ(leased->spec.limit, 339);
  EXPECT_EQ(leased->spec.period, minutes(1));
  EXPECT_EQ(leased->sync.mode, SyncMode::kLeased);  // composes: how the region's nodes share it
  EXPECT_FALSE(local->regions.global);
  EXPECT_EQ(local->spec.limit, 10);
  // In ap the same file gives ap's parts: 1000 x 0.2, 999 x 0.33 = 329.67 -> 329.
  options.region.region = "ap";
  auto ap = LoadConfig(Fixture("regions.yaml"), options);
  ASSERT_TRUE(ap.has_value()) << ap.error().message;
  EXPECT_EQ(FindNamed(*(*ap)->FindDomain("world"), "static")->spec.limit, 200);
  EXPECT_EQ(FindNamed(*(*ap)->FindDomain("world"), "leased")->spec.limit, 329);
}

// A node must know its region: without --region, or with one the shares do not list, a limit of
// scope global is refused naming the limit and the regions; leased needs --global-store.
TEST(Regions, RefusedWithoutTheNodesRegion) {
  const std::string file = Fixture("regions.yaml");
  auto none = LoadConfig(file);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("rate_limit 'static' has scope: global: start sluiced with "
                                      "--region (one of: ap, eu, us)"),
            std::string::npos)
      << none.error().message;
  LoadOptions options;
  options.region = {.region = "sa", .global_store = true};
  auto unlisted = LoadConfig(file, options);
  ASSERT_FALSE(unlisted.has_value());
  EXPECT_NE(unlisted.error().message.find("do not list this node's region 'sa'"), std::string::npos)
      << unlisted.error().message;
  options.region = {.region = "eu", .global_store = false};
  auto no_global = LoadConfig(file, options);
  ASSERT_FALSE(no_global.has_value());
  EXPECT_NE(no_global.error().message.find(
                "rate_limit 'leased' has regions mode leased: start sluiced with --global-store"),
            std::string::npos)
      << no_global.error().message;
}

// --default-sync: rules that set no sync get it, except where their algorithm cannot lease or
// be batched (warned, naming the rule); rules that set one keep theirs.
TEST(LoadOptions, DefaultSyncAppliesToRulesThatSetNone) {
  LoadOptions options;
  options.default_sync.mode = SyncMode::kLeased;
  const std::string file = Fixture("sync_modes.yaml");
  auto config = LoadConfig(file, options);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  const Config& c = **config;
  EXPECT_EQ(LimitFor(c, "shared", {{"unset", "x"}})->sync.mode, SyncMode::kLeased);
  EXPECT_EQ(LimitFor(c, "shared", {{"exact", "x"}})->sync.mode, SyncMode::kExact);
  EXPECT_EQ(LimitFor(c, "shared", {{"batched", "x"}})->sync.mode, SyncMode::kBatched);
  EXPECT_EQ(LimitFor(c, "shared", {{"sliding_unset", "x"}})->sync.mode, SyncMode::kExact);
  EXPECT_NE(WarningAt(c, file, 21,
                      "--default-sync leased does not apply to this "
                      "sliding_window_log limit"),
            "");
  // Batched reads a count back from Redis's answers, which a sliding window has none of.
  options.default_sync.mode = SyncMode::kBatched;
  auto batched = LoadConfig(file, options);
  ASSERT_TRUE(batched.has_value()) << batched.error().message;
  EXPECT_EQ(LimitFor(**batched, "shared", {{"unset", "x"}})->sync.mode, SyncMode::kBatched);
  EXPECT_EQ(LimitFor(**batched, "shared", {{"sliding_unset", "x"}})->sync.mode, SyncMode::kExact);
  EXPECT_NE(WarningAt(**batched, file, 21,
                      "--default-sync batched does not apply to this "
                      "sliding_window_log limit"),
            "");
}

// forward_auth: the trusted blocks and the actions, entry by entry, as the fixture writes them.
TEST(ForwardAuth, SectionLoads) {
  auto config = MustLoad(Fixture("forward_auth.yaml"));
  ASSERT_NE(config, nullptr);
  const Domain* d = config->FindDomain("api");
  ASSERT_TRUE(d != nullptr && d->forward_auth.has_value());
  const ForwardAuth& fa = *d->forward_auth;
  EXPECT_EQ(fa.origin, Fixture("forward_auth.yaml") + ":2:1");
  ASSERT_EQ(fa.trusted_proxies.size(), 4u);
  EXPECT_EQ(fa.trusted_proxies[1].base.ToString(), "10.0.0.0");
  EXPECT_EQ(fa.trusted_proxies[1].prefix, 8);
  EXPECT_EQ(fa.trusted_proxies[2].prefix, 128);
  EXPECT_EQ(fa.trusted_proxies[3].prefix, 32);  // after `unix`, which is no network
  EXPECT_TRUE(fa.trust_unix);
  ASSERT_EQ(fa.actions.size(), 3u);
  ASSERT_EQ(fa.actions[0].entries.size(), 1u);
  EXPECT_EQ(fa.actions[0].entries[0].field, RequestField::kRemoteAddress);
  EXPECT_EQ(fa.actions[0].entries[0].key, "remote_address");
  const auto& a1 = fa.actions[1].entries;
  ASSERT_EQ(a1.size(), 3u);
  EXPECT_EQ(a1[0].field, RequestField::kHeader);
  EXPECT_EQ(a1[0].name, "X-Api-Key");
  EXPECT_EQ(a1[0].key, "api_key");
  EXPECT_EQ(a1[1].field, RequestField::kPath);
  EXPECT_EQ(a1[2].field, RequestField::kMethod);
  const auto& a2 = fa.actions[2].entries;
  ASSERT_EQ(a2.size(), 4u);
  EXPECT_EQ(a2[0].field, RequestField::kHost);
  EXPECT_EQ(a2[1].field, RequestField::kQuery);
  EXPECT_EQ(a2[1].name, "tenant");
  EXPECT_EQ(a2[2].field, RequestField::kGenericKey);
  EXPECT_EQ(a2[2].key, "generic_key");  // Envoy's default descriptor_key
  EXPECT_EQ(a2[2].value, "search");
  EXPECT_EQ(a2[3].key, "k");
  EXPECT_EQ(a2[3].value, "v");
  // A domain without the section serves no forward-auth.
  auto plain = MustLoad(Fixture("sync_modes.yaml"));
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->FindDomain("shared")->forward_auth.has_value());
}

// forward_auth.normalize: each option as written; without the section, every option keeps.
TEST(ForwardAuth, NormalizeOptionsLoad) {
  using N = util::PathNormalize;
  auto config = MustLoad(Fixture("forward_auth_normalize.yaml"));
  ASSERT_NE(config, nullptr);
  const ForwardAuth& fa = *config->FindDomain("api")->forward_auth;
  EXPECT_EQ(fa.normalize.trailing_slash, N::TrailingSlash::kStrip);
  EXPECT_EQ(fa.normalize.path_params, N::PathParams::kStrip);
  EXPECT_EQ(fa.normalize.path_case, N::PathCase::kLower);
  EXPECT_EQ(fa.normalize.escaped_slashes, N::EscapedSlashes::kReject);
  auto plain = MustLoad(Fixture("forward_auth.yaml"));
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->FindDomain("api")->forward_auth->normalize, N{});
}

// --default-algorithm: rules that name no algorithm get it (a plan's too); named ones keep theirs.
TEST(LoadOptions, DefaultAlgorithmAppliesToRulesThatNameNone) {
  LoadOptions options;
  options.default_algorithm = Algorithm::kFixedWindow;
  auto config = LoadConfig(Fixture("quota_services.yaml"), options);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  const Limit* small = LimitFor(**config, "quota", {{"service", "small"}});
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->spec.algorithm, Algorithm::kFixedWindow);
  auto extensions = LoadConfig(Fixture("extensions.yaml"), options);
  ASSERT_TRUE(extensions.has_value()) << extensions.error().message;
  int named = 0, defaulted = 0;
  for (const auto& [name, domain] : (*extensions)->domains()) {
    for (const Limit& l : domain.limits) {
      if (l.kind != LimitKind::kLimited) continue;
      (l.spec.algorithm == Algorithm::kFixedWindow ? defaulted : named)++;
    }
  }
  EXPECT_GT(named, 0) << "rules that name an algorithm keep it";
  EXPECT_GT(defaulted, 0);
  auto plain = LoadConfig(Fixture("quota_services.yaml"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(LimitFor(**plain, "quota", {{"service", "small"}})->spec.algorithm,
            Algorithm::kTokenBucket);
}

TEST(MergeKeys, ResolvedAsYamlV2Does) {
  auto config = MustLoad(Fixture("merge_keys.yaml"));
  ASSERT_NE(config, nullptr);
  EXPECT_TRUE(config->warnings().empty());
  const Limit* b = LimitFor(*config, "merged", {{"b", "x"}});
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name, "per_b");  // the explicit name wins over the merged one
  EXPECT_EQ(b->period.unit, Unit::kMinute);
  EXPECT_EQ(b->requests_per_unit, 5);
  EXPECT_EQ(b->spec.period, minutes(1));
  // In a list of mappings the earlier one wins: unit hour, not second.
  const Limit* c = LimitFor(*config, "merged", {{"c", "x"}});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name, "per_c");
  EXPECT_EQ(c->period.unit, Unit::kHour);
  EXPECT_EQ(c->requests_per_unit, 7);
  // A whole descriptor merged, its value replaced.
  const Limit* d_two = LimitFor(*config, "merged", {{"d", "two"}});
  ASSERT_NE(d_two, nullptr);
  EXPECT_EQ(d_two->period.unit, Unit::kDay);
  EXPECT_EQ(d_two->requests_per_unit, 3);
  EXPECT_EQ(d_two->id, "merged|d=two");
  ASSERT_NE(LimitFor(*config, "merged", {{"d", "one"}}), nullptr);
  // yaml.v2 applies keys in order: a merge written after an explicit key replaces it.
  const Limit* e = LimitFor(*config, "merged", {{"e", "x"}});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->requests_per_unit, 9);
}

TEST(Upstream, LenientFormsLoadWithRatelimitsMeaning) {
  const std::string file = Fixture("upstream_lenient.yaml");
  auto config = MustLoad(file);
  ASSERT_NE(config, nullptr);
  const auto limit = [&](std::initializer_list<test::Entry> entries) {
    return LimitFor(*config, "lenient", entries);
  };
  // shadow_mode / detailed_metric without a rate_limit: no effect, not inherited.
  const Limit* child = limit({{"parent", "p"}, {"child", "c"}});
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->mode, Mode::kEnforce);
  EXPECT_FALSE(child->detailed_metric);
  EXPECT_EQ(limit({{"parent", "p"}}), nullptr);
  // value: "" and a null value are key-only rules.
  const Limit* empty = limit({{"empty_value", "anything"}});
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->requests_per_unit, 2);
  EXPECT_EQ(empty->id, "lenient|empty_value");
  const Limit* null_value = limit({{"null_value", "anything"}});
  ASSERT_NE(null_value, nullptr);
  EXPECT_EQ(null_value->requests_per_unit, 3);
  // A null rate_limit is none.
  EXPECT_EQ(limit({{"null_rate_limit", "x"}}), nullptr);
  // unlimited with requests_per_unit, or with a unit ratelimit does not know.
  const Limit* unlimited = limit({{"unlimited", "x"}});
  ASSERT_NE(unlimited, nullptr);
  EXPECT_EQ(unlimited->kind, LimitKind::kUnlimited);
  const Limit* unknown_unit = limit({{"unlimited_unknown_unit", "x"}});
  ASSERT_NE(unknown_unit, nullptr);
  EXPECT_EQ(unknown_unit->kind, LimitKind::kUnlimited);
  // No requests_per_unit reads as 0: blocks everything.
  const Limit* missing = limit({{"missing_requests_per_unit", "x"}});
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->kind, LimitKind::kBlocked);
  EXPECT_EQ(missing->period.unit, Unit::kMinute);
  // replaces naming nothing loads.
  const Limit* replaces = limit({{"replaces_nothing", "x"}});
  ASSERT_NE(replaces, nullptr);
  EXPECT_EQ(replaces->replaces, std::vector<std::string>{"no_such"});
  // YAML 1.1 booleans.
  const Limit* bools = limit({{"yaml11_bools", "x"}});
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->mode, Mode::kShadow);
  EXPECT_EQ(bools->kind, LimitKind::kLimited);
  // ratelimit fields out of place are ignored.
  const Limit* misplaced = limit({{"misplaced", "x"}});
  ASSERT_NE(misplaced, nullptr);
  EXPECT_EQ(misplaced->requests_per_unit, 6);
  EXPECT_EQ(limit({{"misplaced", "x"}, {"ignored", "x"}}), nullptr);
  // value_to_metric and metadata load and change nothing; quota_mode/share_threshold false.
  const Limit* upstream_only = limit({{"upstream_only", "x"}});
  ASSERT_NE(upstream_only, nullptr);
  EXPECT_EQ(upstream_only->metric_name, "lenient.upstream_only");
  EXPECT_EQ(upstream_only->requests_per_unit, 7);
  // YAML 1.1 integers, as yaml.v2 reads them.
  const auto rpu = [&](const char* key) {
    const Limit* l = limit({{"ints", "i"}, {key, "x"}});
    return l == nullptr ? -1 : l->requests_per_unit;
  };
  EXPECT_EQ(rpu("octal"), 8);
  EXPECT_EQ(rpu("hex"), 16);
  EXPECT_EQ(rpu("underscores"), 1000);
  EXPECT_EQ(rpu("binary"), 5);
  EXPECT_EQ(rpu("plus"), 12);
}

TEST(Upstream, WarningsNameFileAndLine) {
  const std::string file = Fixture("upstream_lenient.yaml");
  auto config = MustLoad(file);
  ASSERT_NE(config, nullptr);
  for (const auto& [line, says] : std::vector<std::pair<int, std::string>>{
           {6, "shadow_mode has no effect"},
           {7, "detailed_metric has no effect"},
           {22, "requests_per_unit is ignored: the rate_limit is unlimited"},
           {24, "unit 'fortnight' is ignored"},
           {26, "no requests_per_unit, so it is 0 and blocks every request"},
           {28, "replaces names 'no_such'"},
           {33, "field 'unit' has no meaning in a descriptor; ignored"},
           {37, "field 'key' has no meaning in rate_limit"},
           {38, "field 'descriptors' has no meaning in rate_limit"},
           {40, "value_to_metric is ignored"},
           {41, "metadata is ignored"},
           {47, "reads it as octal: 8"},
       }) {
    EXPECT_NE(WarningAt(*config, file, line, says), "") << "no warning at line " << line;
  }
  EXPECT_EQ(config->warnings().size(), 12u);
  // A config without anything to warn about has no warnings.
  auto clean = MustLoad(Fixture("readme_example1.yaml"));
  ASSERT_NE(clean, nullptr);
  EXPECT_TRUE(clean->warnings().empty());
}

// The server swaps configs by pointer; readers must only ever see a const Config.
TEST(Immutability, LoadReturnsASharedConstConfig) {
  static_assert(std::is_same_v<decltype(LoadConfig("")), Result<std::shared_ptr<const Config>>>);
  auto a = MustLoad(Fixture("readme_example1.yaml"));
  auto b = MustLoad(Fixture("readme_example1.yaml"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a.get(), b.get());  // each load is a fresh object, safe to swap in
  // A match against the old config stays valid while the caller holds it.
  std::shared_ptr<const Config> held = a;
  const MatchResult m = MustMatch(*held, "db_qps", {{"database", "users"}});
  a = b;
  ASSERT_NE(m.limit, nullptr);
  EXPECT_EQ(m.limit->requests_per_unit, 400);
}

}  // namespace
}  // namespace sluice::server
