// A blocking TLS client for the TLS tests (OpenSSL on a plain socket): one connection, HTTP/1.1
// keep-alive requests with Content-Length bodies, the server's certificate fingerprint and the
// ALPN protocol chosen. Every read has a 10 s socket timeout, so a failing test ends.
#ifndef SLUICE_TESTS_SUPPORT_TLS_TEST_CLIENT_H_
#define SLUICE_TESTS_SUPPORT_TLS_TEST_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "support/test_certs.h"

namespace sluice::testing {

struct TlsClientOptions {
  std::string ca_file;    // trust this CA (verifies the server); empty: no verification
  std::string cert_file;  // a client certificate, with key_file
  std::string key_file;
  int max_version = 0;            // e.g. TLS1_1_VERSION; 0: OpenSSL's default
  std::string alpn = "http/1.1";  // offered; empty: none
};

// A client that trusts the test CA and, given a name ("client", "other-client", ...), presents
// that certificate of `certs`.
inline TlsClientOptions ClientOf(const TestCerts& certs, const std::string& name = {}) {
  TlsClientOptions o;
  o.ca_file = certs["ca.pem"];
  if (!name.empty()) {
    o.cert_file = certs[name + ".pem"];
    o.key_file = certs[name + ".key"];
  }
  return o;
}

struct TlsResponse {
  int status = 0;
  std::string body;
};

// SHA-256 of a certificate's DER, in hex.
inline std::string Fingerprint(const X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (cert == nullptr || X509_digest(cert, EVP_sha256(), md, &n) != 1) return {};
  std::string hex;
  char two[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", md[i]);
    hex += two;
  }
  return hex;
}

inline std::string FileFingerprint(const std::string& pem_file) {
  FILE* f = std::fopen(pem_file.c_str(), "r");
  if (f == nullptr) return {};
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  const std::string out = Fingerprint(cert);
  X509_free(cert);
  return out;
}

// A TCP connection to 127.0.0.1:port with 10 s send and receive timeouts; -1 on failure.
inline int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class TlsTestClient {
 public:
  TlsTestClient(int port, const TlsClientOptions& o) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (o.max_version != 0) {
      // OpenSSL 3 allows TLS 1.0/1.1 only at security level 0.
      SSL_CTX_set_cipher_list(ctx_, "DEFAULT:@SECLEVEL=0");
      SSL_CTX_set_min_proto_version(ctx_, TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx_, o.max_version);
    }
    if (!o.ca_file.empty()) {
      SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    if (!o.cert_file.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, o.cert_file.c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM);
    }
    if (!o.alpn.empty()) {
      std::string wire(1, static_cast<char>(o.alpn.size()));
      wire += o.alpn;
      SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned int>(wire.size()));
    }
    fd_ = ConnectLoopback(port);
    if (fd_ < 0) return;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    SSL_set1_host(ssl_, "localhost");
    handshake_ok_ = SSL_connect(ssl_) == 1;
  }
  ~TlsTestClient() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  TlsTestClient(const TlsTestClient&) = delete;
  TlsTestClient& operator=(const TlsTestClient&) = delete;

  // The handshake completed on the client's side. Under TLS 1.3 the server checks a client
  // certificate after that, so a refused client sees the refusal at its first read instead.
  bool handshake_ok() const { return handshake_ok_; }

  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned int n = 0;
    SSL_get0_alpn_selected(ssl_, &p, &n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  std::string server_fingerprint() const { return Fingerprint(SSL_get0_peer_certificate(ssl_)); }

  // One request; nullopt when the connection failed or closed before a whole response.
  std::optional<TlsResponse> Request(const std::string& method, const std::string& target,
                                     const std::string& body = {}) {
    if (!handshake_ok_) return std::nullopt;
    const std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n" +
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (SSL_write(ssl_, req.data(), static_cast<int>(req.size())) <= 0) return std::nullopt;
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    TlsResponse r;
    if (buffer_.size() < 12) return std::nullopt;
    r.status = std::stoi(buffer_.substr(9, 3));
    size_t length = 0;
    const std::string head = buffer_.substr(0, header_end);
    if (const size_t at = head.find("Content-Length: "); at != std::string::npos) {
      length = std::stoul(head.substr(at + 16));
    }
    while (buffer_.size() < header_end + 4 + length) {
      if (!Fill()) return std::nullopt;
    }
    r.body = buffer_.substr(header_end + 4, length);
    buffer_.erase(0, header_end + 4 + length);
    return r;
  }

 private:
  bool Fill() {
    char chunk[4096];
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool handshake_ok_ = false;
  std::string buffer_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_TLS_TEST_CLIENT_H_
