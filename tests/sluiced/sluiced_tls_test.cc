// TLS on sluiced's HTTP listeners, end to end: the real binary with the certificates
// tests/support/make-test-certs makes. mTLS with a SAN list (probes without a certificate,
// /v1/check refused without one, other CA and unlisted SAN refused at the handshake), bad
// startup pairs, rotation by file change and SIGHUP under a keep-alive client, and gRPC health
// over mTLS through grpc++'s own TLS client.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"
#include "support/test_certs.h"
#include "support/tls_test_client.h"
#include "support/wait_for.h"

namespace sluice::testing {
namespace {

using sluice::server::test::TempConfigDir;

constexpr char kConfig[] =
    "domain: tls\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
    "requests_per_unit: 1000000}\n";
constexpr char kCheck[] =
    R"({"domain":"tls","descriptors":[{"entries":[{"key":"user","value":"u"}]}]})";
constexpr char kEnvoy[] = "spiffe://cluster.local/ns/edge/sa/envoy";

class SluicedTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.ok());
    config_ = dir_.Write("tls.yaml", kConfig).string();
  }
  TlsClientOptions Client(const std::string& name = {}) const { return ClientOf(certs_, name); }
  // Copies the pair `name` to live.pem/live.key, which sluiced is given.
  void Install(const std::string& cert, const std::string& key) const {
    const auto over = std::filesystem::copy_options::overwrite_existing;
    std::filesystem::copy_file(certs_[cert], certs_["live.pem"], over);
    std::filesystem::copy_file(certs_[key], certs_["live.key"], over);
  }

  std::string Read(const std::string& name) const {
    std::ifstream in(certs_[name]);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // gRPC health's Check("") on 127.0.0.1:port over TLS trusting the test CA, presenting the
  // certificate `name` (none if empty), on a channel of its own.
  grpc::Status GrpcHealth(int port, const std::string& name,
                          grpc::health::v1::HealthCheckResponse& response) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read("ca.pem");
    if (!name.empty()) {
      ssl.pem_cert_chain = Read(name + ".pem");
      ssl.pem_private_key = Read(name + ".key");
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // An IP target (no resolver: c-ares leaks a few bytes LeakSanitizer reports), the
    // certificate's name checked as the server's.
    args.SetSslTargetNameOverride("localhost");
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                             grpc::SslCredentials(ssl), args);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return grpc::health::v1::Health::NewStub(channel)->Check(&ctx, {}, &response);
  }

  TempConfigDir dir_{"sluiced-tls"};
  TestCerts certs_;
  std::string config_;
};

TEST_F(SluicedTlsTest, MutualTlsWithASanList) {
  auto sluiced =
      StartSluiced(config_, {"--tls-cert", certs_["chain.pem"], "--tls-key", certs_["server.key"],
                             "--tls-client-ca", certs_["ca.pem"], "--tls-client-san", kEnvoy});
  ASSERT_GT(sluiced->port(), 0);
  const int port = sluiced->port();

  TlsTestClient envoy(port, Client("client"));
  ASSERT_TRUE(envoy.handshake_ok());
  EXPECT_EQ(envoy.alpn(), "http/1.1");
  auto ok = envoy.Request("POST", "/v1/check", kCheck);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200) << ok->body;

  TlsTestClient anonymous(port, Client());
  auto refused = anonymous.Request("POST", "/v1/check", kCheck);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 403);
  EXPECT_NE(refused->body.find("client certificate"), std::string::npos);
  for (const char* probe : {"/healthz", "/readyz", "/metrics"}) {
    auto r = anonymous.Request("GET", probe);
    ASSERT_TRUE(r.has_value()) << probe;
    EXPECT_EQ(r->status, 200) << probe;
  }

  EXPECT_FALSE(TlsTestClient(port, Client("other-client")).Request("GET", "/healthz"));
  EXPECT_FALSE(TlsTestClient(port, Client("foreign-client")).Request("GET", "/healthz"));
  TlsClientOptions old = Client("client");
  old.max_version = TLS1_1_VERSION;
  EXPECT_FALSE(TlsTestClient(port, old).handshake_ok());

  auto metrics = envoy.Request("GET", "/metrics");
  ASSERT_TRUE(metrics.has_value());
  for (const char* series :
       {"sluice_tls_handshake_errors_total{listener=\"http\",reason=\"san_not_allowed\"} 1",
        "sluice_tls_handshake_errors_total{listener=\"http\",reason=\"unknown_ca\"} 1",
        "sluice_tls_handshake_errors_total{listener=\"http\",reason=\"protocol_version\"} 1",
        "sluice_tls_certificate_expiry_seconds{listener=\"http\"} "}) {
    EXPECT_NE(metrics->body.find(series), std::string::npos) << series << "\n" << metrics->body;
  }
}

