// The client SAN patterns (san_patterns.h): exact DNS (any ASCII case), exact URI (exact bytes),
// one-label DNS wildcards; patterns that could be read two ways are refused.
#include "grpc/san_patterns.h"

#include <gtest/gtest.h>

namespace sluice::server {
namespace {

const PeerIdentity kEnvoy{.dns = {"client.edge.test"},
                          .uris = {"spiffe://cluster.local/ns/edge/sa/envoy"}};

TEST(SanPatterns, AnExactUriMatchesOnlyThatUri) {
  EXPECT_TRUE(SanAllowed({"spiffe://cluster.local/ns/edge/sa/envoy"}, kEnvoy));
  EXPECT_FALSE(SanAllowed({"spiffe://cluster.local/ns/edge/sa/Envoy"}, kEnvoy));
  EXPECT_FALSE(SanAllowed({"spiffe://cluster.local/ns/edge/sa"}, kEnvoy));
}

TEST(SanPatterns, AnExactDnsNameMatchesInAnyCase) {
  EXPECT_TRUE(SanAllowed({"Client.Edge.TEST"}, kEnvoy));
  EXPECT_FALSE(SanAllowed({"edge.test"}, kEnvoy));
}

TEST(SanPatterns, AWildcardCoversExactlyOneLeftmostLabel) {
  EXPECT_TRUE(SanAllowed({"*.edge.test"}, kEnvoy));
  EXPECT_TRUE(SanAllowed({"*.EDGE.test"}, kEnvoy));
  EXPECT_FALSE(SanAllowed({"*.test"}, PeerIdentity{.dns = {"a.b.test"}}));
  EXPECT_FALSE(SanAllowed({"*.edge.test"}, PeerIdentity{.dns = {"edge.test"}}));
  EXPECT_FALSE(SanAllowed({"*.edge.test"}, PeerIdentity{.dns = {".edge.test"}}));
  // Never a URI: "*." is a DNS form.
  EXPECT_FALSE(SanAllowed({"*.local/ns/edge/sa/envoy"},
                          PeerIdentity{.uris = {"spiffe://cluster.local/ns/edge/sa/envoy"}}));
}

TEST(SanPatterns, NoPatternMatchesNoNames) {
  EXPECT_FALSE(SanAllowed({"*.edge.test", "client.edge.test"}, PeerIdentity{}));
  EXPECT_FALSE(SanAllowed({}, kEnvoy));
}

TEST(SanPatterns, AmbiguousPatternsAreRefused) {
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
}  // namespace sluice::server
