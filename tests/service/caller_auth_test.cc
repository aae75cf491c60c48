// --api-tokens: the token file's reader (config/api_tokens.h) and the one decision every front
// end asks (service/caller_auth.h). Digests are computed here from FIPS 180-2's test vector and
// by the code under test only where the test vector pins it first.
#include "service/caller_auth.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/api_tokens.h"
#include "metrics/metrics.h"
#include "util/hex.h"

namespace sluice::server {
namespace {

// SHA-256("abc"), FIPS 180-2 appendix B.1.
constexpr char kAbcSha256[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

std::string Hex(const TokenDigest& d) {
  std::string out;
  for (unsigned char b : d) util::AppendHexByte(out, b);
  return out;
}

// The token "abc" for billing (by its known digest), "def" for everything (by the digest the code
// computes, once the vector above has shown it right), and two SAN clients.
std::string TableText() {
  return "clients:\n"
         "  - name: billing-service\n"
         "    token_sha256: " +
         std::string(kAbcSha256) +
         "\n"
         "    domains: [billing]\n"
         "  - name: ops\n"
         "    token_sha256: " +
         Hex(DigestOfToken("def")) +
         "\n"
         "    domains: [\"*\"]\n"
         "  - name: edge-envoy\n"
         "    san: spiffe://cluster.local/ns/edge/sa/envoy\n"
         "    domains: [api, search]\n"
         "  - name: reporting\n"
         "    san: reports.internal.example\n"
         "    domains: [billing]\n";
}

std::shared_ptr<const ApiTokens> Table() {
  auto table = ParseApiTokens("tokens.yaml", TableText());
  EXPECT_TRUE(table.has_value()) << table.error().message;
  return *table;
}

std::string ErrorOf(const std::string& text) {
  auto table = ParseApiTokens("tokens.yaml", text);
  if (table) return "<loaded>";
  return table.error().message;
}

TEST(DigestOfToken, IsSha256) { EXPECT_EQ(Hex(DigestOfToken("abc")), kAbcSha256); }

TEST(ApiTokens, ReadsClients) {
  const auto table = Table();
  ASSERT_EQ(table->clients().size(), 4u);
  EXPECT_EQ(table->tokens(), 2u);
  EXPECT_EQ(table->sans(), 2u);
  const ApiClient* billing = table->FindToken(DigestOfToken("abc"));
  ASSERT_NE(billing, nullptr);
  EXPECT_EQ(billing->name, "billing-service");
  EXPECT_TRUE(billing->MayCheck("billing"));
  EXPECT_FALSE(billing->MayCheck("search"));
  EXPECT_FALSE(billing->MayCheck("billin"));
  const ApiClient* ops = table->FindToken(DigestOfToken("def"));
  ASSERT_NE(ops, nullptr);
  EXPECT_TRUE(ops->all_domains);
  EXPECT_TRUE(ops->MayCheck("anything"));
  EXPECT_EQ(table->FindToken(DigestOfToken("abd")), nullptr);
  ASSERT_NE(table->FindSan("spiffe://cluster.local/ns/edge/sa/envoy"), nullptr);
  EXPECT_EQ(table->FindSan("spiffe://cluster.local/ns/edge/sa/envoy2"), nullptr);
  EXPECT_EQ(table->FindSan("SPIFFE://cluster.local/ns/edge/sa/envoy"), nullptr);  // exact
}

TEST(ApiTokens, DigestInUpperCaseHex) {
  std::string upper = kAbcSha256;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto table =
      ParseApiTokens("t.yaml", "clients: [{name: a, token_sha256: " + upper + ", domains: [x]}]\n");
  ASSERT_TRUE(table.has_value()) << table.error().message;
  EXPECT_NE((*table)->FindToken(DigestOfToken("abc")), nullptr);
}

TEST(ApiTokens, RefusesWhatIsWrong) {
  const std::string ok_hash = kAbcSha256;
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"clients:\n  - name: a\n    token_sha256: " + ok_hash +
           "\n    domains: [x]\n    role: admin\n",
       "tokens.yaml:5:5: unknown field 'role' in a client"},
      {"clients:\n  - name: a\n    token_sha256: " + ok_hash + "\n    san: x\n    domains: [x]\n",
       "tokens.yaml:2:5: client 'a' needs exactly one of token_sha256 and san (both are given)"},
      {"clients:\n  - name: a\n    domains: [x]\n",
       "client 'a' needs exactly one of token_sha256 and san (neither is given)"},
      {"clients:\n  - name: a\n    token_sha256: " + ok_hash.substr(1) + "\n    domains: [x]\n",
       "tokens.yaml:3:19: client 'a': token_sha256 must be 64 hex digits"},
      {"clients:\n  - name: a\n    token_sha256: " + ok_hash.substr(1) + "g\n    domains: [x]\n",
       "token_sha256 must be 64 hex digits"},
      {"clients:\n  - {name: a, token_sha256: " + ok_hash + ", domains: [x]}\n" +
           "  - {name: a, san: s, domains: [x]}\n",
       "tokens.yaml:3:12: client 'a' is listed twice"},
      {"clients:\n  - {name: a, token_sha256: " + ok_hash + ", domains: [x]}\n" +
           "  - {name: b, token_sha256: " + ok_hash + ", domains: [y]}\n",
       "tokens.yaml:3:5: client 'b' has the same token_sha256 as another client"},
      {"clients:\n  - {name: a, san: s, domains: [x]}\n  - {name: b, san: s, domains: [y]}\n",
       "client 'b' has the same san as another client"},
      {"clients:\n  - {name: a, san: s, domains: []}\n",
       "tokens.yaml:2:32: client 'a': domains is empty"},
      {"clients:\n  - {name: a, san: s, domains: [\"*\", x]}\n",
       "\"*\" (every domain) must be alone"},
      {"clients:\n  - {name: a, san: s, domains: x}\n", "client 'a': domains must be a list"},
      {"clients:\n  - {name: a, san: s}\n", "client 'a' needs domains"},
      {"clients:\n  - {san: s, domains: [x]}\n", "a client needs a name"},
      {"clients: []\n", "clients must be a non-empty list"},
      {"clients:\n  - {name: a, san: s, domains: [x]}\nextra: 1\n", "unknown field 'extra'"},
      {"password: hunter2\n", "no 'clients': not a token file (its content is not shown"},
      {"clients: [\n", "tokens.yaml:2:1: invalid YAML"},
      {"clients:\n  -\n", "item 1 of this list is empty (expected a client)"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf(c.text);
    EXPECT_NE(error.find(c.error), std::string::npos) << c.text << "\n-> " << error;
  }
}

// A token pasted where its digest belongs (a likely mistake) must not reach the log.
TEST(ApiTokens, ErrorsDoNotQuoteATokenOrDigest) {
  const std::string token = "sluice_ThisIsTheSecretTokenPastedByMistake0123456789";
  for (const std::string& value : {token, std::string(kAbcSha256) + "0"}) {
    const std::string error =
        ErrorOf("clients:\n  - name: a\n    token_sha256: " + value + "\n    domains: [x]\n");
    EXPECT_NE(error.find("token_sha256 must be 64 hex digits"), std::string::npos) << error;
    EXPECT_EQ(error.find(value), std::string::npos) << error;
  }
}

TEST(BearerToken, ReadsTheScheme) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER   abc  "), "abc");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken(""), std::nullopt);
  EXPECT_EQ(BearerToken("Basic YWxhZGRpbjpvcGVuc2VzYW1l"), std::nullopt);
  EXPECT_EQ(BearerToken("Bearerabc"), std::nullopt);
}

class AuthorizeTest : public ::testing::Test {
 protected:
  std::expected<std::string_view, AuthFailure> With(std::optional<std::string_view> token,
                                                    std::vector<std::string> sans,
                                                    std::string_view domain) {
    sans_ = std::move(sans);
    const CallerCredentials credentials{token, sans_};
    auto answer = Authorize(*table_, credentials, domain);
    // The front ends' way (Identify, then Authorize for the client it named) answers the same.
    if (auto who = Identify(*table_, credentials)) {
      EXPECT_EQ(Authorize(*table_, credentials, **who, domain), answer);
    } else {
      EXPECT_EQ(std::unexpected(who.error()), answer);
    }
    return answer;
  }

