// For the gRPC TLS tests: the certificates of tests/support/make-test-certs (made once per test
// program), a server SSL_CTX built from them with OpenSSL (what src/tls's reloading provider
// will give in sluiced), gRPC channels with grpc::SslCredentials, and a blocking OpenSSL client
// that can do what gRPC's will not (an old version, raw HTTP/2 frames, a close_notify).
#ifndef SLUICE_TESTS_GRPC_TLS_TEST_UTIL_H_
#define SLUICE_TESTS_GRPC_TLS_TEST_UTIL_H_

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "grpc/tls_relay.h"

namespace sluice::server::test {

// The certificates, made once per test program into a directory removed at exit.
class TestCerts {
 public:
  static const TestCerts& Get() {
    static const TestCerts certs;  // made once, read-only afterwards
    return certs;
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Read(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  ~TestCerts() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  TestCerts()
      : dir_(std::filesystem::path(::testing::TempDir()) /
             ("grpc-tls-certs-" + std::to_string(getpid()))) {
    // As sluiced does: a test client writing to a connection the server refused gets EPIPE.
    signal(SIGPIPE, SIG_IGN);
    const std::string command =
        std::string(SLUICE_MAKE_TEST_CERTS) + " " + dir_.string() + " >/dev/null 2>&1";
    if (std::system(command.c_str()) != 0) ADD_FAILURE() << "make-test-certs failed";
  }
  std::filesystem::path dir_;
};

// A server context with server.pem; with `client_ca` (a file name in the certificate directory)
// it trusts that CA for client certificates. ALPN h2.
inline std::shared_ptr<ssl_ctx_st> ServerContext(const std::string& client_ca = "") {
  const TestCerts& certs = TestCerts::Get();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx.get(), certs.Path("server.pem").c_str()), 1);
  EXPECT_EQ(
      SSL_CTX_use_PrivateKey_file(ctx.get(), certs.Path("server.key").c_str(), SSL_FILETYPE_PEM),
      1);
  if (!client_ca.empty()) {
    EXPECT_EQ(SSL_CTX_load_verify_locations(ctx.get(), certs.Path(client_ca).c_str(), nullptr), 1);
    SSL_CTX_set_client_CA_list(ctx.get(), SSL_load_client_CA_file(certs.Path(client_ca).c_str()));
  }
  UseAlpnH2(ctx.get());
  return ctx;
}

// A channel of its own to 127.0.0.1:port over TLS, trusting the test CA; with `client` ("client",
// "other-client", "foreign-client") presenting that certificate.
inline std::shared_ptr<grpc::Channel> TlsChannel(int port, const std::string& client = "") {
  const TestCerts& certs = TestCerts::Get();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = certs.Read("ca.pem");
  if (!client.empty()) {
    ssl.pem_cert_chain = certs.Read(client + ".pem");
    ssl.pem_private_key = certs.Read(client + ".key");
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::SslCredentials(ssl),
                                   args);
}

// A blocking TCP connection to 127.0.0.1:port, for a client that may never speak TLS.
inline int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the server has closed `fd` (a read gives EOF or an error), within `timeout`; what
// the server sent before is dropped.
inline bool ClosedBy(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    if (recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
}

// A blocking OpenSSL client on its own TCP connection.
struct TlsClientOptions {
  int max_version = 0;   // 0: OpenSSL's highest; TLS1_1_VERSION for an old client
  std::string client{};  // a certificate to present, as for TlsChannel
  bool alpn_h2 = true;
};

class TlsClient {
 public:
  TlsClient(int port, const TlsClientOptions& options) {
    const TestCerts& certs = TestCerts::Get();
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (options.max_version != 0) {
      // An old version must be let out of this client for the server to refuse it.
      SSL_CTX_set_security_level(ctx_, 0);
      SSL_CTX_set_cipher_list(ctx_, "DEFAULT:@SECLEVEL=0");
      SSL_CTX_set_min_proto_version(ctx_, TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx_, options.max_version);
    }
    SSL_CTX_load_verify_locations(ctx_, certs.Path("ca.pem").c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (!options.client.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, certs.Path(options.client + ".pem").c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, certs.Path(options.client + ".key").c_str(),
                                  SSL_FILETYPE_PEM);
    }
    static constexpr unsigned char kH2[] = {2, 'h', '2'};
    if (options.alpn_h2) SSL_CTX_set_alpn_protos(ctx_, kH2, sizeof kH2);
    fd_ = ConnectTcp(port);
    timeval tv{.tv_sec = 20, .tv_usec = 0};  // a bound on a failing test, not a wait
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    connected_ = fd_ >= 0 && SSL_connect(ssl_) == 1;
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (fd_ >= 0) close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // The handshake succeeded (from the client's side: with TLS 1.3, a server refusing the
  // client's certificate says so only afterwards, on the first read).
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }

  bool Send(const std::string& bytes) {
    return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) ==
           static_cast<int>(bytes.size());
  }
  // Reads until the server ends the connection (close_notify, EOF, an alert or a reset): true,
  // or nothing more comes within the socket's 20 s: false.
  bool ReadToEnd() {
    char buf[16384];
    for (;;) {
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n > 0) continue;
      const int e = SSL_get_error(ssl_, n);
      return e != SSL_ERROR_WANT_READ && !(e == SSL_ERROR_SYSCALL && errno == EAGAIN);
    }
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_GRPC_TLS_TEST_UTIL_H_
