// TLS to Redis with OpenSSL: the store's client context (CAs, client certificate, verification
// policy), made once and shared by every connection, and a TLS session over an already connected
// non-blocking socket. OpenSSL stays inside this file's .cc: only opaque pointers here.
#ifndef SLUICE_STORE_REDIS_REDIS_TLS_H_
#define SLUICE_STORE_REDIS_REDIS_TLS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sluice/redis_store.h"
#include "sluice/status.h"

struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

namespace sluice::internal {

class RedisTlsContext {
 public:
  // Reads the CA file (or the system's trust store), the client certificate and key; an error
  // names the file that could not be used.
  static Result<std::shared_ptr<const RedisTlsContext>> Make(const RedisTlsOptions& options);
  ~RedisTlsContext();
  RedisTlsContext(const RedisTlsContext&) = delete;
  RedisTlsContext& operator=(const RedisTlsContext&) = delete;

  ssl_ctx_st* ctx() const { return ctx_; }
  bool verify() const { return verify_; }

 private:
  RedisTlsContext(ssl_ctx_st* ctx, bool verify) : ctx_(ctx), verify_(verify) {}
  ssl_ctx_st* ctx_;
  bool verify_;
};

// What one I/O step of a TLS session did.
enum class TlsIo { kDone, kWantRead, kWantWrite, kClosed, kFailed };

// A TLS client session on a connected non-blocking socket. Its own BIO writes with
// MSG_NOSIGNAL (a peer gone mid-write is an error, never a SIGPIPE, whatever the embedding
// program's signal settings) and counts the bytes the kernel accepted, which is what the
// pipeline's "a failed first write sent nothing" rule rests on.
class TlsSession {
 public:
  // `name`: the name the certificate must carry (a DNS name, or an IP address), also sent as SNI
  // when it is a DNS name.
  static Result<std::unique_ptr<TlsSession>> Make(const RedisTlsContext& context, int fd,
                                                  const std::string& name);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  TlsIo Handshake();
  // `n` is what was moved (kDone only).
  TlsIo Write(const char* data, size_t size, size_t& n);
  TlsIo Read(char* data, size_t size, size_t& n);
  // Processes whatever records have arrived (session tickets, a close_notify, an alert) without
  // waiting: kWantRead when none of them was application data and the peer is still there.
  TlsIo PeekIdle();
  // Bytes of this session the kernel accepted, handshake included.
  uint64_t bytes_written() const { return written_; }
  // Why the last kFailed happened: the certificate's verification error ("unable to get local
  // issuer certificate", "hostname mismatch", "certificate has expired") or OpenSSL's reason.
  const std::string& error() const { return error_; }

 private:
  TlsSession() = default;
  TlsIo Outcome(int ret);

  ssl_st* ssl_ = nullptr;
  int fd_ = -1;
  uint64_t written_ = 0;
  std::string error_;
  friend struct TlsBio;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_TLS_H_
