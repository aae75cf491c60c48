// The gRPC listener over TLS and mTLS (tls_relay.h), seen by real clients: grpc++ with
// grpc::SslCredentials, a blocking OpenSSL client, raw TCP. Every bound of grpc_limits_test.cc
// that a hostile client could test is rerun over TLS: the connection cap (handshakes in
// progress included) and the per-connection call bound. Waits are on conditions.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "grpc/grpc_test_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/raw_http2.h"
#include "grpc/tls_test_util.h"
#include "support/wait_for.h"
#include "tls/handshake_failure.h"

namespace sluice::server::test {
namespace {

using namespace std::chrono_literals;
using sluice::testing::WaitFor;

constexpr char kEnvoySan[] = "spiffe://cluster.local/ns/edge/sa/envoy";

// The reasons of the failed handshakes, as the metric would count them.
class Reasons {
 public:
  std::function<void(tls::HandshakeFailure)> Recorder() {
    return [this](tls::HandshakeFailure r) {
      const std::lock_guard<std::mutex> lock(mu_);
      seen_.emplace_back(tls::HandshakeFailureName(r));
    };
  }
  bool Saw(const std::string& reason) {
    return WaitFor([&] {
      const std::lock_guard<std::mutex> lock(mu_);
      return std::find(seen_.begin(), seen_.end(), reason) != seen_.end();
    });
  }

