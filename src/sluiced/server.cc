#include "sluiced/server.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cstdio>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config/config_yaml.h"
#include "service/check.h"
#include "sluice/open_store.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "sluiced/config_report.h"
#include "sluiced/listener_exposure.h"
#include "sluiced/store_events.h"

namespace sluice::server {
namespace {

// The gRPC listener's TLS: sluice terminates it (grpc/tls_relay.h) with the listener's context
// from TlsListeners, which already asks for h2, checks the client certificate and its SANs, and
// reloads. The relay installs its own verify callback on each connection (replacing the
// context's), so it is given the same --tls-client-san patterns: the rule (tls/san_match.h)
// is one, and it must be applied on this listener too.
TlsRelayOptions GrpcRelayOptions(std::shared_ptr<tls::ServerTlsContext> context,
                                 std::function<void(tls::HandshakeFailure)> record,
                                 const Clock& clock) {
  const tls::TlsServerSettings& settings = context->settings();
  TlsRelayOptions relay;
  relay.require_client_cert = !settings.client_ca_file.empty();
  relay.client_sans = settings.client_sans;
  relay.handshake_timeout = settings.handshake_timeout;
  relay.min_version = settings.min_version == tls::TlsVersion::k1_3 ? 13 : 12;
  relay.clock = &clock;
  relay.context = [context] { return context->Current(); };
  relay.on_handshake_error = std::move(record);
  return relay;
}

// The store --store names, as the service needs it: keys as long as its counter keys, the
// service's clock (nullptr: the store's own), the Redis store's state changes to `events`.
Result<std::shared_ptr<Store>> OpenTheStore(const Settings& settings, const Clock* clock,
                                            RedisEventHook events) {
  OpenStoreOptions options = settings.store_options;
  options.max_key_bytes = kCheckLimits.max_counter_key_bytes;
  options.clock = clock;
  options.redis_events = std::move(events);
  return OpenStore(settings.store, options);
}

// Each open connection is a descriptor; the default soft limit (often 1024) would cap the
// connection bound below what --http-max-connections promises.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// Signals are taken synchronously by the main thread (sigwait in Run): they are blocked before
// any other thread starts, so that every thread inherits the mask.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error code, not a death
  return signals;
}

}  // namespace

namespace {

// The process's clock, never destroyed (nor leaked: it lives in static storage), so that no
// thread that outlives the Server or main -- a store's timer waiting on Redis -- reads a dead
// one. Immutable once made.
const Clock& ProcessClock() {
  alignas(MonotonicClock) static unsigned char storage[sizeof(MonotonicClock)];
  static const MonotonicClock* const clock = new (storage) MonotonicClock();
  return *clock;
}

}  // namespace

Server::Server(const Settings& settings)
    : settings_(settings), metrics_(settings.near_limit_ratio), clock_(ProcessClock()) {}

Result<std::unique_ptr<Server>> Server::Start(const Settings& settings) {
  auto config = LoadConfig(settings.config, settings.load);
  if (!config) return MakeError("cannot load the config: " + config.error().message);
  LogWarnings(**config, settings.memory_store);
  LogRegionFlags(**config, settings.load.region);
  spdlog::info("config loaded from {}: {}", settings.config, Summary(**config));

  std::unique_ptr<Server> server(new Server(settings));
  server->config_ = std::move(*config);
  for (const std::string& warning : UnprotectedListenerWarnings(settings)) {
    spdlog::warn("{}", warning);
  }
  for (auto step :
       {&Server::StartService, &Server::StartTls, &Server::StartCallers, &Server::StartAudit,
        &Server::StartHttp, &Server::StartForwardAuth, &Server::StartGrpc}) {
    if (auto started = (server.get()->*step)(); !started) return std::unexpected(started.error());
  }
  server->metrics_.SetStatsSource([&service = *server->service_, &tls = *server->tls_,
                                   snapshotter = server->snapshotter_.get()](StatsSink& sink) {
    service.ReportStats(sink);
    tls.ReportStats(sink);
    if (snapshotter != nullptr) snapshotter->ReportStats(sink);
  });
  if (settings.memory_store) server->WatchEvictions();
  return server;
}

