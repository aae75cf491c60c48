// sluiced's Envoy front end: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over
// gRPC, wire-compatible with Envoy's ratelimit filters (HTTP and network) and with
// envoyproxy/ratelimit's clients. Each call is translated into a CheckRequest, decided by the
// RateLimitService, and answered with one DescriptorStatus per descriptor plus the RateLimit
// headers in response_headers_to_add. A bad request is answered INVALID_ARGUMENT.
//
//   auto server = GrpcServer::Start("127.0.0.1:8081", *service, HeaderOptions{}, 4);
//   if (!server) log(server.error().message);
//   ...
//   (*server)->Shutdown();  // stops accepting, finishes the calls in flight
//
// gRPC and protobuf stay behind the pimpl: this header is safe to include anywhere.
#ifndef SLUICE_GRPC_GRPC_SERVER_H_
#define SLUICE_GRPC_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "service/rate_limit_service.h"
#include "service/ratelimit_headers.h"
#include "sluice/status.h"

namespace sluice::server {

class GrpcServer {
 public:
  // Listens on `address` ("host:port"; port 0 picks a free one, see port()) without TLS and
  // serves with `threads` handler threads (at least 1). A service that checks asynchronously
  // (Redis) answers from its own I/O thread, so a handler thread never waits on the store.
  // `service` must outlive the server. Fails if the address cannot be bound.
  static Result<std::unique_ptr<GrpcServer>> Start(const std::string& address,
                                                   RateLimitService& service, HeaderOptions headers,
                                                   int threads);

  // Stops accepting calls, lets the calls in flight finish (for at most a few seconds), then
  // stops the threads. Idempotent; the destructor calls it.
  void Shutdown();

  // The port actually bound (the chosen one when the address asked for port 0).
  int port() const;

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
