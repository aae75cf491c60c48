// sluiced's life: the one place where the store, the service, the metrics and the front ends are
// made and wired together (the service is handed a store it never names), reloaded on SIGHUP
// and stopped gracefully on SIGTERM/SIGINT. docs/server.md is the manual.
//
//   if (settings.check_config) return CheckConfig(settings);
//   return Run(settings);  // serves until a signal stops it; the exit code
#ifndef SLUICE_SLUICED_SERVER_H_
#define SLUICE_SLUICED_SERVER_H_

#include <memory>

#include "grpc/grpc_server.h"
#include "http/forward_auth_api.h"
#include "http/http_api.h"
#include "http/http_server.h"
#include "metrics/eviction_watch.h"
#include "metrics/metrics.h"
#include "metrics/usage_views.h"
#include "service/caller_auth.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/scheduler.h"
#include "sluice/status.h"
#include "sluiced/flags.h"
#include "sluiced/snapshotter.h"
#include "sluiced/tls_listeners.h"

namespace sluice::server {

class Server {
 public:
  // Loads the config, opens the store, starts the service and each front end that is on,
  // logging as it goes. An error's message is the line to log before exiting 1; what had
  // started is stopped as the Server is destroyed.
  static Result<std::unique_ptr<Server>> Start(const Settings& settings);

  // SIGHUP: loads the config, the TLS pair and the --api-tokens file again; anything wrong in
  // one keeps that one running.
  void Reload();

  // SIGTERM/SIGINT: not ready from here on, the front ends drain their requests in flight side
  // by side, then the store closes. Call once.
  void Stop();

 private:
  explicit Server(const Settings& settings);
  Result<void> StartService();
  Result<void> StartTls();
  Result<void> StartCallers();
  void ReloadCallers();
  Result<void> StartHttp();
  Result<void> StartForwardAuth();
  Result<void> StartGrpc();
  void WatchEvictions();

  // Members in the order they are made; destroyed in reverse (the front ends before the APIs
  // they call, those before the service, the service before the usage views and metrics).
  const Settings settings_;
  std::shared_ptr<const Config> config_;  // the config loaded at start
  Metrics metrics_;
  // One clock for the decisions and the usage views' buckets. It outlives the Server: a store
  // still answering a check on a hung Redis when the Server goes keeps its layers, and their
  // timer threads read this clock, until that answer comes (ProcessClock in server.cc).
  const Clock& clock_;
  // The listeners' TLS (the contexts, their reload, the metrics): outlives the front ends,
  // whose connections report into it.
  std::unique_ptr<TlsListeners> tls_;
  std::unique_ptr<UsageViews> usage_;
  std::unique_ptr<RateLimitService> service_;
  // --state-dir: the memory store's snapshots; null when off. Before the service goes, it has
  // written the shutdown's snapshot and stopped its timer.
  std::unique_ptr<Snapshotter> snapshotter_;
  // --api-tokens, read by every front end; null when off.
  std::unique_ptr<CallerIdentity> callers_;
  std::unique_ptr<const HttpApi> api_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<const ForwardAuthApi> forward_auth_;
  std::unique_ptr<HttpServer> forward_auth_http_;
  std::unique_ptr<GrpcServer> grpc_;
  // The memory store's evictions of live counters, logged (rate-limited) by a timer of its own.
  std::unique_ptr<ThreadScheduler> eviction_timer_;
  std::unique_ptr<EvictionWatch> eviction_watch_;  // used by eviction_task_ alone
  std::unique_ptr<Scheduler::Task> eviction_task_;
};

// --check-config: the config, and every limit of it made by the store --store names, as serving
// would. Prints the outcome; returns the exit code (0 or 1).
int CheckConfig(const Settings& settings);

// Serves until SIGTERM or SIGINT, reloading on SIGHUP; returns the exit code (0, or 1 when it
// could not start).
int Run(const Settings& settings);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_SERVER_H_