TEST_F(SluicedTlsTest, BadPairsStopTheStart) {
  SluicedProcess expired({"--config", config_, "--http", "127.0.0.1:0", "--grpc", "off",
                          "--tls-cert", certs_["expired.pem"], "--tls-key", certs_["expired.key"]},
                         /*wait_for_http=*/false);
  EXPECT_EQ(expired.WaitExit(), 1);
  EXPECT_NE(expired.Log().find("expired"), std::string::npos) << expired.Log();

  SluicedProcess mismatch({"--config", config_, "--http", "127.0.0.1:0", "--grpc", "off",
                           "--tls-cert", certs_["server.pem"], "--tls-key", certs_["server2.key"]},
                          false);
  EXPECT_EQ(mismatch.WaitExit(), 1);
  EXPECT_NE(mismatch.Log().find("does not match"), std::string::npos) << mismatch.Log();

  SluicedProcess no_key({"--config", config_, "--tls-cert", certs_["server.pem"]}, false);
  EXPECT_EQ(no_key.WaitExit(), 2);
  EXPECT_NE(no_key.Log().find("--tls-cert (SLUICE_TLS_CERT) needs --tls-key"), std::string::npos)
      << no_key.Log();

  // A SAN pattern with a '*' that is not a whole leftmost label (tls::ValidateSanPattern).
  SluicedProcess bad_san(
      {"--config", config_, "--tls-cert", certs_["server.pem"], "--tls-key", certs_["server.key"],
       "--tls-client-ca", certs_["ca.pem"], "--tls-client-san", "a*.edge.test"},
      false);
  EXPECT_EQ(bad_san.WaitExit(), 2);
  EXPECT_NE(bad_san.Log().find("--tls-client-san: client SAN pattern 'a*.edge.test'"),
            std::string::npos)
      << bad_san.Log();
}

TEST_F(SluicedTlsTest, RotationUnderAKeepAliveClientFailsNothing) {
  Install("chain.pem", "server.key");
  auto sluiced =
      StartSluiced(config_, {"--tls-cert", certs_["live.pem"], "--tls-key", certs_["live.key"]});
  ASSERT_GT(sluiced->port(), 0);
  const int port = sluiced->port();
  const std::string first = FileFingerprint(certs_["server.pem"]);
  const std::string second = FileFingerprint(certs_["server2.pem"]);

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::thread keep_alive([&] {
    TlsTestClient client(port, Client());
    while (!stop.load()) {
      auto r = client.Request("POST", "/v1/check", kCheck);
      (r && r->status == 200 ? ok : failed)++;
      if (!r) return;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return ok.load() > 20; }));
  EXPECT_EQ(TlsTestClient(port, Client()).server_fingerprint(), first);

  // The files change: the watcher reloads within its second.
  Install("server2.pem", "server2.key");
  EXPECT_TRUE(
      WaitFor([&] { return TlsTestClient(port, Client()).server_fingerprint() == second; }));

  // A bad pair (the first certificate, the second key): logged, the second pair stays, SIGHUP
  // or not.
  std::filesystem::copy_file(certs_["server.pem"], certs_["live.pem"],
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(sluiced->WaitForLog("tls: reload failed, keeping the running certificate"));
  sluiced->Signal(SIGHUP);
  EXPECT_TRUE(sluiced->WaitForLog("tls: reload failed, keeping the running certificate", 2));
  EXPECT_EQ(TlsTestClient(port, Client()).server_fingerprint(), second);

  // SIGHUP loads a good pair again.
  Install("chain.pem", "server.key");
  sluiced->Signal(SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return TlsTestClient(port, Client()).server_fingerprint() == first; }));

  const int before = ok.load();
  ASSERT_TRUE(WaitFor([&] { return ok.load() > before + 20; }));
  stop = true;
  keep_alive.join();
  EXPECT_EQ(failed.load(), 0);
}

