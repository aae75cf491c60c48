// Matching request descriptors to limits, by envoyproxy/ratelimit's documented rules: walk the
// entries in order; at each level exact key+value beats a '*' pattern beats key-only; the limit
// is the one at the level of the last entry; counters are per actual value.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/descriptor.h"
#include "support/server_test_util.h"

namespace sluice::server {
namespace {

using test::Fixture;
using test::MustLoad;
using test::MustMatch;

class MatchTest : public ::testing::Test {
 protected:
  void Use(const std::string& fixture, std::string domain) {
    config_ = MustLoad(Fixture(fixture));
    ASSERT_NE(config_, nullptr);
    domain_ = std::move(domain);
  }
  MatchResult M(std::initializer_list<test::Entry> entries,
                const LimitOverride* override = nullptr) {
    return MustMatch(*config_, domain_, entries, override);
  }
  // requests_per_unit of the matched limit, or -1 when none matched.
  int64_t Rpu(std::initializer_list<test::Entry> entries) {
    const MatchResult m = M(entries);
    return m.limit == nullptr ? -1 : m.limit->requests_per_unit;
  }

  std::shared_ptr<const Config> config_;
  std::string domain_;
};

TEST_F(MatchTest, Example1ExactValues) {
  Use("readme_example1.yaml", "db_qps");
  EXPECT_EQ(Rpu({{"database", "users"}}), 400);
  EXPECT_EQ(Rpu({{"database", "default"}}), 250);
  EXPECT_EQ(Rpu({{"database", "orders"}}), -1);  // no key-only rule: not limited
  EXPECT_EQ(Rpu({{"table", "users"}}), -1);
  EXPECT_EQ(Rpu({{"Database", "users"}}), -1);  // descriptors are case-sensitive
}

TEST_F(MatchTest, Example2NestedKeyOnlyCountsEachValue) {
  Use("readme_example2.yaml", "sms");
  const MatchResult a = M({{"message_type", "promo"}, {"to_number", "2065550101"}});
  const MatchResult b = M({{"message_type", "promo"}, {"to_number", "2065550102"}});
  ASSERT_NE(a.limit, nullptr);
  ASSERT_NE(b.limit, nullptr);
  EXPECT_EQ(a.limit, b.limit);  // one rule ...
  EXPECT_EQ(a.limit->requests_per_unit, 3);
  EXPECT_EQ(a.limit->period.unit, Unit::kDay);
  EXPECT_NE(a.counter_key, b.counter_key);  // ... a counter per phone number
  EXPECT_EQ(a.counter_key,
            "sms|message_type=promo|to_number#message_type=promo|to_number=2065550101");

  // The top-level to_number rule is a different limit with its own counters.
  const MatchResult any = M({{"to_number", "2065550101"}});
  ASSERT_NE(any.limit, nullptr);
  EXPECT_EQ(any.limit->requests_per_unit, 80);
  EXPECT_EQ(any.counter_key, "sms|to_number#to_number=2065550101");

  // Other message types have no rule; the order of entries matters.
  EXPECT_EQ(Rpu({{"message_type", "receipt"}, {"to_number", "2065550101"}}), -1);
  EXPECT_EQ(Rpu({{"to_number", "2065550101"}, {"message_type", "promo"}}), -1);
  // A prefix of a configured path has no limit of its own.
  EXPECT_EQ(Rpu({{"message_type", "promo"}}), -1);
}

TEST_F(MatchTest, Example3ExactValueBeatsKeyOnlyWhateverTheFileOrder) {
  Use("readme_example3.yaml", "edge_ip");
  EXPECT_EQ(Rpu({{"remote_address", "203.0.113.4"}}), 12);
  const MatchResult blocked = M({{"remote_address", "198.51.100.9"}});
  ASSERT_NE(blocked.limit, nullptr);
  EXPECT_EQ(blocked.limit->kind, LimitKind::kBlocked);
  EXPECT_NE(M({{"remote_address", "203.0.113.4"}}).counter_key,
            M({{"remote_address", "203.0.113.5"}}).counter_key);
}

TEST(MatchDepth, Example4TheRequestMustBeAsDeepAsTheRule) {
  auto flat = MustLoad(Fixture("readme_example4_flat.yaml"));
  auto nested = MustLoad(Fixture("readme_example4_nested.yaml"));
  ASSERT_NE(flat, nullptr);
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(MustMatch(*flat, "depth", {{"k", "v"}, {"sub", "sv"}}).limit, nullptr);
  ASSERT_NE(MustMatch(*flat, "depth", {{"k", "v"}}).limit, nullptr);
  const MatchResult deep = MustMatch(*nested, "depth", {{"k", "v"}, {"sub", "sv"}});
  ASSERT_NE(deep.limit, nullptr);
  EXPECT_EQ(deep.limit->requests_per_unit, 300);
  EXPECT_EQ(MustMatch(*nested, "depth", {{"k", "v"}}).limit, nullptr);
}

TEST_F(MatchTest, Example5Unlimited) {
  Use("readme_example5.yaml", "backoffice");
  const MatchResult dir = M({{"directory", "cn=admin"}});
  ASSERT_NE(dir.limit, nullptr);
  EXPECT_EQ(dir.limit->kind, LimitKind::kUnlimited);
  EXPECT_EQ(Rpu({{"storage", "bucket-1"}}), 90);
}

TEST_F(MatchTest, Example6ShadowForOneUserOnly) {
  Use("readme_example6.yaml", "accounts");
  const MatchResult alice = M({{"service", "auth"}, {"user", "alice"}});
  const MatchResult bob = M({{"service", "auth"}, {"user", "bob"}});
  ASSERT_NE(alice.limit, nullptr);
  ASSERT_NE(bob.limit, nullptr);
  EXPECT_EQ(alice.limit->mode, Mode::kShadow);
  EXPECT_EQ(alice.limit->requests_per_unit, 8);
  EXPECT_EQ(bob.limit->mode, Mode::kEnforce);
  EXPECT_EQ(bob.limit->requests_per_unit, 16);
  EXPECT_EQ(M({{"service", "auth"}, {"user", "eve"}}).limit, nullptr);
}

TEST_F(MatchTest, Example7ReplacesDropsTheNamedLimitOnlyWhenBothMatch) {
  Use("readme_example7.yaml", "reads");
  const MatchResult read = M({{"category", "read"}, {"user", "carol"}});
  const MatchResult report = M({{"endpoint", "report"}, {"user", "carol"}});
  ASSERT_NE(read.limit, nullptr);
  ASSERT_NE(report.limit, nullptr);
  EXPECT_EQ(read.limit->requests_per_unit, 4);
  EXPECT_EQ(report.limit->requests_per_unit, 9);

  // Both in one request: carol_reads is replaced, the 9/s limit alone applies.
  const std::vector<const Limit*> both = {read.limit, report.limit};
  EXPECT_EQ(ReplacedLimits(both), (std::vector<bool>{true, false}));
  // Either alone: nothing is replaced.
  const std::vector<const Limit*> only_read = {read.limit};
  EXPECT_EQ(ReplacedLimits(only_read), (std::vector<bool>{false}));
  // Unmatched descriptors (null) are skipped.
  const std::vector<const Limit*> with_null = {nullptr, report.limit, read.limit};
  EXPECT_EQ(ReplacedLimits(with_null), (std::vector<bool>{false, false, true}));
}

TEST_F(MatchTest, Example8KeyOnlyWithDetailedMetricStillCountsPerValue) {
  Use("readme_example8.yaml", "tenants");
  const MatchResult a = M({{"tenant", "globex"}});
  const MatchResult b = M({{"tenant", "initech"}});
  ASSERT_NE(a.limit, nullptr);
  EXPECT_TRUE(a.limit->detailed_metric);
  EXPECT_EQ(a.limit, b.limit);
  EXPECT_NE(a.counter_key, b.counter_key);
  EXPECT_EQ(Rpu({{"tenant", "acme"}}), 45);
}

TEST_F(MatchTest, Example9Wildcards) {
  Use("readme_example9.yaml", "paths");
  EXPECT_EQ(Rpu({{"route", "/static/logo.png"}}), 500);
  EXPECT_EQ(Rpu({{"route", "/static/"}}), 500);       // '*' may match nothing
  EXPECT_EQ(Rpu({{"route", "/api/v2/orders"}}), 7);   // exact beats both patterns
  EXPECT_EQ(Rpu({{"route", "/api/v1/orders"}}), 30);  // /api/*/orders: more literal than /api/*
  EXPECT_EQ(Rpu({{"route", "/api/v1/users"}}), 100);
  EXPECT_EQ(Rpu({{"route", "/api/v1/orders/7"}}), 100);  // the suffix must end the value
  EXPECT_EQ(Rpu({{"route", "/apiary"}}), 1000);          // no pattern: key-only
  EXPECT_EQ(Rpu({{"route", "/other"}}), 1000);
  // Each value under a pattern has its own counter.
  const MatchResult a = M({{"route", "/static/a.css"}});
  const MatchResult b = M({{"route", "/static/b.css"}});
  EXPECT_EQ(a.limit, b.limit);
  EXPECT_NE(a.counter_key, b.counter_key);
  EXPECT_EQ(a.counter_key, "paths|route=/static/*#route=/static/a.css");
}

TEST_F(MatchTest, PatternPrecedence) {
  Use("wildcards.yaml", "wild");
  EXPECT_EQ(Rpu({{"k", "zzz"}}), 2);    // "*" beats key-only
  EXPECT_EQ(Rpu({{"k", ""}}), 2);       // and matches the empty value
  EXPECT_EQ(Rpu({{"k", "abab"}}), 3);   // "ab*" and "*ab" tie on 2 literal bytes: first wins
  EXPECT_EQ(Rpu({{"k", "xab"}}), 4);    // only "*ab"
  EXPECT_EQ(Rpu({{"k", "abxbc"}}), 5);  // "a*b*c" has 3 literal bytes, beats "ab*"
  EXPECT_EQ(Rpu({{"k", "ac"}}), 2);     // "a*b*c" needs its 'b'
  EXPECT_EQ(Rpu({{"k", "abc"}}), 5);    // each '*' may be empty
}

TEST_F(MatchTest, NoBacktrackingToALessSpecificSibling) {
  Use("no_backtrack.yaml", "walk");
  EXPECT_EQ(Rpu({{"a", "x"}, {"b", "1"}}), 1);
  EXPECT_EQ(Rpu({{"a", "x"}, {"b", "2"}}), -1);  // a=x was taken; it has no b=2
  EXPECT_EQ(Rpu({{"a", "y"}, {"b", "2"}}), 2);
}

TEST_F(MatchTest, CounterKeysAreEscapeSafe) {
  Use("readme_example8.yaml", "tenants");
  // Values that would collide if separators and '%' were not escaped.
  const std::string a = M({{"tenant", "a b"}}).counter_key;
  const std::string b = M({{"tenant", "a%20b"}}).counter_key;
  const std::string c = M({{"tenant", "x#tenant=y"}}).counter_key;
  EXPECT_NE(a, b);
  EXPECT_EQ(a, "tenants|tenant#tenant=a%20b");
  EXPECT_EQ(b, "tenants|tenant#tenant=a%2520b");
  EXPECT_EQ(c, "tenants|tenant#tenant=x%23tenant%3Dy");
}

TEST_F(MatchTest, UnknownDomainIsAnErrorEmptyDescriptorIsNoLimit) {
  Use("readme_example1.yaml", "db_qps");
  const std::vector<DescriptorEntry> d = {{"database", "users"}};
  auto unknown = Match(*config_, "nope", d);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().message, "unknown domain 'nope'");
  auto empty = Match(*config_, "db_qps", {});
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->limit, nullptr);
  EXPECT_TRUE(empty->counter_key.empty());
}

