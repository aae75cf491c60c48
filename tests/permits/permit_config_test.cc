// The concurrency block of a descriptor, and the permit text's strict form.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "config/config.h"
#include "service/limiter_set.h"
#include "service/permit_token.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

class ConcurrencyConfig : public ::testing::Test {
 protected:
  Result<std::shared_ptr<const Config>> Load(const std::string& descriptors) {
    return LoadConfig(dir_.Write("api.yaml", "domain: api\ndescriptors:\n" + descriptors));
  }
  std::string Error(const std::string& descriptors) {
    auto c = Load(descriptors);
    EXPECT_FALSE(c.has_value()) << descriptors;
    return c ? "" : c.error().message;
  }
  test::TempConfigDir dir_{"concurrency-config"};
};

TEST_F(ConcurrencyConfig, BesideOrInsteadOfARateLimit) {
  auto c = Load(R"yaml(
  - key: alone
    concurrency: {max_in_flight: 100, permit_ttl: 30s}
  - key: beside
    rate_limit: {unit: second, requests_per_unit: 5, failure_mode: closed}
    concurrency: {max_in_flight: 3, permit_ttl: 2s}
)yaml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  const Domain* d = (*c)->FindDomain("api");
  ASSERT_EQ(d->limits.size(), 2u);
  const Limit& alone = d->limits[0];
  EXPECT_EQ(alone.kind, LimitKind::kUnlimited) << "no rate limit";
  ASSERT_TRUE(alone.concurrency.has_value());
  EXPECT_EQ(alone.concurrency->spec.max_in_flight, 100);
  EXPECT_EQ(alone.concurrency->spec.ttl, std::chrono::seconds(30));
  EXPECT_EQ(alone.concurrency->failure_mode, FailureMode::kOpen);
  const Limit& beside = d->limits[1];
  EXPECT_EQ(beside.kind, LimitKind::kLimited);
  EXPECT_EQ(beside.concurrency->failure_mode, FailureMode::kClosed) << "the rate_limit's";
  // Its permits and its counters never share a store key.
  EXPECT_NE(LimiterSet::PoolStoreId(beside.id), beside.id);
  EXPECT_EQ(LimiterSet::PoolStoreId(beside.id).find('#'), std::string::npos);
}

// shadow_mode applies to a descriptor's concurrency slots, with or without a rate_limit: it
// loads as the limit's mode, without the "no effect" warning it has on a rule with neither.
TEST_F(ConcurrencyConfig, ShadowModeAppliesToTheSlots) {
  auto c = Load(R"yaml(
  - key: alone
    shadow_mode: true
    concurrency: {max_in_flight: 1, permit_ttl: 1s}
  - key: beside
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5}
    concurrency: {max_in_flight: 1, permit_ttl: 1s}
  - key: enforced
    concurrency: {max_in_flight: 1, permit_ttl: 1s}
  - key: neither
    shadow_mode: true
)yaml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  const Domain* d = (*c)->FindDomain("api");
  ASSERT_EQ(d->limits.size(), 3u);
  EXPECT_EQ(d->limits[0].mode, Mode::kShadow);
  EXPECT_EQ(d->limits[1].mode, Mode::kShadow);
  EXPECT_EQ(d->limits[2].mode, Mode::kEnforce);
  ASSERT_EQ((*c)->warnings().size(), 1u);
  EXPECT_NE((*c)->warnings()[0].find(":14:"), std::string::npos) << (*c)->warnings()[0];
  EXPECT_NE((*c)->warnings()[0].find("shadow_mode has no effect"), std::string::npos);
}

