// The verified client names of a relayed connection, looked up from inside a real gRPC call by
// the call's peer() (what the caller-identity check will do), and Cut() ending a client's TLS
// connection: a ConnectionGate, a TlsRelay and a plain grpc::Server wired as GrpcServer wires
// them, with a service that records what each call saw.
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/calls_per_connection.h"
#include "grpc/connection_gate.h"
#include "grpc/tls_relay.h"
#include "grpc/tls_test_util.h"
#include "support/wait_for.h"

namespace sluice::server::test {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using namespace std::chrono_literals;
using sluice::testing::WaitFor;

class PeerRecorder final : public rls::RateLimitService::Service {
 public:
  explicit PeerRecorder(TlsRelay** relay) : relay_(relay) {}
  grpc::Status ShouldRateLimit(grpc::ServerContext* ctx, const rls::RateLimitRequest*,
                               rls::RateLimitResponse*) override {
    const std::lock_guard<std::mutex> lock(mu_);
    peer_ = ctx->peer();
    identity_ = (*relay_)->Identity(peer_);
    return grpc::Status::OK;
  }
  std::pair<std::string, std::optional<PeerIdentity>> last() {
    const std::lock_guard<std::mutex> lock(mu_);
    return {peer_, identity_};
  }

 private:
  TlsRelay** relay_;
  std::mutex mu_;
  std::string peer_;
  std::optional<PeerIdentity> identity_;
};

// Param: the relay's pair to gRPC is a loopback TCP connection (TlsRelayOptions::tcp_pair).
class TlsIdentityTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto gate = ConnectionGate::Listen("127.0.0.1:0", 16);
    ASSERT_TRUE(gate.has_value()) << gate.error().message;
    gate_ = std::move(*gate);
    grpc::ServerBuilder builder;
    builder.RegisterService(&recorder_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_);
    auto relay = TlsRelay::Start(
        {.context = [ctx = ServerContext("ca.pem")] { return ctx; },
         .require_client_cert = true,
         .tcp_pair = GetParam()},
        [server = server_.get()](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
    ASSERT_TRUE(relay.has_value()) << relay.error().message;
    relay_ = std::move(*relay);
    relay_raw_ = relay_.get();
    gate_->Start([relay = relay_.get()](int fd) { relay->Adopt(fd); });
  }
  void TearDown() override {
    if (gate_) gate_->Stop();
    if (relay_) relay_->StopHandover();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 5s);
    if (relay_) relay_->Stop();
  }

  // One call on `channel`; what the service saw.
  std::pair<std::string, std::optional<PeerIdentity>> CallOn(
      const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = rls::RateLimitService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    rls::RateLimitResponse response;
    const grpc::Status status = stub->ShouldRateLimit(&ctx, {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return recorder_.last();
  }

  TlsRelay* relay_raw_ = nullptr;
  PeerRecorder recorder_{&relay_raw_};
  std::unique_ptr<ConnectionGate> gate_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<TlsRelay> relay_;
};

TEST_P(TlsIdentityTest, EachCallFindsItsOwnConnectionsVerifiedNames) {
  const auto envoy = TlsChannel(gate_->port(), "client");
  const auto other = TlsChannel(gate_->port(), "other-client");
  const auto [envoy_peer, envoy_id] = CallOn(envoy);
  const auto [other_peer, other_id] = CallOn(other);
  EXPECT_TRUE(envoy_peer.starts_with("fd:")) << envoy_peer;  // what grpc++ 1.51 names it
  EXPECT_NE(envoy_peer, other_peer);
  ASSERT_TRUE(envoy_id.has_value());
  // The certificate's DNS and URI SANs, in its order (make-test-certs: the URI first).
  EXPECT_EQ(*envoy_id,
            (std::vector<std::string>{"spiffe://cluster.local/ns/edge/sa/envoy", "client.test"}));
  ASSERT_TRUE(other_id.has_value());
  EXPECT_EQ(*other_id, (std::vector<std::string>{"spiffe://cluster.local/ns/other/sa/intruder",
                                                 "other.test"}));
  // Both connections are still open: the first one's names have not been replaced.
  EXPECT_EQ(CallOn(envoy).second, envoy_id);
  EXPECT_FALSE(relay_->Identity("ipv4:127.0.0.1:1234").has_value());
  EXPECT_FALSE(relay_->Identity("fd:100000").has_value());
}

TEST_P(TlsIdentityTest, CutEndsTheClientsConnectionAndItsNamesGo) {
  const auto envoy = TlsChannel(gate_->port(), "client");
  const auto other = TlsChannel(gate_->port(), "other-client");
  const std::string peer = CallOn(envoy).first;
  CallOn(other);
  ASSERT_TRUE(WaitFor([&] { return gate_->open() == 2; }));
  const int fd = ConnectionOfPeer(peer);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(relay_->Cut(fd));
  // The client's TCP connection is closed (the gate counts it gone), the other is untouched.
  EXPECT_TRUE(WaitFor([&] { return gate_->open() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return !relay_->Identity(peer).has_value(); }));
  EXPECT_FALSE(relay_->Cut(fd) && relay_->Identity(peer).has_value());
  EXPECT_TRUE(CallOn(other).second.has_value());
}

INSTANTIATE_TEST_SUITE_P(Pairs, TlsIdentityTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "TcpPair" : "UnixPair";
                         });

}  // namespace
}  // namespace sluice::server::test
