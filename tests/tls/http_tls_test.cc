// HttpServer over TLS with the test certificates: ALPN, versions, plaintext on the TLS port,
// client certificates (missing, other CA, SAN not listed), the handshake deadline, and a reload
// under a keep-alive client.
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "http/http_server.h"
#include "support/test_certs.h"
#include "support/tls_test_client.h"
#include "support/wait_for.h"
#include "tls/server_tls_context.h"

namespace sluice::server {
namespace {

using sluice::testing::TestCerts;
using sluice::testing::TlsClientOptions;
using sluice::testing::TlsTestClient;
using sluice::testing::WaitFor;
using tls::HandshakeFailure;

MonotonicClock& Clock() {
  static MonotonicClock clock;
  return clock;
}

// Handshake failures by reason, as the metric would count them.
class Failures {
 public:
  void Add(HandshakeFailure r) {
    std::lock_guard lock(mu_);
    ++counts_[r];
  }
  int Count(HandshakeFailure r) const {
    std::lock_guard lock(mu_);
    auto it = counts_.find(r);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<HandshakeFailure, int> counts_;
};

class HttpTlsTest : public ::testing::Test {
 protected:
  void Start(tls::TlsServerSettings s, HttpServerOptions::ClientCert policy,
             size_t max_connections = 1024) {
    ASSERT_TRUE(certs_.ok());
    auto ctx = tls::ServerTlsContext::Create(std::move(s), {"http/1.1"}, Clock());
    ASSERT_TRUE(ctx.has_value()) << ctx.error().message;
    tls_ = std::move(*ctx);
    HttpServerOptions o;
    o.address = "127.0.0.1:0";
    o.threads = 1;
    o.max_connections = max_connections;
    o.tls = tls_;
    o.client_cert = policy;
    o.on_tls_failure = [this](HandshakeFailure r) { failures_.Add(r); };
    auto started = HttpServer::Start(o, [this](const HttpRequestView& r) {
      HttpReply reply;
      reply.content_type = "text/plain";
      std::string sans;
      for (const std::string& san : r.peer_sans) sans += san + ",";
      reply.body = std::string(r.target) + (r.tls ? " tls" : " plain") +
                   (r.peer_verified ? " verified " : " anonymous ") + sans;
      ++handled_;
      return reply;
    });
    ASSERT_TRUE(started.has_value()) << started.error().message;
    server_ = std::move(*started);
  }
  tls::TlsServerSettings Settings(bool mtls = false) const {
    tls::TlsServerSettings s;
    s.cert_file = certs_["chain.pem"];
    s.key_file = certs_["server.key"];
    if (mtls) s.client_ca_file = certs_["ca.pem"];
    return s;
  }
  TlsClientOptions Client(const std::string& name = {}) const { return ClientOf(certs_, name); }
  int port() const { return server_->port(); }

