// A rate_limit's `shed:` and the domain's `priority_key` (docs/load-protection.md, "Priority
// shedding"): exact thresholds, the errors (with their lines), and the priority entry stripped
// before matching only in a domain that sheds.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "config/descriptor.h"
#include "support/server_test_util.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

class ConfigShedTest : public ::testing::Test {
 protected:
  std::string LoadError(const std::string& yaml, const LoadOptions& options = {}) {
    auto loaded = LoadConfig(dir_.Write("c.yaml", yaml), options);
    return loaded ? std::string() : loaded.error().message;
  }
  std::shared_ptr<const Config> Load(const std::string& yaml, const LoadOptions& options = {}) {
    auto loaded = LoadConfig(dir_.Write("c.yaml", yaml), options);
    EXPECT_TRUE(loaded.has_value()) << loaded.error().message;
    return loaded ? *loaded : nullptr;
  }
  // A domain with one rule keyed on `k` whose rate_limit is `rate_limit`.
  static std::string One(const std::string& rate_limit) {
    return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + rate_limit + "\n";
  }

  test::TempConfigDir dir_{"shed"};
};

constexpr char kShed[] =
    "{unit: hour, requests_per_unit: 100, shed: [{priority: low, above: 0.6}, "
    "{priority: normal, above: 0.8}]";

TEST_F(ConfigShedTest, ThresholdsLoadAsExactFractionsInOrder) {
  auto config = Load(One(std::string(kShed) + "}"));
  ASSERT_NE(config, nullptr);
  const Limit* l = test::MustMatch(*config, "d", {{"k", "v"}}).limit;
  ASSERT_NE(l, nullptr);
  ASSERT_TRUE(l->shed.has_value());
  ASSERT_EQ(l->shed->levels.size(), 2u);
  EXPECT_EQ(l->shed->levels[0].priority, "low");
  EXPECT_EQ(l->shed->levels[0].above, (ShedFraction{6, 10}));
  EXPECT_EQ(l->shed->levels[1].priority, "normal");
  EXPECT_EQ(l->shed->levels[1].above, (ShedFraction{8, 10}));
}

TEST_F(ConfigShedTest, APriorityWithoutAThresholdIsNeverShed) {
  auto config =
      Load(One("{unit: hour, requests_per_unit: 10, shed: [{priority: low, above: 0.5}, "
               "{priority: high}]}"));
  ASSERT_NE(config, nullptr);
  const Limit* l = test::MustMatch(*config, "d", {{"k", "v"}}).limit;
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(ShedReserve(*l->shed, "high", 10), 0);
  EXPECT_EQ(ShedReserve(*l->shed, "nobody", 10), 5);
}

TEST_F(ConfigShedTest, BadRulesAreRefusedAtTheirLine) {
  struct Bad {
    std::string rate_limit;
    const char* says;
  };
  const Bad bad[] = {
      {"{unit: hour, requests_per_unit: 9, shed: []}", "shed must be a list"},
      {"{unit: hour, requests_per_unit: 9, shed: {priority: low, above: 0.5}}",
       "shed must be a list"},
      {"{unit: hour, requests_per_unit: 9, shed: [{above: 0.5}]}", "needs a 'priority'"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 0}]}", "must be above 0"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 1.5}]}", "is above 1"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 60%}]}",
       "is not a decimal number"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 1e-1}]}",
       "is not a decimal number"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 0.5, below: 1}]}",
       "unknown field 'below'"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 0.5}, "
       "{priority: low, above: 0.7}]}",
       "'low' is listed twice"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: normal, above: 0.8}, "
       "{priority: low, above: 0.6}]}",
       "from the least important priority to the most"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: critical, above: 0.9}]}",
       "critical is never shed"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: 'a b', above: 0.9}]}",
       "must be letters, digits"},
      {"{unit: hour, requests_per_unit: 9, shed: [{priority: low, above: 1}]}", "sheds nothing"},
      {"{unit: hour, requests_per_unit: 9, sync: leased, shed: [{priority: low, above: 0.5}]}",
       "shed needs sync: exact"},
      {"{unit: hour, requests_per_unit: 9, sync: batched, shed: [{priority: low, above: 0.5}]}",
       "shed needs sync: exact"},
      {"{unit: hour, requests_per_unit: 9, over_limit_hits: count, "
       "shed: [{priority: low, above: 0.5}]}",
       "no effect with over_limit_hits: count"},
      {"{unit: hour, requests_per_unit: 0, shed: [{priority: low, above: 0.5}]}",
       "'shed' has no meaning there"},
      {"{unlimited: true, shed: [{priority: low, above: 0.5}]}", "takes no 'shed'"},
  };
  for (const Bad& b : bad) {
    const std::string error = LoadError(One(b.rate_limit));
    EXPECT_NE(error.find(b.says), std::string::npos) << b.rate_limit << "\nerror: " << error;
    EXPECT_NE(error.find("c.yaml:4:"), std::string::npos) << b.rate_limit << "\nerror: " << error;
  }
}