 private:
  std::mutex mu_;
  std::vector<std::string> seen_;
};

grpc::Status CallOn(const std::shared_ptr<grpc::Channel>& channel,
                    std::chrono::milliseconds timeout = 10s) {
  auto stub = rls::RateLimitService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  rls::RateLimitResponse response;
  return stub->ShouldRateLimit(&ctx, OneDescriptor("api", "k", "v"), &response);
}

class GrpcTlsTest : public ::testing::Test {
 protected:
  // TLS with `tls`'s settings over the defaults; mTLS when it requires client certificates.
  void Start(TlsRelayOptions tls, GrpcServerOptions options = {}) {
    if (!tls.context)
      tls.context = [ctx = ServerContext(tls.require_client_cert ? "ca.pem" : "")] { return ctx; };
    tls.on_handshake_error = reasons_.Recorder();
    options.address = "127.0.0.1:0";
    options.tls = std::move(tls);
    auto server = GrpcServer::Start(options, service_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
  }
  int port() const { return server_->port(); }

  Reasons reasons_;
  FakeService service_;
  std::unique_ptr<GrpcServer> server_;
};

TlsRelayOptions Mtls(std::vector<std::string> sans = {}) {
  return {.require_client_cert = true, .client_sans = std::move(sans)};
}

// --- gRPC's own TLS (GrpcServerOptions::native_tls, for the benchmark's comparison) ----------

TEST(GrpcNativeTlsTest, ServesOverGrpcsOwnTlsAndRefusesPlaintext) {
  const TestCerts& certs = TestCerts::Get();
  FakeService service;
  GrpcServerOptions options{.address = "127.0.0.1:0"};
  options.native_tls =
      GrpcServerOptions::NativeTls{certs.Read("server.pem"), certs.Read("server.key")};
  auto server = GrpcServer::Start(options, service);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  ASSERT_GT((*server)->port(), 0);
  const grpc::Status status = CallOn(TlsChannel((*server)->port()));
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(service.requests().size(), 1u);
  EXPECT_EQ(service.requests()[0].domain, "api");
  // A plaintext client gets no answer: the call fails, and nothing more reaches the service.
  const auto insecure = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                            grpc::InsecureChannelCredentials());
  EXPECT_FALSE(CallOn(insecure, 2s).ok());
  EXPECT_EQ(service.requests().size(), 1u);
}

TEST(GrpcNativeTlsTest, NativeTlsAndTheRelayTogetherAreRefused) {
  FakeService service;
  GrpcServerOptions options{.address = "127.0.0.1:0"};
  options.native_tls = GrpcServerOptions::NativeTls{"cert", "key"};
  options.tls = TlsRelayOptions{.context = [] { return ServerContext(); }};
  const auto server = GrpcServer::Start(options, service);
  ASSERT_FALSE(server.has_value());
  EXPECT_NE(server.error().message.find("native_tls"), std::string::npos);
}

// --- served over TLS ---------------------------------------------------------------------------

TEST_F(GrpcTlsTest, ShouldRateLimitAndHealthAreServedOverTls) {
  Start({});
  const auto channel = TlsChannel(port());
  const grpc::Status status = CallOn(channel);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(service_.requests().size(), 1u);
  EXPECT_EQ(service_.requests()[0].domain, "api");

  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&ctx, {}, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(GrpcTlsTest, ManyCallsAndLargeMessagesCrossTheRelayIntact) {
  // More bytes than the relay's buffers hold, both ways, on one connection.
  Start({.buffer_bytes = 4096});
  const auto channel = TlsChannel(port());
  auto stub = rls::RateLimitService::NewStub(channel);
  rls::RateLimitRequest big = OneDescriptor("api", "k", std::string(60'000, 'x'));
  for (int i = 0; i < 50; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    rls::RateLimitResponse response;
    ASSERT_TRUE(stub->ShouldRateLimit(&ctx, big, &response).ok());
  }
  const std::vector<CheckRequest> seen = service_.requests();
  ASSERT_EQ(seen.size(), 50u);
  EXPECT_EQ(seen.back().descriptors.at(0).entries.at(0).second, std::string(60'000, 'x'));
}

TEST_F(GrpcTlsTest, AClientCertificateWithAListedSanIsLetIn) {
  Start(Mtls({kEnvoySan}));
  const grpc::Status status = CallOn(TlsChannel(port(), "client"));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcTlsTest, AWildcardPatternLetsInADnsSanOneLabelBelow) {
  Start(Mtls({"*.test"}));  // client.pem has DNS client.test
  EXPECT_TRUE(CallOn(TlsChannel(port(), "client")).ok());
}

// --- refused -----------------------------------------------------------------------------------

TEST_F(GrpcTlsTest, APlaintextClientIsClosedWithoutAReply) {
  Start({});
  RawHttp2 plain(port());
  ASSERT_TRUE(plain.connected());
  plain.Send(kClientPreface + Settings({}));
  const std::vector<Frame> frames = plain.ReadToClose(10s);
  EXPECT_TRUE(plain.closed());
  EXPECT_TRUE(frames.empty());
  EXPECT_TRUE(reasons_.Saw("plaintext"));
  // And a gRPC client without TLS fails.
  const auto insecure = grpc::CreateChannel("127.0.0.1:" + std::to_string(port()),
                                            grpc::InsecureChannelCredentials());
  EXPECT_EQ(CallOn(insecure).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(service_.requests().empty());
}

TEST_F(GrpcTlsTest, Tls11IsRefused) {
  Start({});
  TlsClient old(port(), {.max_version = TLS1_1_VERSION});
  EXPECT_FALSE(old.connected());
  EXPECT_TRUE(reasons_.Saw("protocol_version"));  // the server refused it, not the client itself
  EXPECT_TRUE(TlsClient(port(), {.max_version = TLS1_2_VERSION}).connected());
}

TEST_F(GrpcTlsTest, ATls13MinimumRefusesTls12) {
  Start({.min_version = 13});
  EXPECT_FALSE(TlsClient(port(), {.max_version = TLS1_2_VERSION}).connected());
  EXPECT_TRUE(reasons_.Saw("protocol_version"));
  EXPECT_TRUE(CallOn(TlsChannel(port())).ok());
}

TEST_F(GrpcTlsTest, AContextsHigherMinimumIsNotLowered) {
  std::shared_ptr<ssl_ctx_st> ctx = ServerContext();
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  Start({.context = [ctx] { return ctx; }, .min_version = 12});
  EXPECT_FALSE(TlsClient(port(), {.max_version = TLS1_2_VERSION}).connected());
  EXPECT_TRUE(reasons_.Saw("protocol_version"));
}

TEST_F(GrpcTlsTest, WithClientCertificatesRequiredNoCertificateIsRefused) {
  Start(Mtls());
  EXPECT_EQ(CallOn(TlsChannel(port())).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(reasons_.Saw("no_certificate"));
  EXPECT_TRUE(CallOn(TlsChannel(port(), "client")).ok());
  EXPECT_EQ(service_.requests().size(), 1u);
}

TEST_F(GrpcTlsTest, AClientCertificateFromAnotherCaIsRefused) {
  Start(Mtls());
  EXPECT_EQ(CallOn(TlsChannel(port(), "foreign-client")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(reasons_.Saw("unknown_ca"));
  EXPECT_TRUE(service_.requests().empty());
}

TEST_F(GrpcTlsTest, AnUnlistedSanIsRefusedAtTheHandshake) {
  Start(Mtls({kEnvoySan}));
  EXPECT_EQ(CallOn(TlsChannel(port(), "other-client")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(reasons_.Saw("san_not_allowed"));
  EXPECT_TRUE(service_.requests().empty());
}

TEST_F(GrpcTlsTest, AClientWithoutAlpnH2IsRefused) {
  Start({});
  TlsClient client(port(), {.alpn_h2 = false});
  if (client.connected()) {
    EXPECT_TRUE(client.ReadToEnd());
  }
  EXPECT_TRUE(reasons_.Saw("other") /* no h2 */);
}

// --- bounds ------------------------------------------------------------------------------------

TEST_F(GrpcTlsTest, AStalledHandshakeIsCutAtItsDeadline) {
  Start({.handshake_timeout = 300ms});
  const int silent = ConnectTcp(port());  // says nothing
  const int partial = ConnectTcp(port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(partial, 0);
  ASSERT_EQ(send(partial, "\x16\x03\x01", 3, MSG_NOSIGNAL), 3);  // a record header, then nothing
  const auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(ClosedBy(silent, 20s));
  EXPECT_TRUE(ClosedBy(partial, 20s));
  EXPECT_GE(std::chrono::steady_clock::now() - began, 250ms);  // not before its deadline
  EXPECT_TRUE(reasons_.Saw("timeout"));
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  close(silent);
  close(partial);
}

TEST_F(GrpcTlsTest, HandshakesInProgressCountTowardTheConnectionCap) {
  Start({}, {.max_connections = 2});
  const int a = ConnectTcp(port());
  const int b = ConnectTcp(port());
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 2; }));
  // A third connection, handshake and all, is refused while the two stall.
  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(CallOn(TlsChannel(port()), 20s).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
  close(a);  // a place is free once the relay sees it go
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 1; }));
  EXPECT_TRUE(CallOn(TlsChannel(port())).ok());
  close(b);
}

TEST_F(GrpcTlsTest, TheConnectionCapHoldsForEstablishedTlsConnections) {
  Start({}, {.max_connections = 2});
  TlsClient first(port(), {});
  TlsClient second(port(), {});
  ASSERT_TRUE(first.connected() && second.connected());
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 2; }));
  TlsClient third(port(), {});
  EXPECT_FALSE(third.connected());
  SSL_shutdown(first.ssl());  // close_notify: the relay passes it on and gRPC ends the connection
  EXPECT_TRUE(first.ReadToEnd());
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 1; }));
  EXPECT_TRUE(CallOn(TlsChannel(port())).ok());
}

TEST_F(GrpcTlsTest, AnIdleConnectionIsClosedOverTlsToo) {
  // gRPC closes its end of the pair at the idle timeout; the client sees the close (GOAWAY, then
  // close_notify and a FIN), and the gate counts the connection gone.
  Start({.handshake_timeout = 60s}, {.idle_timeout = 300ms});
  TlsClient idle(port(), {});
  ASSERT_TRUE(idle.connected());
  idle.Send(kClientPreface + Settings({}));
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 1; }));
  EXPECT_TRUE(idle.ReadToEnd());
  EXPECT_EQ(SSL_get_shutdown(idle.ssl()) & SSL_RECEIVED_SHUTDOWN, SSL_RECEIVED_SHUTDOWN);
  // The relay reads what the client still sends until its FIN (or the drain deadline, here
  // longer than WaitFor's): the FIN ends it.
  shutdown(idle.fd(), SHUT_WR);
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
}

