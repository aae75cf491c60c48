// --api-tokens on the gRPC front end: the caller is named by "authorization: Bearer <token>"
// metadata (Envoy's grpc_service.initial_metadata) or, through the TLS layer's hook, a verified
// client certificate's SAN. UNAUTHENTICATED without a known credential, PERMISSION_DENIED for a
// domain its client may not check; a refused call never reaches the service (nothing counted).
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "grpc_test_util.h"
#include "metrics/metrics.h"
#include "service/caller_auth.h"
#include "util/hex.h"

namespace sluice::server::test {
namespace {

constexpr char kBillingToken[] = "sluice_billing-token-for-the-grpc-test-0123456789abc";

std::string HexDigest(std::string_view token) {
  std::string out;
  for (unsigned char b : DigestOfToken(token)) util::AppendHexByte(out, b);
  return out;
}

class GrpcCallersTest : public GrpcServerTest {
 protected:
  void SetUp() override {
    auto table = ParseApiTokens("tokens.yaml",
                                "clients:\n"
                                "  - name: billing-service\n"
                                "    token_sha256: " +
                                    HexDigest(kBillingToken) +
                                    "\n"
                                    "    domains: [billing]\n"
                                    "  - name: edge-envoy\n"
                                    "    san: spiffe://cluster.local/ns/edge/sa/envoy\n"
                                    "    domains: [\"*\"]\n");
    ASSERT_TRUE(table.has_value()) << table.error().message;
    callers_ = std::make_unique<CallerIdentity>(*table, &metrics_);
    auto server = GrpcServer::Start({.address = "127.0.0.1:0",
                                     .threads = 2,
                                     .callers = callers_.get(),
                                     .peer_sans =
                                         [this](std::string_view peer) {
                                           const std::lock_guard<std::mutex> lock(mu_);
                                           peers_.emplace_back(peer);
                                           return sans_;
                                         }},
                                    service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials());
    stub_ = rls::RateLimitService::NewStub(channel_);
    CheckResponse ok;
    ok.statuses.resize(1);
    service_.Answer(ok);
  }

  grpc::Status CallWith(const std::string& domain, const std::string& authorization) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    rls::RateLimitResponse response;
    return stub_->ShouldRateLimit(&ctx, OneDescriptor(domain, "user", "alice"), &response);
  }

  void SetSans(std::vector<std::string> sans) {
    const std::lock_guard<std::mutex> lock(mu_);
    sans_ = std::move(sans);
  }

  Metrics metrics_;
  std::unique_ptr<CallerIdentity> callers_;
  std::mutex mu_;
  std::vector<std::string> sans_;   // what the TLS hook says the peer's certificate holds
  std::vector<std::string> peers_;  // the peers it was asked about
};

TEST_F(GrpcCallersTest, RefusesWithoutAKnownCredentialAndCountsNothing) {
  const grpc::Status missing = CallWith("billing", "");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status basic = CallWith("billing", "Basic YWxhZGRpbjpvcGVuc2VzYW1l");
  EXPECT_EQ(basic.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const std::string wrong = "sluice_not-a-token-of-any-client";
  const grpc::Status unknown = CallWith("billing", "Bearer " + wrong);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unknown.error_message().find(wrong), std::string::npos);
  const grpc::Status other = CallWith("search", std::string("Bearer ") + kBillingToken);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(service_.requests().empty());  // none reached the service

  const grpc::Status allowed = CallWith("billing", std::string("Bearer ") + kBillingToken);
  EXPECT_TRUE(allowed.ok()) << allowed.error_message();
  ASSERT_EQ(service_.requests().size(), 1u);
  EXPECT_EQ(service_.requests()[0].domain, "billing");

  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("sluice_check_auth_failures_total{reason=\"missing\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_check_auth_failures_total{reason=\"unknown\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_check_auth_failures_total{reason=\"domain\"} 1\n"),
            std::string::npos);
}

// The TLS layer's hook is asked with the call's peer, and a listed SAN lets its client in.
TEST_F(GrpcCallersTest, AVerifiedSanFromTheHookLetsItsClientIn) {
  SetSans({"spiffe://cluster.local/ns/other/sa/x"});
  EXPECT_EQ(CallWith("search", "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  SetSans({"spiffe://cluster.local/ns/other/sa/x", "spiffe://cluster.local/ns/edge/sa/envoy"});
  const grpc::Status allowed = CallWith("search", "");
  EXPECT_TRUE(allowed.ok()) << allowed.error_message();
  ASSERT_EQ(service_.requests().size(), 1u);
  const std::lock_guard<std::mutex> lock(mu_);
  ASSERT_FALSE(peers_.empty());
  // "fd:N" for a connection the gate handed over (ServerContext::peer(), as it is).
  EXPECT_FALSE(peers_.back().empty());
}

}  // namespace
}  // namespace sluice::server::test