TEST_F(MatchTest, LimitOverrideBypassesTheTree) {
  Use("readme_example1.yaml", "db_qps");
  const LimitOverride o{42, LimitPeriod::Of(Unit::kMinute)};
  // Even a descriptor no rule matches gets the override.
  const MatchResult m = M({{"table", "t1"}}, &o);
  ASSERT_NE(m.limit, nullptr);
  EXPECT_EQ(m.limit->kind, LimitKind::kLimited);
  EXPECT_EQ(m.limit->requests_per_unit, 42);
  EXPECT_EQ(m.limit->spec.limit, 42);
  EXPECT_EQ(m.limit->spec.period, std::chrono::minutes(1));
  EXPECT_EQ(m.limit->mode, Mode::kEnforce);
  EXPECT_EQ(m.counter_key, "db_qps|@override=42/minute#table=t1");
  // The override outlives a copy of the result.
  MatchResult copy = m;
  EXPECT_EQ(copy.limit->requests_per_unit, 42);

  const LimitOverride zero{0, LimitPeriod::Of(Unit::kSecond)};
  EXPECT_EQ(M({{"database", "users"}}, &zero).limit->kind, LimitKind::kBlocked);

  const LimitOverride negative{-1, LimitPeriod::Of(Unit::kSecond)};
  const std::vector<DescriptorEntry> d = {{"database", "users"}};
  EXPECT_FALSE(Match(*config_, "db_qps", d, &negative).has_value());
}

