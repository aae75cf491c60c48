// sluiced's gRPC front end: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over
// gRPC, wire-compatible with Envoy's ratelimit filters (HTTP and network) and with
// envoyproxy/ratelimit's clients. Each call is translated into a CheckRequest, decided by the
// RateLimitService, and answered with one DescriptorStatus per descriptor plus the RateLimit
// headers in response_headers_to_add. A bad request, or bytes that are no RateLimitRequest, is
// answered INVALID_ARGUMENT; a message over max_message_bytes RESOURCE_EXHAUSTED. gRPC's
// grpc.health.v1.Health is served too, from RateLimitService::Ready() (health_service.h), and,
// unless turned off, server reflection (reflection.h) for grpcurl and the like.
//
//   auto server = GrpcServer::Start({.address = "127.0.0.1:8081", .threads = 4}, *service);
//   if (!server) log(server.error().message);
//   ...
//   (*server)->Shutdown();  // stops accepting, finishes the calls in flight
//
// The limits an operator can rely on (GrpcServerOptions; docs/server.md):
// - At most max_connections connections are open (with TLS, handshakes included); one more is
//   closed at once (connection_gate.h), and a new one is taken once one closes.
// - At most max_concurrent_streams calls per connection (HTTP/2 SETTINGS): a gRPC client queues
//   the next call until one ends.
// - A connection with no call for idle_timeout is closed; one older than max_connection_age is
//   sent GOAWAY, its calls in flight get shutdown_grace to finish, then it is closed.
//
// gRPC and protobuf stay behind the pimpl: this header is safe to include anywhere.
#ifndef SLUICE_GRPC_GRPC_SERVER_H_
#define SLUICE_GRPC_GRPC_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/grpc_limits.h"
#include "grpc/tls_relay.h"
#include "service/caller_auth.h"
#include "service/rate_limit_service.h"
#include "service/ratelimit_headers.h"
#include "sluice/status.h"
#include "util/unix_socket.h"

namespace sluice::server {

struct GrpcServerOptions {
  // "host:port" or "[v6]:port", the host an IP address or localhost; port 0 picks a free one
  // (see port()). Or "unix:/path": a Unix socket with `unix_socket`'s mode and group
  // (connection_gate.h).
  std::string address = "127.0.0.1:8081";
  util::UnixSocketOptions unix_socket{};
  // Handler threads (at least 1). A service that checks asynchronously (Redis) answers from its
  // own I/O thread, so a handler thread never waits on the store.
  int threads = 2;
  HeaderOptions headers{};
  size_t max_connections = 1024;
  uint32_t max_concurrent_streams = 100;                    // per connection
  std::chrono::milliseconds idle_timeout{300'000};          // 0: never
  std::chrono::milliseconds max_connection_age{3'600'000};  // 0: never
  size_t max_message_bytes = kMaxCheckRequestBytes;         // a request; larger: RESOURCE_EXHAUSTED
  // How long the calls in flight may take to finish on Shutdown(), and on a connection sent
  // GOAWAY for its age.
  std::chrono::milliseconds shutdown_grace{10'000};
  // How often a health Watch asks RateLimitService::Ready() while anyone watches.
  std::chrono::milliseconds health_poll_interval{1'000};
  // Serve gRPC server reflection (grpc.reflection.v1alpha.ServerReflection; reflection.h), as
  // envoyproxy/ratelimit does.
  bool reflection = true;
  // --api-tokens: which caller may check which domain, from the call's metadata
  // "authorization: Bearer <token>" (Envoy's grpc_service.initial_metadata) or a verified
  // client certificate listed by SAN; UNAUTHENTICATED without a known one, PERMISSION_DENIED
  // for a domain its client may not check, before anything is counted. nullptr: anyone may
  // check any domain. Must outlive the server.
  const CallerIdentity* callers = nullptr;
  // The SANs of the verified client certificate of the connection grpc::ServerContext::peer()
  // names (as it is: "fd:12" for a connection the gate handed over), for a client listed by
  // `san`: set by the listener's TLS layer. Unset (no TLS): no SANs. Asked only with
  // --api-tokens, once per call.
  std::function<std::vector<std::string>(std::string_view peer)> peer_sans = nullptr;
  // TLS (and mTLS) on the listener: set, every connection is a TLS one, terminated by sluice
  // (tls_relay.h) and handed to gRPC as plaintext, so every bound above still holds. Each
  // accepted connection counts toward max_connections from its handshake on.
  std::optional<TlsRelayOptions> tls{};
  // gRPC's own TLS instead (grpc::SslServerCredentials), for measuring against the relay
  // (bench/grpc_tls_server; BENCHMARKS.md "gRPC over TLS"): gRPC listens and handshakes itself,
  // so there is no ConnectionGate: max_connections is not enforced, a client over the stream
  // cap has its extra calls refused but is not cut, no client certificate is asked for, and
  // Identity() knows nothing. Not offered by sluiced. Exclusive with `tls`; TCP addresses only.
  struct NativeTls {
    std::string cert_chain_pem, key_pem;
  };
  std::optional<NativeTls> native_tls{};
};

class GrpcServer {
 public:
  // Listens on options.address (with TLS if options.tls is set) and serves. `service` must outlive
  // the server. Fails if an option is out of range or the address cannot be bound.
  static Result<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                   RateLimitService& service);

  // Stops accepting connections and calls, ends health watches (NOT_SERVING, then UNAVAILABLE),
  // lets the calls in flight finish (for at most shutdown_grace), then cancels the rest and
  // stops the threads. Idempotent; the destructor
  // calls it.
  void Shutdown();

  // The port actually bound (the chosen one when the address asked for port 0).
  int port() const;

  // Connections open now (checks each: for tests and logs).
  size_t connections() const;

  // The verified client certificate's names of the connection a call's ServerContext::peer()
  // names, with TLS and a client certificate; nullopt otherwise. Thread-safe.
  std::optional<PeerIdentity> Identity(std::string_view peer) const;

  // grpc.health.v1.Health Watch calls open now (for tests).
  size_t health_watchers() const;

  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

 private:
  struct Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_GRPC_GRPC_SERVER_H_
