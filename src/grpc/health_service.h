// gRPC's health checking protocol, grpc.health.v1.Health (proto/grpc/health/v1/health.proto),
// served next to Envoy's RateLimitService: what Envoy's grpc_health_check, Kubernetes `grpc`
// probes and grpc_health_probe call.
//
// - Names served: "" (the server), "ratelimit" (envoyproxy/ratelimit's name for itself) and
//   "envoy.service.ratelimit.v3.RateLimitService". Any other name: Check answers NOT_FOUND,
//   Watch sends SERVICE_UNKNOWN and keeps the call open, as the protocol says.
// - Status: SERVING when `ready()` says so, otherwise NOT_SERVING. `ready` is
//   RateLimitService::Ready(), the rule HTTP /readyz answers from, which is false while the
//   server drains; after Shutdown() every answer is NOT_SERVING.
// - Check asks `ready()` on every call, as /readyz does. Watch sends the status at once, then
//   once more each time it changes: one thread asks `ready()` every poll_interval while anyone
//   watches (however many watch, one question per interval).
// - Calls count towards the per-connection stream cap as every other call does
//   (CallsPerConnection): a connection holds at most --grpc-max-concurrent-streams watchers.
// - Shutdown() sends NOT_SERVING to every watcher and ends its call (UNAVAILABLE): watchers never
//   hold the server's shutdown; a watcher that reads nothing is cancelled by gRPC at the grace.
//
// gRPC types stay in health_service.cc: this header declares only what GrpcServer needs.
#ifndef SLUICE_GRPC_HEALTH_SERVICE_H_
#define SLUICE_GRPC_HEALTH_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

namespace grpc {
class ServerBuilder;
}

namespace sluice::server {

class CallsPerConnection;

// The service names answered SERVING or NOT_SERVING (anything else is unknown).
bool IsHealthServiceName(std::string_view name);

struct HealthServiceOptions {
  // Ready to serve now. May block briefly (a Redis PING); called from gRPC's threads and the
  // poller.
  std::function<bool()> ready;
  // Counts every call on its connection; null: no cap beyond HTTP/2's own.
  CallsPerConnection* calls = nullptr;
  // Called with the connection (descriptor) of a call beyond the cap: cut it.
  std::function<void(int)> cut;
  std::chrono::milliseconds poll_interval{1000};
};

class HealthService {
 public:
  explicit HealthService(HealthServiceOptions options);
  ~HealthService();  // Shutdown()
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // Adds the service to `builder`; this object must outlive the server built.
  void Register(grpc::ServerBuilder& builder);

  // NOT_SERVING from here on; every Watch is sent it and ended. Idempotent.
  void Shutdown();

  // Watch calls open now (for tests).
  size_t watchers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_GRPC_HEALTH_SERVICE_H_
