// --tls-client-san patterns: exact DNS (any ASCII case) and URI SANs, and one-label wildcards.
#include "tls/san_match.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::tls {
namespace {

TEST(SanMatch, ExactDnsIgnoresAsciiCase) {
  EXPECT_TRUE(SanMatches("client.test", "client.test"));
  EXPECT_TRUE(SanMatches("Client.TEST", "client.test"));
  EXPECT_FALSE(SanMatches("client.test", "other.test"));
  EXPECT_FALSE(SanMatches("client.test", "client.test.evil"));
}

TEST(SanMatch, UriIsExact) {
  const std::string envoy = "spiffe://cluster.local/ns/edge/sa/envoy";
  EXPECT_TRUE(SanMatches(envoy, envoy));
  EXPECT_FALSE(SanMatches(envoy, "spiffe://cluster.local/ns/edge/sa/Envoy"));
  EXPECT_FALSE(SanMatches(envoy, "spiffe://cluster.local/ns/edge/sa/envoy2"));
  EXPECT_FALSE(SanMatches("*.local", envoy));  // a wildcard is for DNS names only
}

TEST(SanMatch, WildcardIsOneLeftmostLabel) {
  EXPECT_TRUE(SanMatches("*.mesh.test", "a.mesh.test"));
  EXPECT_TRUE(SanMatches("*.mesh.test", "A.MESH.test"));
  EXPECT_FALSE(SanMatches("*.mesh.test", "mesh.test"));
  EXPECT_FALSE(SanMatches("*.mesh.test", ".mesh.test"));
  EXPECT_FALSE(SanMatches("*.mesh.test", "a.b.mesh.test"));
  EXPECT_FALSE(SanMatches("*.mesh.test", "amesh.test"));
  EXPECT_FALSE(SanMatches("*.mesh.test", "*.mesh.test"));
}

TEST(SanMatch, AllowedWhenAnySanMatchesAnyPattern) {
  const std::vector<std::string> patterns = {"*.mesh.test",
                                             "spiffe://cluster.local/ns/edge/sa/envoy"};
  EXPECT_TRUE(SanAllowed(patterns, std::vector<std::string>{"x.test", "b.mesh.test"}));
  EXPECT_TRUE(
      SanAllowed(patterns, std::vector<std::string>{"spiffe://cluster.local/ns/edge/sa/envoy"}));
  EXPECT_FALSE(SanAllowed(patterns, std::vector<std::string>{"x.test"}));
  EXPECT_FALSE(SanAllowed(patterns, std::vector<std::string>{}));
  EXPECT_TRUE(SanAllowed({}, std::vector<std::string>{}));  // no patterns: any verified client
}

TEST(SanMatch, AWildcardPatternNeverMatchesAUri) {
  const std::vector<std::string> patterns = {"*.local/ns/edge/sa/envoy"};
  EXPECT_FALSE(
      SanAllowed(patterns, std::vector<std::string>{"spiffe://cluster.local/ns/edge/sa/envoy"}));
}

TEST(SanMatch, ValidPatternsAreExactNamesOrOneLeadingWildcardLabel) {
  EXPECT_TRUE(ValidateSanPattern("client.test").has_value());
  EXPECT_TRUE(ValidateSanPattern("*.edge.test").has_value());
  EXPECT_TRUE(ValidateSanPattern("spiffe://cluster.local/ns/edge/sa/envoy").has_value());
  EXPECT_FALSE(ValidateSanPattern("").has_value());
  EXPECT_FALSE(ValidateSanPattern("a*.edge.test").has_value());
  EXPECT_FALSE(ValidateSanPattern("*.*.test").has_value());
  EXPECT_FALSE(ValidateSanPattern("*.").has_value());
  EXPECT_FALSE(ValidateSanPattern("*..test").has_value());
  EXPECT_FALSE(ValidateSanPattern("*").has_value());
}

}  // namespace
}  // namespace sluice::tls