TEST_F(MatchTest, PlansByIdentity) {
  Use("plans_domain.yaml", "saas");
  const MatchResult gold = M({{"tenant", "t-gold-1"}});
  ASSERT_NE(gold.limit, nullptr);
  EXPECT_EQ(gold.plan, "gold");
  EXPECT_EQ(gold.limit->plan, "gold");
  EXPECT_EQ(gold.limit->requests_per_unit, 500);
  EXPECT_EQ(gold.counter_key, "saas|@plan=gold|tenant#tenant=t-gold-1");
  // Same plan, another identity: same rule, its own counter.
  const MatchResult gold2 = M({{"tenant", "t-gold-2"}});
  EXPECT_EQ(gold2.limit, gold.limit);
  EXPECT_NE(gold2.counter_key, gold.counter_key);

  const MatchResult stranger = M({{"tenant", "t-unknown"}});
  ASSERT_NE(stranger.limit, nullptr);
  EXPECT_EQ(stranger.plan, "default");
  EXPECT_EQ(stranger.limit->requests_per_unit, 5);

  const MatchResult plat = M({{"tenant", "t-plat"}});
  ASSERT_NE(plat.limit, nullptr);
  EXPECT_EQ(plat.limit->kind, LimitKind::kUnlimited);

  // A deeper rule inside the plan.
  const MatchResult export_gold = M({{"tenant", "t-gold-1"}, {"op", "export"}});
  ASSERT_NE(export_gold.limit, nullptr);
  EXPECT_EQ(export_gold.plan, "gold");
  EXPECT_EQ(export_gold.limit->requests_per_unit, 50);
  EXPECT_EQ(export_gold.limit->period.unit, Unit::kHour);

  // The plan has no rule for this descriptor: the domain's descriptors decide.
  const MatchResult import_gold = M({{"tenant", "t-gold-1"}, {"op", "import"}});
  ASSERT_NE(import_gold.limit, nullptr);
  EXPECT_EQ(import_gold.plan, "");
  EXPECT_EQ(import_gold.limit->requests_per_unit, 2);
  const MatchResult export_default = M({{"tenant", "t-unknown"}, {"op", "export"}});
  ASSERT_NE(export_default.limit, nullptr);
  EXPECT_EQ(export_default.limit->requests_per_unit, 2);

  // No plan key in the descriptor: plans play no part.
  const MatchResult region = M({{"region", "eu"}});
  ASSERT_NE(region.limit, nullptr);
  EXPECT_EQ(region.plan, "");
  EXPECT_EQ(region.limit->requests_per_unit, 1000);
}