// Each eviction of a live counter can admit a request its limit would have refused (an
// override's counter as much as a configured limit's): logged, at most every 10 s, checked every
// second off the decision path.
void Server::WatchEvictions() {
  constexpr Duration kInterval = std::chrono::seconds(10);
  eviction_timer_ = std::make_unique<ThreadScheduler>(clock_);
  eviction_watch_ = std::make_unique<EvictionWatch>(kInterval, service_->StoreTotals().evictions);
  eviction_task_ = eviction_timer_->Every(std::chrono::seconds(1), [this](Timestamp now) {
    if (auto line = eviction_watch_->Observe(service_->StoreTotals().evictions, now)) {
      spdlog::warn("{}", *line);
    }
  });
}

Result<void> Server::StartService() {
  if (settings_.usage) {
    UsageOptions usage_options = *settings_.usage;
    usage_options.clock = &clock_;
    usage_ = std::make_unique<UsageViews>(usage_options);
    metrics_.SetUsageViews(usage_.get());
    spdlog::info("usage views: period {}, near-limit ratio {}, {} limits tracked at most",
                 settings_.usage_period, settings_.near_limit_ratio, usage_->max_limits());
  }
  ServiceOptions options;
  options.over_limit_hits = settings_.over_limit_hits;
  options.clock = &clock_;
  options.usage = usage_.get();
  options.unchecked_warning = [](const std::string& message) {
    spdlog::warn("check: {}", message);
  };
  options.zone_warning = options.unchecked_warning;
  if (settings_.store_options.redis_tls.insecure_skip_verify) {
    spdlog::warn(
        "--redis-tls-insecure-skip-verify: the Redis server's TLS certificate is not verified; "
        "anyone on the path can pose as Redis and read or answer every check");
  }
  auto store = OpenTheStore(settings_, &clock_, LogRedisEvent);
  if (!store) return MakeError("cannot start the service: " + store.error().message);
  // The snapshot is loaded before the service makes the limiters that take its counters.
  if (!settings_.state_dir.empty()) {
    auto snapshotter =
        Snapshotter::Open(settings_.state_dir, settings_.snapshot_interval, *store, clock_);
    if (!snapshotter) return std::unexpected(snapshotter.error());
    snapshotter_ = std::move(*snapshotter);
  }
  auto service = RateLimitService::Create(config_, std::move(*store), options, &metrics_);
  if (!service) return MakeError("cannot start the service: " + service.error().message);
  service_ = std::move(*service);
  if (snapshotter_) snapshotter_->Start();
  return {};
}

// --tls-cert: the pair is loaded (a bad one stops the start) before any listener binds.
Result<void> Server::StartTls() {
  auto started =
      TlsListeners::Start(settings_.tls, settings_.http.has_value(),
                          settings_.forward_auth.has_value(), settings_.grpc.has_value(), clock_);
  if (!started) return std::unexpected(started.error());
  tls_ = std::move(*started);
  return {};
}

// The clients of --api-tokens; a file that cannot be read or is wrong stops the start.
Result<void> Server::StartCallers() {
  if (settings_.api_tokens.empty()) return {};
  auto table = LoadApiTokens(settings_.api_tokens);
  if (!table) return MakeError("cannot load --api-tokens: " + table.error().message);
  spdlog::info("api tokens: {} clients from {} ({} by token, {} by certificate SAN)",
               (*table)->clients().size(), settings_.api_tokens, (*table)->tokens(),
               (*table)->sans());
  callers_ = std::make_unique<CallerIdentity>(std::move(*table), &metrics_);
  return {};
}

// The file is read again whole; a wrong one keeps the table in force.
void Server::ReloadCallers() {
  if (!callers_) return;
  auto table = LoadApiTokens(settings_.api_tokens);
  if (!table) {
    spdlog::error("api tokens: reload failed, keeping the running clients: {}",
                  table.error().message);
    return;
  }
  spdlog::info("api tokens: reloaded {} clients from {}", (*table)->clients().size(),
               settings_.api_tokens);
  callers_->Replace(std::move(*table));
}

// --audit-log: a file that cannot be opened stops the start (every admin write would be
// refused).
Result<void> Server::StartAudit() {
  if (settings_.audit_log.empty()) return {};
  auto log = AuditLog::Open(settings_.audit_log);
  if (!log) return MakeError("cannot open --audit-log: " + log.error().message);
  audit_ = std::move(*log);
  spdlog::info("audit log: admin writes and config reloads to {}", settings_.audit_log);
  return {};
}