TEST_F(ConcurrencyConfig, RefusesSyncAndScopeAndBadNumbers) {
  EXPECT_NE(Error("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, sync: leased}\n")
                .find("always exact"),
            std::string::npos);
  EXPECT_NE(Error("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, "
                  "sync: {mode: batched, interval: 1s}}\n")
                .find("always exact"),
            std::string::npos);
  EXPECT_NE(
      Error("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, scope: global}\n")
          .find("scope: global cannot apply"),
      std::string::npos);
  EXPECT_TRUE(Load("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, sync: exact, "
                   "scope: region}\n")
                  .has_value());
  EXPECT_TRUE(Load("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, "
                   "sync: {mode: exact}}\n")
                  .has_value());
  // Accepted, they would have no effect.
  for (const char* extra : {"lease_ttl: 5s", "interval: 1s", "bogus: 1"}) {
    const std::string error = Error(
        "  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, sync: {mode: exact, " +
        std::string(extra) + "}}\n");
    EXPECT_NE(error.find("unknown field"), std::string::npos) << extra << ": " << error;
    EXPECT_NE(error.find("api.yaml:4:"), std::string::npos) << "with its line: " << error;
  }
  EXPECT_NE(Error("  - key: a\n    concurrency: {permit_ttl: 1s}\n").find("max_in_flight"),
            std::string::npos);
  EXPECT_NE(Error("  - key: a\n    concurrency: {max_in_flight: 0, permit_ttl: 1s}\n")
                .find("between 1 and"),
            std::string::npos);
  EXPECT_NE(Error("  - key: a\n    concurrency: {max_in_flight: 1}\n").find("permit_ttl"),
            std::string::npos);
  EXPECT_NE(Error("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1ms}\n")
                .find("between 100ms and 24h"),
            std::string::npos);
  // Answered as permit_ttl_ms: 151 for a permit the store expires after 150.5 ms.
  EXPECT_NE(Error("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 150500us}\n")
                .find("whole number of milliseconds"),
            std::string::npos);
  EXPECT_TRUE(
      Load("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 150000us}\n").has_value());
  EXPECT_NE(
      Error("  - key: a\n    concurrency: {max_in_flight: 1, permit_ttl: 1s, lease_ttl: 1s}\n")
          .find("lease_ttl"),
      std::string::npos);
}

// `shed` in a concurrency block: the rate_limit's levels and checks, and the domain's priority
// entry stripped as for a shedding rate limit.
TEST_F(ConcurrencyConfig, ShedLevelsAndThePriorityKeyStripped) {
  auto c = Load(
      "  - key: tenant\n    concurrency: {max_in_flight: 10, permit_ttl: 30s, "
      "shed: [{priority: low, above: 0.6}, {priority: normal, above: 0.8}]}\n");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  const Domain* d = (*c)->FindDomain("api");
  ASSERT_TRUE(d->limits[0].concurrency->shed.has_value());
  const ShedRule& shed = *d->limits[0].concurrency->shed;
  ASSERT_EQ(shed.levels.size(), 2u);
  EXPECT_EQ(shed.levels[0].priority, "low");
  EXPECT_EQ(shed.levels[0].above, (ShedFraction{6, 10}));
  EXPECT_EQ(shed.levels[1].priority, "normal");
  EXPECT_EQ(shed.levels[1].above, (ShedFraction{8, 10}));
  EXPECT_EQ(d->attribute_keys, std::vector<std::string>{"priority"});

  auto plain = Load("  - key: tenant\n    concurrency: {max_in_flight: 10, permit_ttl: 30s}\n");
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  EXPECT_TRUE((*plain)->FindDomain("api")->attribute_keys.empty());
}

TEST_F(ConcurrencyConfig, ShedRefusals) {
  const std::string head = "  - key: a\n    concurrency: {max_in_flight: 10, permit_ttl: 1s, ";
  EXPECT_NE(
      Error(head + "sync: leased, shed: [{priority: low, above: 0.5}]}\n").find("always exact"),
      std::string::npos);
  EXPECT_NE(
      Error(head + "sync: batched, shed: [{priority: low, above: 0.5}]}\n").find("always exact"),
      std::string::npos);
  EXPECT_NE(Error(head + "scope: global, shed: [{priority: low, above: 0.5}]}\n")
                .find("scope: global cannot apply"),
            std::string::npos);
  EXPECT_NE(Error(head + "shed: []}\n").find("shed must be a list"), std::string::npos);
  EXPECT_NE(Error(head + "shed: [{priority: low, above: 1}]}\n").find("sheds nothing"),
            std::string::npos);
  EXPECT_NE(
      Error(head + "shed: [{priority: critical, above: 0.5}]}\n").find("critical is never shed"),
      std::string::npos);
  EXPECT_NE(Error(head + "shed: [{priority: normal, above: 0.8}, {priority: low, above: 0.6}]}\n")
                .find("lower threshold"),
            std::string::npos);
  // A rule keyed on the priority key could never match once the domain sheds.
  EXPECT_NE(Error(head + "shed: [{priority: low, above: 0.5}]}\n  - key: priority\n"
                         "    rate_limit: {unit: hour, requests_per_unit: 5}\n")
                .find("could never match"),
            std::string::npos);
}