  std::shared_ptr<const ApiTokens> table_ = Table();
  std::vector<std::string> sans_;
};

TEST_F(AuthorizeTest, NoCredentialIsMissing) {
  EXPECT_EQ(With(std::nullopt, {}, "billing"), std::unexpected(AuthFailure::kMissing));
}

TEST_F(AuthorizeTest, TokenNoClientHasIsUnknown) {
  EXPECT_EQ(With("abd", {}, "billing"), std::unexpected(AuthFailure::kUnknown));
  EXPECT_EQ(With("", {}, "billing"), std::unexpected(AuthFailure::kUnknown));
  // A token decides alone: a listed SAN does not rescue a wrong token.
  EXPECT_EQ(With("abd", {"reports.internal.example"}, "billing"),
            std::unexpected(AuthFailure::kUnknown));
}

TEST_F(AuthorizeTest, TokenOfAClientLetsItCheckItsDomainsOnly) {
  EXPECT_EQ(With("abc", {}, "billing"), "billing-service");
  EXPECT_EQ(With("abc", {}, "search"), std::unexpected(AuthFailure::kDomain));
  EXPECT_EQ(With("def", {}, "search"), "ops");
  EXPECT_EQ(With("def", {}, "no-such-domain"), "ops");
}

TEST_F(AuthorizeTest, VerifiedSan) {
  EXPECT_EQ(With(std::nullopt, {"spiffe://cluster.local/ns/edge/sa/envoy"}, "search"),
            "edge-envoy");
  EXPECT_EQ(With(std::nullopt, {"spiffe://cluster.local/ns/edge/sa/envoy"}, "billing"),
            std::unexpected(AuthFailure::kDomain));
  // A certificate no client lists is a credential, but an unknown one.
  EXPECT_EQ(With(std::nullopt, {"other.example"}, "search"),
            std::unexpected(AuthFailure::kUnknown));
  // Several SANs: any listed one whose client may check the domain lets it in.
  const std::vector<std::string> both = {"other.example", "spiffe://cluster.local/ns/edge/sa/envoy",
                                         "reports.internal.example"};
  EXPECT_EQ(With(std::nullopt, both, "search"), "edge-envoy");
  EXPECT_EQ(With(std::nullopt, both, "billing"), "reporting");
  EXPECT_EQ(With(std::nullopt, both, "other"), std::unexpected(AuthFailure::kDomain));
}

TEST(CallerIdentity, ReplacesAndCounts) {
  Metrics metrics;
  CallerIdentity identity(Table(), &metrics);
  const auto before = identity.table();
  auto next = ParseApiTokens("t.yaml", "clients: [{name: x, san: s, domains: [a]}]\n");
  ASSERT_TRUE(next.has_value());
  identity.Replace(*next);
  EXPECT_EQ(identity.table()->clients().size(), 1u);
  EXPECT_EQ(before->clients().size(), 4u);  // a request's snapshot lives on
  identity.CountRefusal(AuthFailure::kDomain);
  identity.CountRefusal(AuthFailure::kDomain);
  identity.CountRefusal(AuthFailure::kMissing);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("sluice_check_auth_failures_total{reason=\"domain\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_check_auth_failures_total{reason=\"missing\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_check_auth_failures_total{reason=\"unknown\"} 0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::server