TEST_F(GrpcTlsTest, AClientIgnoringTheStreamCapIsCutOverTls) {
  // As AClientIgnoringTheStreamCapIsCut (grpc_limits_test.cc), inside TLS: the cut must end the
  // client's TLS connection, not only gRPC's end of the pair.
  Start({}, {.max_concurrent_streams = 4});
  TlsClient attacker(port(), {});
  ASSERT_TRUE(attacker.connected());
  std::string burst = kClientPreface + Settings({{4, 0}});  // INITIAL_WINDOW_SIZE = 0
  const rls::RateLimitRequest request = OneDescriptor("api", "k", "v");
  for (uint32_t i = 0; i < 200; ++i) burst += CallFrames(2 * i + 1, request.SerializeAsString());
  attacker.Send(burst);
  EXPECT_TRUE(attacker.ReadToEnd());
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  EXPECT_TRUE(CallOn(TlsChannel(port())).ok());
}

TEST_F(GrpcTlsTest, GarbageBeforeOrAfterTheHandshakeEndsOnlyThatConnection) {
  Start({});
  std::string noise(4096, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919 + 13) & 0xff);
  // A whole record (type handshake, TLS 1.0, 16 bytes) holding no handshake message.
  const std::string record = std::string("\x16\x03\x01\x00\x10", 5) + noise.substr(0, 16);
  const int raw = ConnectTcp(port());
  ASSERT_EQ(send(raw, record.data(), record.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(record.size()));
  EXPECT_TRUE(ClosedBy(raw, 20s));
  EXPECT_TRUE(reasons_.Saw("other"));
  close(raw);
  {
    TlsClient inside(port(), {});
    ASSERT_TRUE(inside.connected());
    inside.Send(noise);  // not HTTP/2: gRPC closes, and the relay with it
    EXPECT_TRUE(inside.ReadToEnd());
  }
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  EXPECT_TRUE(CallOn(TlsChannel(port())).ok());
}