  TestCerts certs_;
  std::shared_ptr<tls::ServerTlsContext> tls_;
  std::unique_ptr<HttpServer> server_;
  Failures failures_;
  std::atomic<int> handled_{0};
};

TEST_F(HttpTlsTest, ServesHttp11OverTls) {
  Start(Settings(), HttpServerOptions::ClientCert::kNone);
  TlsTestClient client(port(), Client());
  ASSERT_TRUE(client.handshake_ok());
  EXPECT_EQ(client.alpn(), "http/1.1");
  for (int i = 0; i < 3; ++i) {  // keep-alive
    auto r = client.Request("GET", "/v1/limits");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "/v1/limits tls anonymous ");
  }
  // A client that offers only h2 to an HTTP/1.1 listener is refused, as nginx does.
  TlsClientOptions h2 = Client();
  h2.alpn = "h2";
  TlsTestClient refused(port(), h2);
  EXPECT_FALSE(refused.handshake_ok());
}

TEST_F(HttpTlsTest, RefusesTls10And11) {
  Start(Settings(), HttpServerOptions::ClientCert::kNone);
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    TlsClientOptions o = Client();
    o.max_version = version;
    TlsTestClient client(port(), o);
    EXPECT_FALSE(client.handshake_ok()) << version;
  }
  EXPECT_TRUE(WaitFor([&] { return failures_.Count(HandshakeFailure::kProtocolVersion) == 2; }));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpTlsTest, MinimumVersion13RefusesTls12) {
  tls::TlsServerSettings s = Settings();
  s.min_version = tls::TlsVersion::k1_3;
  Start(s, HttpServerOptions::ClientCert::kNone);
  TlsClientOptions o = Client();
  o.max_version = TLS1_2_VERSION;
  EXPECT_FALSE(TlsTestClient(port(), o).handshake_ok());
  EXPECT_TRUE(TlsTestClient(port(), Client()).handshake_ok());
}

TEST_F(HttpTlsTest, PlaintextClientIsClosedWithoutAReply) {
  Start(Settings(), HttpServerOptions::ClientCert::kNone);
  const int fd = sluice::testing::ConnectLoopback(port());
  ASSERT_GE(fd, 0);
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string received;
  char chunk[512];
  ssize_t n;
  while ((n = ::recv(fd, chunk, sizeof chunk, 0)) > 0) received.append(chunk, size_t(n));
  ::close(fd);
  EXPECT_EQ(n, 0) << "closed, not timed out";
  EXPECT_EQ(received.find("HTTP/"), std::string::npos) << received;
  EXPECT_TRUE(WaitFor([&] { return failures_.Count(HandshakeFailure::kPlaintext) == 1; }));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpTlsTest, StalledHandshakeIsCutAtTheDeadline) {
  tls::TlsServerSettings s = Settings();
  s.handshake_timeout = std::chrono::milliseconds(200);
  Start(s, HttpServerOptions::ClientCert::kNone);
  const int fd = sluice::testing::ConnectLoopback(port());  // connects, says nothing
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return failures_.Count(HandshakeFailure::kTimeout) == 1; }));
  char byte;
  EXPECT_EQ(::recv(fd, &byte, 1, 0), 0);  // closed by the server
  ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }));
}

// At the connection bound a handshake in progress gives its slot first: the stalled handshakes
// of a flood go before a client already in, even one idle between requests.
TEST_F(HttpTlsTest, StalledHandshakesAreShedBeforeClientsIn) {
  Start(Settings(), HttpServerOptions::ClientCert::kNone, /*max_connections=*/2);
  TlsTestClient idle(port(), Client());
  ASSERT_TRUE(idle.Request("GET", "/healthz").has_value());
  const int stalled = sluice::testing::ConnectLoopback(port());  // never says a word
  ASSERT_GE(stalled, 0);
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 2; }));
  TlsTestClient newcomer(port(), Client());
  auto r = newcomer.Request("GET", "/healthz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  char byte;
  EXPECT_EQ(::recv(stalled, &byte, 1, 0), 0);  // the stalled handshake was closed
  ::close(stalled);
  auto again = idle.Request("GET", "/healthz");  // the idle client kept its connection
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, 200);
}

TEST_F(HttpTlsTest, ClientCertificateRequiredExceptForProbes) {
  Start(Settings(/*mtls=*/true), HttpServerOptions::ClientCert::kExceptProbes);
  TlsTestClient anonymous(port(), Client());
  ASSERT_TRUE(anonymous.handshake_ok());
  auto check = anonymous.Request("POST", "/v1/check", "{}");
  ASSERT_TRUE(check.has_value());
  EXPECT_EQ(check->status, 403);
  EXPECT_NE(check->body.find("client certificate is required"), std::string::npos);
  for (const char* probe : {"/healthz", "/readyz", "/metrics"}) {
    auto r = anonymous.Request("GET", probe);
    ASSERT_TRUE(r.has_value()) << probe;
    EXPECT_EQ(r->status, 200) << probe;
  }
  EXPECT_EQ(handled_.load(), 3);  // the refused check never reached the handler

  TlsTestClient envoy(port(), Client("client"));
  ASSERT_TRUE(envoy.handshake_ok());
  auto ok = envoy.Request("POST", "/v1/check", "{}");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(ok->body.find("verified "), std::string::npos) << ok->body;
  EXPECT_NE(ok->body.find("spiffe://cluster.local/ns/edge/sa/envoy"), std::string::npos);
  EXPECT_NE(ok->body.find("client.test"), std::string::npos);
}

