// The check rules (service/check_rules.h), against values written here rather than read from
// CheckLimits: each bound at its value and one past it (what is checked, never a refusal), what
// makes a request one, the words of each caller's errors, and what an unknown domain means for
// each caller.
#include "service/check_rules.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::server {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

CheckRequest Request(size_t descriptors = 1, const Entries& entries = {{"k", "v"}}) {
  CheckRequest r;
  r.domain = "api";
  for (size_t i = 0; i < descriptors; ++i) r.descriptors.push_back({entries, {}, {}});
  return r;
}

// ValidateCheck's message for `r` sent by `caller`; "" when the request meets the rules.
std::string ErrorFor(CheckRequest r, Caller caller) {
  r.caller = caller;
  auto valid = ValidateCheck(r);
  return valid ? "" : valid.error().message;
}

// The same message for every caller.
void ExpectAccepted(const CheckRequest& r) {
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "");
}

// Past every bound a request is still accepted, for every caller: the bounds decide what is
// checked (UncheckedReason), never whether the call is answered.
TEST(CheckRules, NoBoundRefusesARequest) {
  ExpectAccepted(Request(1025));
  ExpectAccepted(Request(1, Entries(65, {"k", "v"})));
  ExpectAccepted(Request(1, {{std::string(4097, 'k'), "v"}}));
  ExpectAccepted(Request(1, {{"k", std::string(100'000, 'v')}}));
  for (const int64_t hits : {int64_t{0}, int64_t{2'000'000'000}, int64_t{4'294'967'295},
                             (int64_t{1} << 53) - 1, std::numeric_limits<int64_t>::max()}) {
    SCOPED_TRACE(hits);
    CheckRequest r = Request(2);
    r.hits = hits;
    r.descriptors[1].hits = hits;
    ExpectAccepted(r);
  }
}

// Only a negative count is refused: the JSON API can send one, Envoy's unsigned fields cannot.
TEST(CheckRules, HitsMustNotBeNegative) {
  CheckRequest r = Request(2);
  r.hits = -1;
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "hits: must not be negative");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "hits must not be negative");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "hits must not be negative");
  r.hits = 1;
  r.descriptors[1].hits = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "descriptors[1].hits: must not be negative");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "descriptor 1: hits must not be negative");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "descriptor 1: hits must not be negative");
}

// The bounds, written here rather than read from kCheckLimits: 1024 descriptors, 64 entries,
// 4096-byte keys; each at its value and one past it.
TEST(CheckRules, DescriptorsPastThe1024thAreUnchecked) {
  const CheckRequest r = Request(1030);
  for (size_t i : {size_t{0}, size_t{1023}}) EXPECT_EQ(UncheckedReason(r, i), Unchecked::kNo);
  for (size_t i : {size_t{1024}, size_t{1029}}) {
    EXPECT_EQ(UncheckedReason(r, i), Unchecked::kPastMaxDescriptors);
  }
  EXPECT_EQ(UncheckedName(Unchecked::kPastMaxDescriptors), "descriptors");
}

TEST(CheckRules, ADescriptorOfMoreThan64EntriesIsUnchecked) {
  CheckRequest r = Request(2, Entries(64, {"k", "v"}));
  r.descriptors[1].entries.emplace_back("k", "v");
  EXPECT_EQ(UncheckedReason(r, 0), Unchecked::kNo);
  EXPECT_EQ(UncheckedReason(r, 1), Unchecked::kTooManyEntries);
  EXPECT_EQ(UncheckedName(Unchecked::kTooManyEntries), "entries");
}