// The forward-auth endpoint has no probe paths: with a client CA every request needs a
// verified certificate.
TEST_F(SluicedTlsTest, ForwardAuthNeedsAClientCertificateEverywhere) {
  const std::string config = dir_.Write("fa.yaml", R"(domain: fa
forward_auth:
  trusted_proxies: [127.0.0.1/32]
  actions:
    - [remote_address]
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 1000}
)")
                                 .string();
  auto sluiced = StartSluiced(
      config, {"--forward-auth", "127.0.0.1:0", "--tls-cert", certs_["chain.pem"], "--tls-key",
               certs_["server.key"], "--tls-client-ca", certs_["ca.pem"]});
  ASSERT_GT(sluiced->port(), 0);
  const int port = sluiced->ForwardAuthPort();
  ASSERT_GT(port, 0);
  TlsTestClient anonymous(port, Client());
  for (const char* path : {"/", "/healthz"}) {
    auto r = anonymous.Request("GET", path);
    ASSERT_TRUE(r.has_value()) << path;
    EXPECT_EQ(r->status, 403) << path;
  }
  TlsTestClient proxy(port, Client("client"));
  auto r = proxy.Request("GET", "/");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(SluicedTlsTest, HttpTlsOffKeepsThatListenerPlain) {
  auto sluiced = StartSluiced(config_, {"--tls-cert", certs_["chain.pem"], "--tls-key",
                                        certs_["server.key"], "--http-tls", "off"});
  ASSERT_GT(sluiced->port(), 0);
  const int fd = ConnectLoopback(sluiced->port());
  ASSERT_GE(fd, 0);
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_GT(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), 0);
  std::string got;
  char chunk[512];
  ssize_t n;
  while ((n = ::recv(fd, chunk, sizeof chunk, 0)) > 0) got.append(chunk, size_t(n));
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
}

TEST_F(SluicedTlsTest, GrpcHealthOverMutualTlsWithASanList) {
  auto sluiced = StartSluiced(config_, {"--grpc", "127.0.0.1:0", "--tls-cert", certs_["chain.pem"],
                                        "--tls-key", certs_["server.key"], "--tls-client-ca",
                                        certs_["ca.pem"], "--tls-client-san", kEnvoy});
  const int port = sluiced->GrpcPort();
  ASSERT_GT(port, 0) << sluiced->Log();

  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status ok = GrpcHealth(port, "client", response);
  ASSERT_TRUE(ok.ok()) << ok.error_code() << " " << ok.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  EXPECT_EQ(GrpcHealth(port, "", response).error_code(), grpc::StatusCode::UNAVAILABLE);
  // --tls-client-san holds on the gRPC listener too, not only on HTTP.
  EXPECT_EQ(GrpcHealth(port, "other-client", response).error_code(), grpc::StatusCode::UNAVAILABLE);

  TlsTestClient probe(sluiced->port(), Client("client"));
  for (const char* series :
       {"sluice_tls_handshake_errors_total{listener=\"grpc\",reason=\"no_certificate\"} ",
        "sluice_tls_handshake_errors_total{listener=\"grpc\",reason=\"san_not_allowed\"} "}) {
    // A count of at least one (grpc++ may retry a failed connection).
    EXPECT_TRUE(WaitFor([&] {
      auto metrics = probe.Request("GET", "/metrics");
      if (!metrics) return false;
      const size_t at = metrics->body.find(series);
      return at != std::string::npos && metrics->body[at + std::string_view(series).size()] != '0';
    })) << series;
  }
}

}  // namespace
}  // namespace sluice::testing