TEST_F(HttpTlsTest, ClientCertificateEverywhereCoversProbes) {
  Start(Settings(/*mtls=*/true), HttpServerOptions::ClientCert::kEverywhere);
  TlsTestClient anonymous(port(), Client());
  auto r = anonymous.Request("GET", "/healthz");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 403);
}

TEST_F(HttpTlsTest, ClientOfAnotherCaIsRefusedAtTheHandshake) {
  Start(Settings(/*mtls=*/true), HttpServerOptions::ClientCert::kExceptProbes);
  TlsTestClient foreign(port(), Client("foreign-client"));
  // TLS 1.3: the client may finish before the server has read its certificate; the refusal
  // comes at its first read then.
  EXPECT_FALSE(foreign.Request("GET", "/healthz").has_value());
  EXPECT_TRUE(WaitFor([&] { return failures_.Count(HandshakeFailure::kUnknownCa) == 1; }));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(HttpTlsTest, OnlyListedSansAreLetIn) {
  tls::TlsServerSettings s = Settings(/*mtls=*/true);
  s.client_sans = {"spiffe://cluster.local/ns/edge/sa/envoy"};
  Start(s, HttpServerOptions::ClientCert::kExceptProbes);
  TlsTestClient intruder(port(), Client("other-client"));
  EXPECT_FALSE(intruder.Request("GET", "/healthz").has_value());
  EXPECT_TRUE(WaitFor([&] { return failures_.Count(HandshakeFailure::kSanNotAllowed) == 1; }));
  TlsTestClient envoy(port(), Client("client"));
  auto r = envoy.Request("POST", "/v1/check", "{}");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  // No certificate at all is still let in, to the probes alone.
  TlsTestClient anonymous(port(), Client());
  auto probe = anonymous.Request("GET", "/readyz");
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(probe->status, 200);
}

TEST_F(HttpTlsTest, ReloadUnderAKeepAliveClientFailsNothing) {
  ASSERT_TRUE(certs_.ok());
  const auto cert = certs_.dir() / "live.pem";
  const auto key = certs_.dir() / "live.key";
  const auto over = std::filesystem::copy_options::overwrite_existing;
  std::filesystem::copy_file(certs_["chain.pem"], cert, over);
  std::filesystem::copy_file(certs_["server.key"], key, over);
  tls::TlsServerSettings s = Settings();
  s.cert_file = cert.string();
  s.key_file = key.string();
  Start(s, HttpServerOptions::ClientCert::kNone);

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::thread keep_alive([&] {
    TlsTestClient client(port(), Client());
    while (!stop.load()) {
      auto r = client.Request("GET", "/v1/limits");
      (r && r->status == 200 ? ok : failed)++;
      if (!r) return;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return ok.load() > 10; }));
  std::filesystem::copy_file(certs_["server2.pem"], cert, over);
  std::filesystem::copy_file(certs_["server2.key"], key, over);
  ASSERT_TRUE(tls_->Reload().has_value());
  const int at_reload = ok.load();
  TlsTestClient fresh(port(), Client());
  ASSERT_TRUE(fresh.handshake_ok());
  EXPECT_EQ(fresh.server_fingerprint(), sluice::testing::FileFingerprint(certs_["server2.pem"]));
  // A bad pair (the first certificate with the second key) keeps the second.
  std::filesystem::copy_file(certs_["server.pem"], cert, over);
  EXPECT_FALSE(tls_->Reload().has_value());
  TlsTestClient after_bad(port(), Client());
  ASSERT_TRUE(after_bad.handshake_ok());
  EXPECT_EQ(after_bad.server_fingerprint(),
            sluice::testing::FileFingerprint(certs_["server2.pem"]));
  ASSERT_TRUE(WaitFor([&] { return ok.load() > at_reload + 10; }));
  stop = true;
  keep_alive.join();
  EXPECT_EQ(failed.load(), 0);
}

}  // namespace
}  // namespace sluice::server
