// The check rules (service/check_rules.h), against values written here rather than read from
// CheckLimits: each bound at its value and one past it, what makes a request one, the words of
// each caller's errors, and what an unknown domain means for each caller.
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

TEST(CheckRules, AtMost64Descriptors) {
  ExpectAccepted(Request(64));
  const CheckRequest over = Request(65);
  EXPECT_EQ(ErrorFor(over, Caller::kHttpJson), "descriptors: 65 descriptors, over the limit of 64");
  EXPECT_EQ(ErrorFor(over, Caller::kEnvoy), "too many descriptors: 65 (at most 64)");
  EXPECT_EQ(ErrorFor(over, Caller::kDirect), "too many descriptors: 65 (at most 64)");
}

TEST(CheckRules, AtMost16EntriesPerDescriptor) {
  ExpectAccepted(Request(1, Entries(16, {"k", "v"})));
  CheckRequest over = Request(2);
  over.descriptors[1].entries = Entries(17, {"k", "v"});
  EXPECT_EQ(ErrorFor(over, Caller::kHttpJson),
            "descriptors[1].entries: 17 entries, over the limit of 16");
  EXPECT_EQ(ErrorFor(over, Caller::kEnvoy), "descriptor 1: too many entries (at most 16)");
  EXPECT_EQ(ErrorFor(over, Caller::kDirect), "descriptor 1: too many entries (at most 16)");
}

TEST(CheckRules, KeysOfAtMost256Bytes) {
  ExpectAccepted(Request(1, {{std::string(256, 'k'), "v"}}));
  const CheckRequest over = Request(1, {{"a", "v"}, {std::string(257, 'k'), "v"}});
  EXPECT_EQ(ErrorFor(over, Caller::kHttpJson),
            "descriptors[0].entries[1].key: 257 bytes, over the 256-byte limit");
  EXPECT_EQ(ErrorFor(over, Caller::kEnvoy), "descriptor 0: a key is longer than 256 bytes");
  EXPECT_EQ(ErrorFor(over, Caller::kDirect), "descriptor 0: a key is longer than 256 bytes");
}

TEST(CheckRules, ValuesOfAtMost1024Bytes) {
  ExpectAccepted(Request(1, {{"k", std::string(1024, 'v')}}));
  const CheckRequest over = Request(1, {{"k", std::string(1025, 'v')}});
  EXPECT_EQ(ErrorFor(over, Caller::kHttpJson),
            "descriptors[0].entries[0].value: 1025 bytes, over the 1024-byte limit");
  // Envoy's front end hashes a longer value before the rules see it (grpc_translate.h); had
  // one come through, it would be refused in the service's words.
  EXPECT_EQ(ErrorFor(over, Caller::kEnvoy), "descriptor 0: a value is longer than 1024 bytes");
  EXPECT_EQ(ErrorFor(over, Caller::kDirect), "descriptor 0: a value is longer than 1024 bytes");
}

TEST(CheckRules, RequestHitsFrom0To1e9) {
  for (const int64_t hits : {int64_t{0}, int64_t{1}, int64_t{1'000'000'000}}) {
    CheckRequest r = Request();
    r.hits = hits;
    SCOPED_TRACE(hits);
    ExpectAccepted(r);
  }
  for (const int64_t hits :
       {int64_t{-1}, int64_t{1'000'000'001}, std::numeric_limits<int64_t>::max()}) {
    CheckRequest r = Request();
    r.hits = hits;
    SCOPED_TRACE(hits);
    EXPECT_EQ(ErrorFor(r, Caller::kHttpJson), "hits: must be between 0 and 1000000000");
    EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "hits must be 0..1000000000");
    EXPECT_EQ(ErrorFor(r, Caller::kDirect), "hits must be 0..1000000000");
  }
}

TEST(CheckRules, DescriptorHitsFrom0To1e9) {
  for (const int64_t hits : {int64_t{0}, int64_t{1'000'000'000}}) {
    CheckRequest r = Request(2);
    r.descriptors[1].hits = hits;
    SCOPED_TRACE(hits);
    ExpectAccepted(r);
  }
  for (const int64_t hits : {int64_t{-1}, int64_t{1'000'000'001}}) {
    CheckRequest r = Request(2);
    r.descriptors[1].hits = hits;
    SCOPED_TRACE(hits);
    EXPECT_EQ(ErrorFor(r, Caller::kHttpJson),
              "descriptors[1].hits: must be between 0 and 1000000000");
    EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "descriptor 1: hits must be 0..1000000000");
    EXPECT_EQ(ErrorFor(r, Caller::kDirect), "descriptor 1: hits must be 0..1000000000");
  }
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

TEST(CheckRules, AMissingPartIsNamedBeforeABound) {
  CheckRequest r = Request(65);
  r.descriptors[64].entries[0].first.clear();
  EXPECT_EQ(ErrorFor(r, Caller::kEnvoy), "descriptors[64].entries[0].key must not be empty");
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

// A request must be one before its domain matters; the bounds only matter for a known domain.
TEST_F(Domains, TheDomainIsDecidedBetweenTheMissingPartsAndTheBounds) {
  CheckRequest no_key = Request(1, {{"", "v"}});
  auto refused = Admit(no_key, Caller::kEnvoy, "nope");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message, "descriptors[0].entries[0].key must not be empty");

  auto any_size = Admit(Request(65), Caller::kEnvoy, "nope");
  ASSERT_TRUE(any_size.has_value()) << any_size.error().message;
  EXPECT_EQ(*any_size, Admission::kLimitNothing);
  auto typo = Admit(Request(65), Caller::kHttpJson, "nope");
  ASSERT_FALSE(typo.has_value());
  EXPECT_EQ(typo.error().message, "unknown domain 'nope'");
  auto too_many = Admit(Request(65), Caller::kHttpJson, "api");
  ASSERT_FALSE(too_many.has_value());
  EXPECT_EQ(too_many.error().message, "descriptors: 65 descriptors, over the limit of 64");
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