void Server::AuditReload(bool ok, const std::string& error) {
  if (!audit_) return;
  std::string hash;  // empty: the file could not be read again
  if (auto text = internal::ReadFileText(settings_.config, internal::kMaxConfigFileBytes)) {
    hash = Sha256Hex(*text);
  }
  if (auto r = audit_->Append(AuditReloadLine(clock_.Now(), settings_.config, hash, ok, error));
      !r) {
    spdlog::error("audit log: the reload's line was not written: {}", r.error().message);
  }
}

Result<void> Server::StartHttp() {
  HttpApiOptions api_options;
  api_options.callers = callers_.get();
  api_options.audit = audit_.get();
  api_options.clock = &clock_;
  api_options.admin_token = settings_.admin_token;
  api_options.headers = settings_.headers;
  api_options.max_body_bytes = settings_.listener.max_body_bytes;
  api_options.usage = usage_.get();
  api_ = std::make_unique<const HttpApi>(service_.get(), &metrics_, api_options);
  if (!settings_.http) return {};
  HttpServerOptions options = settings_.listener;
  options.address = *settings_.http;
  tls_->Apply(TlsListener::kHttp, options);
  auto started = HttpServer::Start(
      options, [api = api_.get()](const HttpRequestView& r) { return api->Handle(r); });
  if (!started) return std::unexpected(started.error());
  http_ = std::move(*started);
  spdlog::info("http: listening on {} ({} threads, store {}, admin API {})", http_->address(),
               settings_.threads, RedactRedisAddress(settings_.store),
               settings_.admin_token.empty() ? "off" : "on");
  return {};
}

// The forward-auth endpoint: a second listener on the same server machinery, with the HTTP
// API's bounds and timeouts (its requests are a proxy's: headers, no body worth reading).
Result<void> Server::StartForwardAuth() {
  forward_auth_ = std::make_unique<const ForwardAuthApi>(
      service_.get(), &metrics_,
      ForwardAuthOptions{.headers = settings_.headers, .callers = callers_.get()});
  if (!settings_.forward_auth) return {};
  HttpServerOptions options = settings_.listener;
  options.address = *settings_.forward_auth;
  tls_->Apply(TlsListener::kForwardAuth, options);
  auto started = HttpServer::Start(
      options, [api = forward_auth_.get()](const HttpRequestView& r) { return api->Handle(r); });
  if (!started) return MakeError("forward-auth: " + started.error().message);
  forward_auth_http_ = std::move(*started);
  size_t declared = 0;
  for (const auto& [name, domain] : config_->domains()) declared += domain.forward_auth ? 1 : 0;
  spdlog::info("forward-auth: listening on {} ({} domains with a forward_auth section)",
               forward_auth_http_->address(), declared);
  if (declared == 0) {
    spdlog::warn(
        "forward-auth: no domain has a forward_auth section: every request to it is answered "
        "400 until a reload adds one");
  }
  return {};
}

Result<void> Server::StartGrpc() {
  if (!settings_.grpc) return {};
  GrpcServerOptions options = settings_.grpc_options;
  options.address = *settings_.grpc;
  options.callers = callers_.get();
  if (std::shared_ptr<tls::ServerTlsContext> context = tls_->TakeGrpc()) {
    options.tls =
        GrpcRelayOptions(std::move(context), tls_->FailureRecorder(TlsListener::kGrpc), clock_);
  }
  auto started = GrpcServer::Start(options, *service_);
  if (!started) return std::unexpected(started.error());
  grpc_ = std::move(*started);
  const std::string_view header_set = HeaderSetName(options.headers.set);
  const std::string where = options.address.starts_with("unix:")
                                ? options.address
                                : "port " + std::to_string(grpc_->port());
  spdlog::info(
      "grpc: listening on {} (envoy.service.ratelimit.v3.RateLimitService and "
      "grpc.health.v1.Health{}; at most {} connections, {} streams each; response headers {})",
      where, options.reflection ? ", with reflection" : "", options.max_connections,
      options.max_concurrent_streams, header_set);
  if (settings_.headers.legacy && !http_ && !forward_auth_http_ &&
      options.headers.set != HeaderSet::kDraft11) {
    spdlog::warn(
        "--legacy-headers has no effect: the HTTP API is off and gRPC answers carry "
        "the {} set (X-RateLimit-* come with draft11 only)",
        header_set);
  }
  return {};
}