TEST(CheckRules, ADescriptorWithAKeyOver4096BytesIsUnchecked) {
  CheckRequest r = Request(2, {{"a", "v"}, {std::string(4096, 'k'), "v"}});
  r.descriptors[1].entries[1].first += 'k';
  EXPECT_EQ(UncheckedReason(r, 0), Unchecked::kNo);
  EXPECT_EQ(UncheckedReason(r, 1), Unchecked::kKeyTooLong);
  EXPECT_EQ(UncheckedName(Unchecked::kKeyTooLong), "key");
  // A long value does not: it is counted by its digest.
  EXPECT_EQ(UncheckedReason(Request(1, {{"k", std::string(100'000, 'v')}}), 0), Unchecked::kNo);
}

// Digests from sha256sum, not from the code under test.
TEST(CheckRules, AValueOver1024BytesIsCountedByItsSha256) {
  std::string digest;
  const std::string at_bound(1024, 'v');
  EXPECT_EQ(CountedValue(at_bound, digest), at_bound);
  const std::string over(1025, 'v');
  EXPECT_EQ(CountedValue(over, digest),
            "sha256:3d4b46294b5d561c5999a0f1567d75ad4be018d867a75d9949b4ea1b589889da");
}

TEST(CheckRules, ACounterKeyOver65535BytesIsCountedByTheSha256OfItsIdentity) {
  const std::string id = "api|path";
  const std::string at_bound = id + "#" + std::string(65535 - id.size() - 1, 'x');
  EXPECT_EQ(BoundedCounterKey(at_bound), at_bound);
  EXPECT_EQ(BoundedCounterKey(id + "#" + std::string(65600, 'x')),
            id + "#sha256:5587e4ddbf0bfffaa54c72d5837280fa8104a983ba1db290f3fa9a6c331b8317");
}

TEST(CheckRules, ADomainIsRequired) {
  CheckRequest r = Request();
  r.domain.clear();
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "domain: must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "domain must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "domain is required");
}

TEST(CheckRules, AtLeastOneDescriptor) {
  const CheckRequest r = Request(0);
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "descriptors: must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "at least one descriptor is required");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "at least one descriptor is required");
}

TEST(CheckRules, AtLeastOneEntryPerDescriptor) {
  CheckRequest r = Request(2);
  r.descriptors[1].entries.clear();
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "descriptors[1].entries: must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "descriptors[1]: a descriptor needs at least one entry");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "descriptor 1: entries must not be empty");
}

TEST(CheckRules, KeysAreNotEmpty) {
  const CheckRequest r = Request(1, {{"k", "v"}, {"", "v"}});
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "descriptors[0].entries[1].key: must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "descriptors[0].entries[1].key must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "descriptor 0: an entry has an empty key");
}

TEST(CheckRules, AnEmptyValueIsRefusedOverHttpOnly) {
  EXPECT_FALSE(EmptyValuesAllowed(Caller::kHttpJson));
  EXPECT_TRUE(EmptyValuesAllowed(Caller::kEnvoy));
  EXPECT_TRUE(EmptyValuesAllowed(Caller::kDirect));
  const CheckRequest r = Request(1, {{"k", "v"}, {"k2", ""}});
  EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "descriptors[0].entries[1].value: must not be empty");
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "");
  EXPECT_EQ(ErrorFor(r, Caller::kDirect), "");
}

// Past the checked descriptors too: a malformed request is malformed wherever the fault is.
TEST(CheckRules, AMissingPartIsNamedPastTheBounds) {
  CheckRequest r = Request(1030);
  r.descriptors[1029].entries[0].first.clear();
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "descriptors[1029].entries[0].key must not be empty");
}

class Domains : public ::testing::Test {
 protected:
  Domains() {
    std::map<std::string, Domain, std::less<>> domains;
    domains["api"].name = "api";
    config_ = std::make_shared<Config>(std::move(domains));
  }
  Result<Admission> Admit(CheckRequest r, Caller caller, const std::string& domain) {
    r.caller = caller;
    r.domain = domain;
    return AdmitCheck(r, *config_);
  }
  std::shared_ptr<const Config> config_;
};

TEST_F(Domains, WhatAnUnknownDomainMeansPerCaller) {
  EXPECT_EQ(UnknownDomainFor(Caller::kHttpJson), UnknownDomain::kError);
  EXPECT_EQ(UnknownDomainFor(Caller::kDirect), UnknownDomain::kError);
  EXPECT_EQ(UnknownDomainFor(Caller::kEnvoy), UnknownDomain::kLimitNothing);
  for (const Caller caller : {Caller::kHttpJson, Caller::kEnvoy, Caller::kDirect}) {
    auto known = Admit(Request(), caller, "api");
    ASSERT_TRUE(known.has_value()) << known.error().message;
    EXPECT_EQ(*known, Admission::kCheck);
  }
  for (const Caller caller : {Caller::kHttpJson, Caller::kDirect}) {
    auto unknown = Admit(Request(), caller, "nope");
    ASSERT_FALSE(unknown.has_value());
    EXPECT_EQ(unknown.error().message, "unknown domain 'nope'");
  }
  auto envoy = Admit(Request(), Caller::kEnvoy, "nope");
  ASSERT_TRUE(envoy.has_value()) << envoy.error().message;
  EXPECT_EQ(*envoy, Admission::kLimitNothing);
}

// A request must be one before its domain matters; its size never does.
TEST_F(Domains, TheDomainIsDecidedAfterTheMissingParts) {
  CheckRequest no_key = Request(1, {{"", "v"}});
  auto refused = Admit(no_key, Caller::kEnvoy, "nope");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message, "descriptors[0].entries[0].key must not be empty");

  auto any_size = Admit(Request(1030), Caller::kEnvoy, "nope");
  ASSERT_TRUE(any_size.has_value()) << any_size.error().message;
  EXPECT_EQ(*any_size, Admission::kLimitNothing);
  auto typo = Admit(Request(1030), Caller::kHttpJson, "nope");
  ASSERT_FALSE(typo.has_value());
  EXPECT_EQ(typo.error().message, "unknown domain 'nope'");
  auto many = Admit(Request(1030), Caller::kHttpJson, "api");
  ASSERT_TRUE(many.has_value()) << many.error().message;
  EXPECT_EQ(*many, Admission::kCheck);
}

TEST(CheckRules, LimitNothingIsOkWithoutLimits) {
  const CheckResponse r = LimitNothing(Request(3));
  EXPECT_EQ(r.overall, Code::kOk);
  ASSERT_EQ(r.statuses.size(), 3u);
  for (const DescriptorStatus& s : r.statuses) {
    EXPECT_EQ(s.code, Code::kOk);
    EXPECT_EQ(s.limit, nullptr);
    EXPECT_EQ(s.remaining, 0);
    EXPECT_FALSE(s.over_limit);
  }
}

}  // namespace
}  // namespace sluice::server
