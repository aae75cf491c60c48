// TLS for the gRPC listener, terminated by sluice (docs/security.md, "gRPC over TLS"). grpc++
// 1.51 can take an accepted descriptor only as a plaintext connection
// (grpc::AddInsecureChannelFromFd), and the ConnectionGate needs that handover to cap
// connections and cut a client that ignores the stream cap. So the gate hands each accepted TCP
// connection here instead; the relay does the TLS server handshake with OpenSSL and, once it
// succeeds, makes a socket pair, hands one end to gRPC and copies bytes between the other end
// and the TLS connection, both ways, until both are done.
//
// - Lifetime: the relay owns the TCP descriptor and closes it when the relayed connection ends,
//   so the gate (which checks its descriptors with fstat) counts the connection, handshake
//   included, until then: handshakes in progress count toward --grpc-max-connections.
// - A few epoll threads serve every connection (not a thread each); non-blocking OpenSSL; each
//   direction has a bounded buffer, and a full one stops reading from the side that fills it.
//   Half-close goes through both ways (close_notify <-> shutdown(SHUT_WR)).
// - A connection whose first byte is not a TLS handshake record (a plaintext client) is closed
//   without a byte of reply; a handshake not done within handshake_timeout is cut.
// - Client certificates: with require_client_cert, one is required and verified against the
//   context's trust store, and with client_sans its names must match a pattern (tls/san_match.h),
//   all at the handshake. The verified names stay retrievable per call: gRPC names a handed-over
//   connection's peer "fd:N" (N: gRPC's end of the pair), and Identity(peer) looks them up.
//
//   auto relay = TlsRelay::Start(options, [server](int fd) {
//     grpc::AddInsecureChannelFromFd(server, fd); });
//   gate->Start([&](int fd) { (*relay)->Adopt(fd); });
//   ... (*relay)->StopHandover(); server->Shutdown(...); (*relay)->Stop();
#ifndef SLUICE_GRPC_TLS_RELAY_H_
#define SLUICE_GRPC_TLS_RELAY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/status.h"
#include "tls/handshake_failure.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX: no OpenSSL header here

namespace sluice::server {

// The DNS and URI SANs of a connection's verified client certificate (tls::VerifiedPeerSans),
// in the certificate's order; empty without one.
using PeerIdentity = std::vector<std::string>;

struct TlsRelayOptions {
  // The server's context (certificate, key, trust store for client certificates), asked for
  // each new connection, so a reloaded one serves new connections while open ones keep theirs.
  // Its ALPN selection must pick "h2" (UseAlpnH2 installs that); a connection that did not
  // negotiate h2 is closed. Null: the connection is closed.
  std::function<std::shared_ptr<ssl_ctx_st>()> context{};
  bool require_client_cert = false;
  std::vector<std::string> client_sans{};  // patterns; empty: any verified certificate
  std::chrono::milliseconds handshake_timeout{5000};
  int min_version = 12;  // 12: TLS 1.2, 13: TLS 1.3; a context's higher minimum is kept
  int threads = 1;
  size_t buffer_bytes = 32 * 1024;  // per direction and connection
  // The pair handed to gRPC: false, an AF_UNIX socket pair; true, a TCP connection over
  // loopback (through a listener of each relay thread's, on 127.0.0.1), which gRPC can ask
  // (TCP_INQ) whether it is drained instead of reading until EAGAIN. For measuring.
  bool tcp_pair = false;
  // Told of each failed handshake, with why, in the reasons every listener's handshake error
  // metric has (no h2 or no context: kOther). Called on a relay thread.
  std::function<void(tls::HandshakeFailure)> on_handshake_error{};
  const Clock* clock = nullptr;  // null: a MonotonicClock of the relay's own
};

// Makes `ctx` select ALPN "h2" and refuse a client that offers ALPN without it. Call before the
// context serves connections.
void UseAlpnH2(ssl_ctx_st* ctx);

class TlsRelay {
 public:
  using Handover = std::function<void(int plaintext_fd)>;

  // Checks the options (refusing what cannot be honoured) and starts the threads.
  static Result<std::unique_ptr<TlsRelay>> Start(TlsRelayOptions options, Handover handover);

  // Takes an accepted TCP connection (non-blocking) for good.
  void Adopt(int tcp_fd);

  // Ends relayed connection `grpc_fd` (gRPC's end of its pair), both the client's TCP
  // connection and gRPC's, if it is still that connection. True if it was.
  bool Cut(int grpc_fd);

  // The verified client certificate's names of the connection a call's peer() names ("fd:N"),
  // if it is a relayed connection still open. Thread-safe.
  std::optional<PeerIdentity> Identity(std::string_view peer) const;

  // From now on a finished handshake is closed instead of handed to gRPC (server shutdown);
  // connections already handed over are still relayed.
  void StopHandover();

  // Stops the threads and closes every connection. Idempotent; the destructor calls it.
  void Stop();

  size_t connections() const;  // relayed or handshaking (for tests)

  ~TlsRelay();
  TlsRelay(const TlsRelay&) = delete;
  TlsRelay& operator=(const TlsRelay&) = delete;

 private:
  struct Impl;
  explicit TlsRelay(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_GRPC_TLS_RELAY_H_