TEST(PermitToken, RoundTripsAndIsBounded) {
  PermitIds ids;
  auto r1 = ids.Next();
  auto r2 = ids.Next();
  ASSERT_TRUE(r1 && r2);
  EXPECT_NE(*r1, *r2);
  PermitToken t{*r1, {}};
  for (size_t i = 0; i < kMaxPermitSlots; ++i) {
    t.keys.push_back("pool" + std::to_string(i) + "#" + std::string(kMaxPermitKeyBytes - 7, 'k'));
  }
  const std::string text = EncodePermit(t);
  EXPECT_LE(text.size(), kMaxPermitBytes) << "the largest permit fits the bound";
  auto back = DecodePermit(text);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->random, t.random);
  EXPECT_EQ(back->keys, t.keys);
  EXPECT_EQ(back->Id().size(), 32u);
  EXPECT_EQ(PoolIdOf(back->keys[3]), "pool3");

  t.keys.push_back("one#more");
  EXPECT_FALSE(DecodePermit(EncodePermit(t)).has_value()) << "more slots than the bound";
  t.keys = {"no-hash"};
  EXPECT_FALSE(DecodePermit(EncodePermit(t)).has_value());
  // An acquire without a slot answers no permit ("permit": null): one without slots was not
  // written by a server, and is refused (400) rather than answered released: false.
  t.keys = {};
  EXPECT_FALSE(DecodePermit(EncodePermit(t)).has_value()) << "no slots";
  t.keys = {"p#k"};
  const std::string small = EncodePermit(t);
  EXPECT_TRUE(DecodePermit(small).has_value());
  // Each single-character change either fails or decodes to a different permit, never crashes.
  for (size_t i = 0; i < small.size(); ++i) {
    std::string bad = small;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    auto d = DecodePermit(bad);
    if (d) {
      EXPECT_NE(EncodePermit(*d), small);
    }
  }
}

// Every length of a last base64 group (full, two bytes, one byte) decodes back to its permit;
// a character outside base64url, padding, and a last character with non-zero unused bits do not.
TEST(PermitToken, DecodesEveryGroupLengthAndRefusesOtherTexts) {
  PermitToken t{{}, {}};
  for (size_t i = 0; i < t.random.size(); ++i) t.random[i] = static_cast<uint8_t>(17 * i + 3);
  std::set<size_t> remainders;
  for (size_t len = 1; len <= 6; ++len) {
    t.keys = {"p#" + std::string(len, 'k')};
    const std::string text = EncodePermit(t);
    remainders.insert(text.size() % 4);
    auto back = DecodePermit(text);
    ASSERT_TRUE(back.has_value()) << text << ": " << back.error().message;
    EXPECT_EQ(back->random, t.random);
    EXPECT_EQ(back->keys, t.keys);
    for (const char c : {'+', '/', '=', '.', '\0', '\xff'}) {
      std::string bad = text;
      bad[text.size() / 2] = c;
      EXPECT_FALSE(DecodePermit(bad).has_value()) << "character " << static_cast<int>(c);
    }
    EXPECT_FALSE(DecodePermit(text + "=").has_value());
    if (text.size() % 4 != 0) {
      std::string loose = text;
      loose.back() = '_';  // every low bit set: never a canonical last character of a partial group
      EXPECT_FALSE(DecodePermit(loose).has_value()) << loose;
    }
  }
  EXPECT_EQ(remainders, (std::set<size_t>{0, 2, 3}));
}

}  // namespace
}  // namespace sluice::server