// Attributes (a rule's timezone_from, the domain's priority_key) are stripped before matching
// and keying: with them or without, the same rule and the same counter; the values reach the
// match. Sent without being an attribute key, the same entry is an unknown level: no rule.
TEST_F(MatchTest, AttributesAreStrippedBeforeMatchingAndKeying) {
  Use("readme_example2.yaml", "sms");
  std::map<std::string, Domain, std::less<>> domains = config_->domains();
  domains.at("sms").attribute_keys = {"tz", "priority"};
  const Config stripping(std::move(domains));

  const MatchResult plain =
      MustMatch(stripping, "sms", {{"message_type", "promo"}, {"to_number", "2065550101"}});
  const MatchResult with = MustMatch(stripping, "sms",
                                     {{"tz", "Asia/Tokyo"},
                                      {"message_type", "promo"},
                                      {"priority", "low"},
                                      {"to_number", "2065550101"}});
  ASSERT_NE(plain.limit, nullptr);
  EXPECT_EQ(with.limit, plain.limit);
  EXPECT_EQ(with.counter_key, plain.counter_key);
  EXPECT_TRUE(plain.attributes.empty());
  ASSERT_EQ(with.attributes.size(), 2u);
  ASSERT_NE(FindAttribute(with.attributes, "tz"), nullptr);
  EXPECT_EQ(*FindAttribute(with.attributes, "tz"), "Asia/Tokyo");
  EXPECT_EQ(*FindAttribute(with.attributes, "priority"), "low");
  EXPECT_EQ(FindAttribute(with.attributes, "tenant"), nullptr);

  // Only attributes: nothing left to match.
  const MatchResult only = MustMatch(stripping, "sms", {{"tz", "UTC"}});
  EXPECT_EQ(only.limit, nullptr);
  EXPECT_EQ(*FindAttribute(only.attributes, "tz"), "UTC");

  // The same entries against the domain that strips nothing: "tz" is a level no rule has.
  EXPECT_EQ(MustMatch(*config_, "sms", {{"tz", "Asia/Tokyo"}, {"message_type", "promo"}}).limit,
            nullptr);
}

}  // namespace
}  // namespace sluice::server