void Server::Reload() {
  // First, so that a logrotate rename followed by SIGHUP puts this reload's line in the new file.
  if (audit_) {
    if (auto r = audit_->Reopen(); !r) {
      spdlog::error("audit log: reopen failed, writing on to the file open: {}", r.error().message);
    }
  }
  tls_->Reload();  // the certificate pair, whatever becomes of the config
  ReloadCallers();
  auto config = LoadConfig(settings_.config, settings_.load);
  if (!config) {
    spdlog::error("reload failed, keeping the running config: {}", config.error().message);
    metrics_.RecordReload(false);
    AuditReload(false, config.error().message);
    return;
  }
  LogWarnings(**config, settings_.memory_store);
  LogRegionFlags(**config, settings_.load.region);
  const std::string summary = Summary(**config);
  // The service counts the outcome of its own Reload; only a config that never reached it is
  // counted here.
  const std::shared_ptr<const Config> before = service_->config();
  const std::shared_ptr<const Config> after = *config;
  if (auto r = service_->Reload(std::move(*config)); !r) {
    spdlog::error("reload failed, keeping the running config: {}", r.error().message);
    AuditReload(false, r.error().message);
    return;
  }
  AuditReload(true, "");
  WarnRemovedDomains(*before, *after);
  spdlog::info("config reloaded from {}: {}", settings_.config, summary);
}

void Server::Stop() {
  // Not ready from here on: /readyz answers 503 and gRPC health NOT_SERVING while requests in
  // flight finish.
  service_->StartDraining();
  // The front ends drain side by side, each its own requests in flight (a held forward-auth or
  // gRPC answer goes out at once), so that none waits out another's grace first.
  std::vector<std::thread> stopping;
  if (http_) stopping.emplace_back([this] { http_->Stop(); });
  if (forward_auth_http_) stopping.emplace_back([this] { forward_auth_http_->Stop(); });
  if (grpc_) stopping.emplace_back([this] { grpc_->Shutdown(); });
  for (std::thread& t : stopping) t.join();
  eviction_task_.reset();  // it reads the service's store
  // Nothing decides any more: the last snapshot holds every counter.
  if (snapshotter_ && snapshotter_->Stop()) spdlog::info("state: counters written at shutdown");
  snapshotter_.reset();
  // A check still waiting on Redis when the grace ran out is answered by the store as it
  // closes, and that answer goes to the HTTP API and a server's io_context: close the store
  // now, while they exist, rather than after them in reverse declaration order.
  service_.reset();
  metrics_.SetUsageViews(nullptr);
}

// Neither Redis is contacted: the region's store connects lazily and decides what it accepts by
// itself, and no part is leased from the global store. (The Redis store refuses limits beyond
// its exact range that the memory store takes, hence the store and not the config alone.)
int CheckConfig(const Settings& settings) {
  auto checked = LoadConfig(settings.config, settings.load);
  if (!checked) {
    std::fprintf(stderr, "%s\n", checked.error().message.c_str());
    return 1;
  }
  for (const std::string& w : (*checked)->warnings()) {
    std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  if (!settings.api_tokens.empty()) {
    if (auto tokens = LoadApiTokens(settings.api_tokens); !tokens) {
      std::fprintf(stderr, "--api-tokens: %s\n", tokens.error().message.c_str());
      return 1;
    }
  }
  Metrics metrics;
  ServiceOptions options;
  options.over_limit_hits = settings.over_limit_hits;
  // No background work: nothing to watch (the process is about to exit), nor any part to lease
  // from the global store. A scheduler that is never advanced runs none.
  ManualClock idle;
  Settings quiet = settings;
  quiet.store_options.scheduler = std::make_shared<ManualScheduler>(idle);
  const std::string redacted = RedactRedisAddress(settings.store);
  Result<void> made;
  if (auto store = OpenTheStore(quiet, nullptr, nullptr); !store) {
    made = std::unexpected(store.error());
  } else if (auto service =
                 RateLimitService::Create(*checked, std::move(*store), options, &metrics);
             !service) {
    made = std::unexpected(service.error());
  }
  if (!made) {
    std::fprintf(stderr, "%s (with --store %s)\n", made.error().message.c_str(), redacted.c_str());
    return 1;
  }
  std::printf("%s: ok with --store %s, %s\n", settings.config.c_str(), redacted.c_str(),
              ConfigSummary(**checked).c_str());
  return 0;
}

int Run(const Settings& settings) {
  sigset_t signals = BlockSignals();
  RaiseFileLimit();
  auto server = Server::Start(settings);
  if (!server) {
    spdlog::error("{}", server.error().message);
    return 1;
  }
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      (*server)->Reload();
      continue;
    }
    spdlog::info("{}: stopping (finishing requests in flight)",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
  (*server)->Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace sluice::server