TEST_F(ConfigShedTest, AGlobalScopeCannotShed) {
  LoadOptions options;
  options.region.region = "eu";
  const std::string error = LoadError(One("{unit: hour, requests_per_unit: 90, scope: global, "
                                          "regions: {mode: static, shares: {eu: 0.5, us: 0.5}}, "
                                          "shed: [{priority: low, above: 0.5}]}"),
                                      options);
  EXPECT_NE(error.find("shed cannot serve scope: global"), std::string::npos) << error;
}

TEST_F(ConfigShedTest, ADefaultSyncLeavesAShedLimitExact) {
  LoadOptions options;
  options.default_sync.mode = SyncMode::kLeased;
  auto loaded = LoadConfig(dir_.Write("c.yaml", One(std::string(kShed) + "}")), options);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const Limit* l = test::MustMatch(**loaded, "d", {{"k", "v"}}).limit;
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->sync.mode, SyncMode::kExact);
  ASSERT_FALSE((*loaded)->warnings().empty());
  EXPECT_NE((*loaded)->warnings().back().find("shed rule, which stays exact"), std::string::npos);
}

// The priority entry is stripped, so every priority shares one counter -- but only in a domain
// that sheds: elsewhere a rule keyed on "priority" matches as it always did.
TEST_F(ConfigShedTest, ThePriorityEntryIsStrippedOnlyWhereADomainSheds) {
  auto sheds = Load(One(std::string(kShed) + "}"));
  ASSERT_NE(sheds, nullptr);
  const Domain* d = sheds->FindDomain("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->attribute_keys, std::vector<std::string>{"priority"});
  const MatchResult low = test::MustMatch(*sheds, "d", {{"k", "v"}, {"priority", "low"}});
  const MatchResult critical = test::MustMatch(*sheds, "d", {{"priority", "critical"}, {"k", "v"}});
  ASSERT_NE(low.limit, nullptr);
  EXPECT_EQ(low.counter_key, critical.counter_key);
  EXPECT_EQ(low.counter_key, test::MustMatch(*sheds, "d", {{"k", "v"}}).counter_key);
  ASSERT_NE(FindAttribute(low.attributes, "priority"), nullptr);
  EXPECT_EQ(*FindAttribute(low.attributes, "priority"), "low");

  auto plain = Load(
      "domain: d\ndescriptors:\n  - key: priority\n    value: bulk\n"
      "    rate_limit: {unit: hour, requests_per_unit: 5}\n");
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->FindDomain("d")->attribute_keys.empty());
  EXPECT_NE(test::MustMatch(*plain, "d", {{"priority", "bulk"}}).limit, nullptr);
}

TEST_F(ConfigShedTest, ARuleKeyedOnThePriorityKeyOfASheddingDomainIsRefused) {
  const std::string error =
      LoadError("domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + std::string(kShed) +
                "}\n  - key: priority\n    value: bulk\n"
                "    rate_limit: {unit: hour, requests_per_unit: 5}\n");
  EXPECT_NE(error.find("c.yaml:5:"), std::string::npos) << error;
  EXPECT_NE(error.find("could never match"), std::string::npos) << error;
}

TEST_F(ConfigShedTest, APriorityKeyOfItsOwn) {
  auto config = Load(
      "domain: d\npriority_key: x-priority\ndescriptors:\n  - key: k\n"
      "    rate_limit: " +
      std::string(kShed) + "}\n");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->FindDomain("d")->attribute_keys, std::vector<std::string>{"x-priority"});
  const MatchResult m = test::MustMatch(*config, "d", {{"k", "v"}, {"x-priority", "low"}});
  EXPECT_EQ(m.counter_key, test::MustMatch(*config, "d", {{"k", "v"}}).counter_key);
}

}  // namespace
}  // namespace sluice::server
