#include "store/redis/redis_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace sluice::internal {

// The socket BIO of a session: send(MSG_NOSIGNAL) and recv on its descriptor.
struct TlsBio {
  static int Write(BIO* bio, const char* data, int size) {
    auto* s = static_cast<TlsSession*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    const ssize_t n = send(s->fd_, data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
      return -1;
    }
    s->written_ += static_cast<uint64_t>(n);
    return static_cast<int>(n);
  }

  static int Read(BIO* bio, char* data, int size) {
    auto* s = static_cast<TlsSession*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    const ssize_t n = recv(s->fd_, data, static_cast<size_t>(size), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(bio);
      return -1;
    }
    return static_cast<int>(n);
  }

  static long Ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

  static const BIO_METHOD* Method() {
    static const BIO_METHOD* const method = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice-redis");
      BIO_meth_set_write(m, Write);
      BIO_meth_set_read(m, Read);
      BIO_meth_set_ctrl(m, Ctrl);
      return m;
    }();
    return method;
  }
};

namespace {

std::string OpenSslReason() {
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "TLS failure";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : "TLS failure";
}

// What an operator should look at first, for the verification errors that have an obvious one.
const char* VerifyClass(long error) {
  switch (error) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      return " (unknown CA)";
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return " (name mismatch)";
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return " (expired)";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return " (not yet valid)";
    default:
      return "";
  }
}

// A file OpenSSL is about to read, readable? OpenSSL's own reason for a missing file is "system
// lib"; this says "No such file or directory".
std::string Unreadable(const std::string& path) {
  if (access(path.c_str(), R_OK) == 0) return "";
  return std::strerror(errno);
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

}  // namespace

Result<std::shared_ptr<const RedisTlsContext>> RedisTlsContext::Make(
    const RedisTlsOptions& options) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return MakeError("redis TLS: " + OpenSslReason());
  std::shared_ptr<const RedisTlsContext> made(
      new RedisTlsContext(ctx, !options.insecure_skip_verify));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  // Partial writes: SSL_write returns after each record the kernel took, so a write loop knows
  // how far it got; the buffer stays where it is between retries.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  for (const std::string* file : {&options.ca_file, &options.cert_file, &options.key_file}) {
    if (file->empty()) continue;
    if (std::string why = Unreadable(*file); !why.empty()) {
      return MakeError("redis TLS file '" + *file + "': " + why);
    }
  }
  const bool loaded = options.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx) == 1
                                              : SSL_CTX_load_verify_locations(
                                                    ctx, options.ca_file.c_str(), nullptr) == 1;
  if (!loaded) {
    return MakeError("redis TLS CA file '" + options.ca_file + "': " + OpenSslReason());
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return MakeError("redis TLS: a client certificate needs both its certificate and key files");
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1) {
      return MakeError("redis TLS certificate '" + options.cert_file + "': " + OpenSslReason());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      return MakeError("redis TLS key '" + options.key_file + "': " + OpenSslReason());
    }
  }
  SSL_CTX_set_verify(ctx, options.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                     nullptr);
  return made;
}

RedisTlsContext::~RedisTlsContext() { SSL_CTX_free(ctx_); }

Result<std::unique_ptr<TlsSession>> TlsSession::Make(const RedisTlsContext& context, int fd,
                                                     const std::string& name) {
  ERR_clear_error();
  std::unique_ptr<TlsSession> s(new TlsSession());
  s->fd_ = fd;
  s->ssl_ = SSL_new(context.ctx());
  BIO* bio = BIO_new(TlsBio::Method());
  if (s->ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    return MakeError("TLS: " + OpenSslReason());
  }
  BIO_set_data(bio, s.get());
  BIO_set_init(bio, 1);
  SSL_set_bio(s->ssl_, bio, bio);
  SSL_set_connect_state(s->ssl_);
  const bool ip = IsIpAddress(name);
  if (!ip) SSL_set_tlsext_host_name(s->ssl_, name.c_str());
  if (context.verify()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(s->ssl_);
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                      : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (ok != 1) return MakeError("TLS: cannot verify against '" + name + "'");
  }
  return s;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsIo TlsSession::Outcome(int ret) {
  const int e = SSL_get_error(ssl_, ret);
  switch (e) {
    case SSL_ERROR_WANT_READ:
      return TlsIo::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsIo::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      error_ = "closed by the server";
      return TlsIo::kClosed;
    case SSL_ERROR_SYSCALL:
      error_ = errno != 0 ? std::string(strerror(errno)) : "closed by the server";
      ERR_clear_error();
      return errno != 0 ? TlsIo::kFailed : TlsIo::kClosed;
    default:
      break;
  }
  if (const long v = SSL_get_verify_result(ssl_); v != X509_V_OK) {
    error_ = std::string("certificate verification failed") + VerifyClass(v) + ": " +
             X509_verify_cert_error_string(v);
    ERR_clear_error();
  } else {
    error_ = OpenSslReason();
  }
  return TlsIo::kFailed;
}

TlsIo TlsSession::Handshake() {
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_do_handshake(ssl_);
  return ret == 1 ? TlsIo::kDone : Outcome(ret);
}

TlsIo TlsSession::Write(const char* data, size_t size, size_t& n) {
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_write_ex(ssl_, data, size, &n);
  return ret == 1 ? TlsIo::kDone : Outcome(ret);
}

TlsIo TlsSession::Read(char* data, size_t size, size_t& n) {
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_read_ex(ssl_, data, size, &n);
  return ret == 1 ? TlsIo::kDone : Outcome(ret);
}

TlsIo TlsSession::PeekIdle() {
  if (SSL_pending(ssl_) > 0) return TlsIo::kDone;
  char byte;
  size_t n = 0;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_peek_ex(ssl_, &byte, 1, &n);
  return ret == 1 ? TlsIo::kDone : Outcome(ret);
}

}  // namespace sluice::internal