TEST_F(GrpcTlsTest, AClientResetMidCallEndsItsConnectionOnly) {
  Start({});
  {
    TlsClient client(port(), {});
    ASSERT_TRUE(client.connected());
    const rls::RateLimitRequest request = OneDescriptor("api", "k", "v");
    client.Send(kClientPreface + Settings({}) + CallFrames(1, request.SerializeAsString()));
    ASSERT_TRUE(WaitFor([&] { return service_.requests().size() == 1; }));
    const linger reset{.l_onoff = 1, .l_linger = 0};  // close() sends RST
    setsockopt(client.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  }
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
  EXPECT_TRUE(CallOn(TlsChannel(port())).ok());
}

// --- settings ----------------------------------------------------------------------------------

TEST_F(GrpcTlsTest, SettingsThatCannotBeHonouredAreRefused) {
  const auto start = [&](TlsRelayOptions tls) {
    tls.context = [] { return std::shared_ptr<ssl_ctx_st>(); };
    GrpcServerOptions options{.address = "127.0.0.1:0", .tls = std::move(tls)};
    auto server = GrpcServer::Start(options, service_);
    return server ? std::string() : server.error().message;
  };
  EXPECT_NE(start({.min_version = 11}).find("1.2 or 1.3"), std::string::npos);
  EXPECT_NE(start({.client_sans = {kEnvoySan}}).find("need client certificates"),
            std::string::npos);
  EXPECT_NE(start(Mtls({"a*.test"})).find("'*'"), std::string::npos);
  EXPECT_NE(start({.handshake_timeout = 0ms}).find("timeout"), std::string::npos);
  EXPECT_EQ(start({}), "");
}

}  // namespace
}  // namespace sluice::server::test
