// sluiced: the rate limit server. Loads the config, starts the service, the HTTP API and the
// Envoy gRPC front end, then waits for signals: SIGHUP reloads the config, SIGTERM/SIGINT stop
// gracefully. docs/server.md is the manual.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config/config.h"
#include "grpc/grpc_server.h"
#include "http/check_json.h"
#include "http/forward_auth_api.h"
#include "http/http_api.h"
#include "http/http_server.h"
#include "metrics/metrics.h"
#include "metrics/usage_views.h"
#include "service/rate_limit_service.h"
#include "sluice/algorithm.h"
#include "sluice/clock.h"
#include "sluice/duration.h"
#include "sluice/redis_store.h"
#include "sluice/scheduler.h"
#include "sluiced/log_setup.h"
#include "util/byte_size.h"

namespace {

using namespace sluice::server;

struct Flags {
  std::string config;
  std::string http = "127.0.0.1:8080";
  std::string grpc = "127.0.0.1:8081";
  std::string forward_auth = "off";
  std::string store = "memory";
  std::string admin_token;
  int threads = std::max(1u, std::thread::hardware_concurrency());
  std::string log_level = "info";
  std::string log_format = "text";
  bool check_config = false;
  bool merge_domain_config = false;
  std::string over_limit_hits = "drop";
  std::string default_algorithm = "token_bucket";
  std::string default_sync = "exact";
  bool legacy_headers = false;
  std::string grpc_response_headers = "draft11";  // checked by ParseHeaderSet when parsed
  int64_t http_timeout_ms = 10'000;
  size_t http_max_connections = 1024;
  size_t http_max_body_bytes = MaxCheckBodyBytes();
  int64_t shutdown_grace_ms = 10'000;
  size_t grpc_max_connections = GrpcServerOptions{}.max_connections;
  uint32_t grpc_max_concurrent_streams = GrpcServerOptions{}.max_concurrent_streams;
  int64_t grpc_idle_timeout_ms = GrpcServerOptions{}.idle_timeout.count();
  int64_t grpc_max_connection_age_ms = GrpcServerOptions{}.max_connection_age.count();
  size_t grpc_max_message_bytes = GrpcServerOptions{}.max_message_bytes;
  int redis_connections = 4;
  int64_t redis_connect_timeout_ms = 200;
  int64_t redis_command_timeout_ms = 50;
  int redis_breaker_failures = 5;
  int64_t redis_breaker_open_ms = 1000;
  std::string memory_max_bytes = "512Mi";  // checked by ParseByteSize when parsed
  std::string local_cache_bytes = "64Mi";  // checked by ParseByteSize when parsed
  std::string usage_tracking = "on";
  std::string usage_period = "1h";  // checked by ParseDuration when parsed
  double near_limit_ratio = 0.9;
  std::string region;        // empty: none (limits of scope global are then refused)
  std::string global_store;  // empty: none (regions mode leased is then refused)
};

// The usage views take a sixteenth of what --memory-max-bytes leaves the store in this process
// (all of it with the memory store; what the over-limit cache leaves with Redis); 0 when off.
size_t UsageViewBytes(const Flags& flags) {
  if (flags.usage_tracking != "on") return 0;
  const size_t memory_max = *sluice::util::ParseByteSize(flags.memory_max_bytes);  // checked
  const size_t cache =
      flags.store == "memory" ? 0 : *sluice::util::ParseByteSize(flags.local_cache_bytes);
  return (memory_max - std::min(memory_max, cache)) / 16;
}

// "off" (or empty) turns a listener off.
bool Disabled(const std::string& address) { return address.empty() || address == "off"; }

// The HTTP API and the forward-auth endpoint are two listeners with the same bounds and
// timeouts: one place says which flags make them.
HttpServerOptions ListenerOptions(const Flags& flags, const std::string& address) {
  HttpServerOptions o;
  o.address = address;
  o.threads = flags.threads;
  o.max_connections = flags.http_max_connections;
  o.max_body_bytes = flags.http_max_body_bytes;
  o.request_timeout = std::chrono::milliseconds(flags.http_timeout_ms);
  o.shutdown_grace = std::chrono::milliseconds(flags.shutdown_grace_ms);
  return o;
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

std::string Summary(const Config& config) {
  return std::to_string(config.domains().size()) + " domains, " +
         std::to_string(config.limit_count()) + " limits";
}

// The config's own warnings, and one line when limits ask for a sync mode the store cannot give:
// the memory store is one process's, so there is nothing to share and every limit is exact.
void LogWarnings(const Config& config, const std::string& store) {
  for (const std::string& w : config.warnings()) spdlog::warn("config: {}", w);
  if (store != "memory") return;
  size_t shared = 0;
  for (const auto& [name, domain] : config.domains()) {
    for (const sluice::server::Limit& limit : domain.limits) {
      shared += limit.sync.mode != sluice::SyncMode::kExact;
    }
  }
  if (shared > 0) {
    spdlog::info(
        "config: {} limits set sync: leased or batched, which has no effect with --store memory "
        "(one process's counters are exact already)",
        shared);
  }
}

// --region and --global-store are accepted without a limit that uses them (a reload may add
// one), but say so: a flag that does nothing yet must not look as if it did.
void LogRegionFlags(const Config& config, const RegionOptions& flags) {
  if (flags.region.empty()) return;
  size_t global = 0, leased = 0;
  for (const auto& [name, domain] : config.domains()) {
    for (const sluice::server::Limit& limit : domain.limits) {
      global += limit.regions.global;
      leased += limit.regions.global && limit.regions.mode == sluice::RegionMode::kLeased;
    }
  }
  if (global == 0) {
    spdlog::warn(
        "--region {}: no limit has scope: global; every limit holds per store (the flag takes "
        "effect when a config with one is loaded)",
        flags.region);
  } else if (flags.global_store && leased == 0) {
    spdlog::warn(
        "--global-store: no limit has regions mode leased; the global store is not contacted "
        "(static shares need none)");
  } else {
    spdlog::info("region {}: {} limits of scope global, {} of them leased from the global store",
                 flags.region, global, leased);
  }
}

// A domain the new config lacks was being answered until now; from here on its checks are those
// of an unknown domain (400 over HTTP, OK and unlimited over gRPC, as Envoy expects). A domain
// file lost to a bad deploy must not vanish as quietly as "1 domains".
void WarnRemovedDomains(const Config& before, const Config& after) {
  for (const auto& [name, domain] : before.domains()) {
    if (after.domains().contains(name)) continue;
    spdlog::warn(
        "reload removes domain '{}' (was {}): its checks are now unknown-domain answers, 400 over "
        "HTTP and OK, unlimited, over gRPC",
        name, domain.origin);
  }
}

// The Redis store's state changes, already rate-limited by the store (redis_events.h).
void LogRedisEvent(const sluice::RedisEvent& e) {
  using Kind = sluice::RedisEventKind;
  spdlog::level::level_enum level = spdlog::level::info;
  switch (e.kind) {
    case Kind::kConnectionLost:
    case Kind::kAuthFailed:
    case Kind::kCommandError:
    case Kind::kKeysEvicted:  // limits over-admitted
      level = spdlog::level::err;
      break;
    case Kind::kBreakerOpened:
      level = spdlog::level::warn;
      break;
    case Kind::kEvictionPolicy:
      level = e.unsafe ? spdlog::level::err : spdlog::level::info;
      break;
    default:
      break;
  }
  if (e.suppressed == 0) {
    spdlog::log(level, "{}", e.message);
  } else {
    spdlog::log(level, "{} ({} similar events not logged)", e.message, e.suppressed);
  }
}

// SIGHUP: load everything again; anything wrong keeps the running config.
void Reload(const std::string& path, const std::string& store, const LoadOptions& load,
            RateLimitService& service, Metrics& metrics) {
  auto config = LoadConfig(path, load);
  if (!config) {
    spdlog::error("reload failed, keeping the running config: {}", config.error().message);
    metrics.RecordReload(false);
    return;
  }
  LogWarnings(**config, store);
  LogRegionFlags(**config, load.region);
  const std::string summary = Summary(**config);
  // The service counts the outcome of its own Reload; only a config that never reached it is
  // counted here.
  const std::shared_ptr<const Config> before = service.config();
  const std::shared_ptr<const Config> after = *config;
  if (auto r = service.Reload(std::move(*config)); !r) {
    spdlog::error("reload failed, keeping the running config: {}", r.error().message);
    return;
  }
  WarnRemovedDomains(*before, *after);
  spdlog::info("config reloaded from {}: {}", path, summary);
}

LoadOptions LoadOptionsFrom(const Flags& flags) {
  LoadOptions options;
  options.merge_domains = flags.merge_domain_config;
  options.default_algorithm = *sluice::ParseAlgorithm(flags.default_algorithm);  // checked
  if (flags.default_sync == "leased") options.default_sync.mode = sluice::SyncMode::kLeased;
  if (flags.default_sync == "batched") options.default_sync.mode = sluice::SyncMode::kBatched;
  options.region.region = flags.region;
  options.region.global_store = !flags.global_store.empty();
  return options;
}

ServiceOptions ServiceOptionsFrom(const Flags& flags) {
  ServiceOptions options;
  options.store = flags.store;
  options.memory_max_bytes = *sluice::util::ParseByteSize(flags.memory_max_bytes);    // checked
  options.local_cache_bytes = *sluice::util::ParseByteSize(flags.local_cache_bytes);  // checked
  // With Redis, what --memory-max-bytes leaves after the over-limit cache bounds the batched
  // limits' views (main() checked the cache fits in it). The usage views' share comes out of
  // the memory store's bound, or out of the batched views'.
  const size_t usage = UsageViewBytes(flags);
  options.batched_bytes =
      options.memory_max_bytes - std::min(options.memory_max_bytes, options.local_cache_bytes);
  options.batched_bytes -= std::min(options.batched_bytes, usage);
  if (flags.store == "memory") options.memory_max_bytes -= usage;
  options.redis_connections = flags.redis_connections;
  options.redis_connect_timeout_ms = flags.redis_connect_timeout_ms;
  options.redis_command_timeout_ms = flags.redis_command_timeout_ms;
  options.redis_breaker_failures = flags.redis_breaker_failures;
  options.redis_breaker_open_ms = flags.redis_breaker_open_ms;
  options.over_limit_hits =
      flags.over_limit_hits == "count" ? OverLimitHits::kCount : OverLimitHits::kDrop;
  options.region = flags.region;
  options.global_store = flags.global_store;
  return options;
}

// --check-config: the config, and every limit of it made by the store --store names, as serving
// would (the Redis store refuses limits beyond its exact range that the memory store takes).
// Neither Redis is contacted: the region's store connects lazily and decides what it accepts by
// itself, and no part is leased from the global store.
int CheckConfig(const Flags& flags) {
  auto checked = LoadConfig(flags.config, LoadOptionsFrom(flags));
  if (!checked) {
    std::fprintf(stderr, "%s\n", checked.error().message.c_str());
    return 1;
  }
  for (const std::string& w : (*checked)->warnings()) {
    std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  Metrics metrics;
  // No background work: nothing to watch (the process is about to exit), nor any part to lease
  // from the global store. A scheduler that is never advanced runs none.
  sluice::ManualClock idle;
  ServiceOptions options = ServiceOptionsFrom(flags);
  options.store_scheduler = std::make_shared<sluice::ManualScheduler>(idle);
  if (auto service = RateLimitService::Create(*checked, options, &metrics); !service) {
    std::fprintf(stderr, "%s (with --store %s)\n", service.error().message.c_str(),
                 sluice::RedactRedisAddress(flags.store).c_str());
    return 1;
  }
  std::printf("%s: ok with --store %s, %s\n", flags.config.c_str(),
              sluice::RedactRedisAddress(flags.store).c_str(), ConfigSummary(**checked).c_str());
  return 0;
}

int Run(const Flags& flags) {
  if (flags.check_config) return CheckConfig(flags);

  // Signals are taken synchronously by this thread (sigwait below): block them before any
  // other thread starts, so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error code, not a death
  RaiseFileLimit();

  auto config = LoadConfig(flags.config, LoadOptionsFrom(flags));
  if (!config) {
    spdlog::error("cannot load the config: {}", config.error().message);
    return 1;
  }
  LogWarnings(**config, flags.store);
  LogRegionFlags(**config, LoadOptionsFrom(flags).region);
  spdlog::info("config loaded from {}: {}", flags.config, Summary(**config));

  Metrics metrics(flags.near_limit_ratio);
  // One clock for the decisions and the usage views' buckets.
  const sluice::MonotonicClock clock;
  std::unique_ptr<UsageViews> usage;
  if (flags.usage_tracking == "on") {
    UsageOptions usage_options;
    usage_options.period = *sluice::ParseDuration(flags.usage_period);  // checked
    usage_options.near_limit_ratio = flags.near_limit_ratio;
    usage_options.max_bytes = UsageViewBytes(flags);
    usage_options.clock = &clock;
    usage = std::make_unique<UsageViews>(usage_options);
    metrics.SetUsageViews(usage.get());
    spdlog::info("usage views: period {}, near-limit ratio {}, {} limits tracked at most",
                 flags.usage_period, flags.near_limit_ratio, usage->max_limits());
  }
  ServiceOptions service_options = ServiceOptionsFrom(flags);
  service_options.clock = &clock;
  service_options.usage = usage.get();
  service_options.redis_events = LogRedisEvent;
  service_options.unchecked_warning = [](const std::string& message) {
    spdlog::warn("check: {}", message);
  };
  auto service = RateLimitService::Create(*config, service_options, &metrics);
  if (!service) {
    spdlog::error("cannot start the service: {}", service.error().message);
    return 1;
  }
  HeaderOptions headers;
  headers.legacy = flags.legacy_headers;

  HttpApiOptions api_options;
  api_options.admin_token = flags.admin_token;
  api_options.headers = headers;
  api_options.max_body_bytes = flags.http_max_body_bytes;
  api_options.usage = usage.get();
  const HttpApi api(service->get(), &metrics, api_options);

  std::unique_ptr<HttpServer> http;
  if (!Disabled(flags.http)) {
    auto started = HttpServer::Start(ListenerOptions(flags, flags.http),
                                     [&api](const HttpRequestView& r) { return api.Handle(r); });
    if (!started) {
      spdlog::error("{}", started.error().message);
      return 1;
    }
    http = std::move(*started);
    spdlog::info("http: listening on {} ({} threads, store {}, admin API {})", http->address(),
                 flags.threads, sluice::RedactRedisAddress(flags.store),
                 flags.admin_token.empty() ? "off" : "on");
  }

  // The forward-auth endpoint: a second listener on the same server machinery, with the HTTP
  // API's bounds and timeouts (its requests are a proxy's: headers, no body worth reading).
  const ForwardAuthApi forward_auth(service->get(), &metrics, {.headers = headers});
  std::unique_ptr<HttpServer> forward_auth_http;
  if (!Disabled(flags.forward_auth)) {
    auto started = HttpServer::Start(
        ListenerOptions(flags, flags.forward_auth),
        [&forward_auth](const HttpRequestView& r) { return forward_auth.Handle(r); });
    if (!started) {
      spdlog::error("forward-auth: {}", started.error().message);
      return 1;
    }
    forward_auth_http = std::move(*started);
    size_t declared = 0;
    for (const auto& [name, domain] : (*config)->domains()) declared += domain.forward_auth ? 1 : 0;
    spdlog::info("forward-auth: listening on {} ({} domains with a forward_auth section)",
                 forward_auth_http->address(), declared);
    if (declared == 0) {
      spdlog::warn(
          "forward-auth: no domain has a forward_auth section: every request to it is answered "
          "400 until a reload adds one");
    }
  }

  std::unique_ptr<GrpcServer> grpc;
  if (!Disabled(flags.grpc)) {
    GrpcServerOptions grpc_options;
    grpc_options.address = flags.grpc;
    grpc_options.threads = flags.threads;
    grpc_options.headers = headers;
    grpc_options.headers.set = *ParseHeaderSet(flags.grpc_response_headers);  // checked
    grpc_options.max_connections = flags.grpc_max_connections;
    grpc_options.max_concurrent_streams = flags.grpc_max_concurrent_streams;
    grpc_options.idle_timeout = std::chrono::milliseconds(flags.grpc_idle_timeout_ms);
    grpc_options.max_connection_age = std::chrono::milliseconds(flags.grpc_max_connection_age_ms);
    grpc_options.max_message_bytes = flags.grpc_max_message_bytes;
    grpc_options.shutdown_grace = std::chrono::milliseconds(flags.shutdown_grace_ms);
    auto started = GrpcServer::Start(grpc_options, **service);
    if (!started) {
      spdlog::error("{}", started.error().message);
      return 1;
    }
    grpc = std::move(*started);
    spdlog::info(
        "grpc: listening on port {} (envoy.service.ratelimit.v3.RateLimitService and "
        "grpc.health.v1.Health; at most {} connections, {} streams each; response headers {})",
        grpc->port(), flags.grpc_max_connections, flags.grpc_max_concurrent_streams,
        flags.grpc_response_headers);
    if (flags.legacy_headers && !http && !forward_auth_http &&
        flags.grpc_response_headers != "draft11") {
      spdlog::warn(
          "--legacy-headers has no effect: the HTTP API is off and gRPC answers carry "
          "the {} set (X-RateLimit-* come with draft11 only)",
          flags.grpc_response_headers);
    }
  }
  metrics.SetStoreGaugesSource([&service] {
    const sluice::StoreStats s = (*service)->StoreTotals();
    StoreGauges g{s.keys,
                  s.evictions,
                  s.bytes,
                  s.max_bytes,
                  s.server_eviction_watched,
                  s.server_eviction_unsafe,
                  s.server_evicted_keys,
                  s.over_limit_cache,
                  s.cached_decisions,
                  s.forwarded_decisions,
                  s.leased_decisions + s.local_decisions};
    g.batched = s.batched;
    g.batched_pending_hits = s.batched_pending_hits;
    g.batched_over_admitted_hits = s.batched_over_admitted_hits;
    g.region_sync_age_seconds = s.region_sync_age_seconds;
    for (const auto& l : (*service)->SyncedLimitStats()) {
      if (l.stats.region_leased) {
        g.regions.push_back({l.domain, l.metric_name, l.stats.region_share_units,
                             l.stats.region_global_leases, l.stats.region_cutoff_decisions});
      }
      if (l.mode == sluice::SyncMode::kExact) continue;
      if (l.mode == sluice::SyncMode::kLeased) {
        g.leases.push_back({l.domain, l.metric_name, l.stats.leases_taken, l.stats.lease_returns,
                            l.stats.leases_expired, l.stats.lease_units_held});
      } else {
        g.batched_limits.push_back({l.domain, l.metric_name, l.stats.batched_over_admitted_hits});
      }
    }
    return g;
  });

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Reload(flags.config, flags.store, LoadOptionsFrom(flags), **service, metrics);
      continue;
    }
    spdlog::info("{}: stopping (finishing requests in flight)",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    break;
  }
  // Not ready from here on: /readyz answers 503 and gRPC health NOT_SERVING while requests in
  // flight finish.
  (*service)->StartDraining();
  // The front ends drain side by side, each its own requests in flight (a held forward-auth or
  // gRPC answer goes out at once), so that none waits out another's grace first.
  std::vector<std::thread> stopping;
  if (http) stopping.emplace_back([&http] { http->Stop(); });
  if (forward_auth_http) stopping.emplace_back([&forward_auth_http] { forward_auth_http->Stop(); });
  if (grpc) stopping.emplace_back([&grpc] { grpc->Shutdown(); });
  for (std::thread& t : stopping) t.join();
  // A check still waiting on Redis when the grace ran out is answered by the store as it
  // closes, and that answer goes to the HTTP API and a server's io_context: close the store
  // now, while they exist, rather than after them in reverse declaration order.
  service->reset();
  metrics.SetUsageViews(nullptr);
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{
      "sluiced: the sluice rate limit server (HTTP JSON API and Envoy gRPC protocol).\n"
      "Every flag can also be set by the environment variable named after it."};
  app.add_option("--config", flags.config, "rate limit config: a YAML file or a directory")
      ->envname("SLUICE_CONFIG")
      ->required();
  app.add_option("--http", flags.http, "HTTP API address host:port, or off")
      ->envname("SLUICE_HTTP")
      ->capture_default_str();
  app.add_option("--grpc", flags.grpc, "Envoy gRPC address host:port, or off")
      ->envname("SLUICE_GRPC")
      ->capture_default_str();
  app.add_option("--forward-auth", flags.forward_auth,
                 "forward-auth endpoint for nginx auth_request, Caddy forward_auth, Traefik "
                 "ForwardAuth and Envoy ext_authz (HTTP): address host:port, or off; "
                 "docs/gateways.md")
      ->envname("SLUICE_FORWARD_AUTH")
      ->capture_default_str();
  app.add_option("--store", flags.store, "memory, redis://host:port or redis+cluster://host:port")
      ->envname("SLUICE_STORE")
      ->capture_default_str();
  app.add_option("--admin-token", flags.admin_token,
                 "bearer token of the admin API (off without one); prefer the env variable")
      ->envname("SLUICE_ADMIN_TOKEN");
  app.add_option("--threads", flags.threads, "I/O threads for HTTP and for gRPC")
      ->envname("SLUICE_THREADS")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error|off")
      ->envname("SLUICE_LOG_LEVEL")
      ->capture_default_str();
  app.add_option("--log-format", flags.log_format, "text|json")
      ->envname("SLUICE_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_flag("--check-config", flags.check_config, "validate the config, print why, exit 0/1")
      ->envname("SLUICE_CHECK_CONFIG");
  app.add_flag("--merge-domain-config", flags.merge_domain_config,
               "files naming the same domain add their rules to it (ratelimit's "
               "MERGE_DOMAIN_CONFIG); off: a domain in two files is an error")
      ->envname("SLUICE_MERGE_DOMAIN_CONFIG");
  app.add_option("--default-algorithm", flags.default_algorithm,
                 "the algorithm of a rule that names none (fixed_window: envoyproxy/ratelimit's)")
      ->envname("SLUICE_DEFAULT_ALGORITHM")
      ->check(CLI::IsMember({"token_bucket", "gcra", "leaky_bucket", "fixed_window",
                             "sliding_window_log", "sliding_window_counter"}))
      ->capture_default_str();
  app.add_option("--default-sync", flags.default_sync,
                 "how nodes on one Redis share a limit whose rule sets no sync: exact, leased "
                 "(lease_ttl 2s) or batched (interval 100ms); docs/redis.md")
      ->envname("SLUICE_DEFAULT_SYNC")
      ->check(CLI::IsMember({"exact", "leased", "batched"}))
      ->capture_default_str();
  app.add_option("--over-limit-hits", flags.over_limit_hits,
                 "how hits over a limit count where its rule does not say: drop (a refused "
                 "request takes nothing) or count (every hit counts, as envoyproxy/ratelimit)")
      ->envname("SLUICE_OVER_LIMIT_HITS")
      ->check(CLI::IsMember({"drop", "count"}))
      ->capture_default_str();
  app.add_flag("--legacy-headers", flags.legacy_headers,
               "also send X-RateLimit-Limit/-Remaining/-Reset (HTTP, forward-auth, and gRPC with "
               "draft11)")
      ->envname("SLUICE_LEGACY_HEADERS");
  app.add_option("--grpc-response-headers", flags.grpc_response_headers,
                 "headers a gRPC answer asks Envoy to add: draft11 (RateLimit-Policy, RateLimit, "
                 "Retry-After), upstream (envoyproxy/ratelimit's RateLimit-Limit/-Remaining/"
                 "-Reset) or off")
      ->envname("SLUICE_GRPC_RESPONSE_HEADERS")
      ->check(CLI::IsMember({"draft11", "upstream", "off"}))
      ->capture_default_str();
  app.add_option("--http-timeout-ms", flags.http_timeout_ms,
                 "time a client has to send each request (slow and idle clients are closed)")
      ->envname("SLUICE_HTTP_TIMEOUT_MS")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--http-max-connections", flags.http_max_connections,
                 "open HTTP connections at most; more are answered 503 and closed")
      ->envname("SLUICE_HTTP_MAX_CONNECTIONS")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--http-max-body-bytes", flags.http_max_body_bytes,
                 "largest POST /v1/check body; larger are answered 413 (default: the largest a "
                 "valid check can be)")
      ->envname("SLUICE_HTTP_MAX_BODY_BYTES")
      ->check(CLI::Range(size_t{1024}, size_t{64} << 20))
      ->capture_default_str();
  app.add_option("--shutdown-grace-ms", flags.shutdown_grace_ms,
                 "on SIGTERM (and gRPC connection age), how long requests in flight may take to "
                 "finish")
      ->envname("SLUICE_SHUTDOWN_GRACE_MS")
      ->check(CLI::Range(int64_t{0}, int64_t{600'000}))
      ->capture_default_str();
  app.add_option("--grpc-max-connections", flags.grpc_max_connections,
                 "open gRPC connections at most; more are closed at once")
      ->envname("SLUICE_GRPC_MAX_CONNECTIONS")
      ->check(CLI::Range(size_t{1}, size_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--grpc-max-concurrent-streams", flags.grpc_max_concurrent_streams,
                 "gRPC calls in flight per connection (HTTP/2 SETTINGS); clients queue more")
      ->envname("SLUICE_GRPC_MAX_CONCURRENT_STREAMS")
      ->check(CLI::Range(uint32_t{1}, uint32_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--grpc-idle-timeout-ms", flags.grpc_idle_timeout_ms,
                 "close a gRPC connection with no call for this long (0: never)")
      ->envname("SLUICE_GRPC_IDLE_TIMEOUT_MS")
      ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}))
      ->capture_default_str();
  app.add_option("--grpc-max-connection-age-ms", flags.grpc_max_connection_age_ms,
                 "send GOAWAY to a gRPC connection this old; its calls get --shutdown-grace-ms "
                 "(0: never)")
      ->envname("SLUICE_GRPC_MAX_CONNECTION_AGE_MS")
      ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}))
      ->capture_default_str();
  app.add_option("--grpc-max-message-bytes", flags.grpc_max_message_bytes,
                 "largest gRPC request; larger: RESOURCE_EXHAUSTED (default: the largest the "
                 "request bounds allow)")
      ->envname("SLUICE_GRPC_MAX_MESSAGE_BYTES")
      ->check(CLI::Range(size_t{1}, size_t{INT32_MAX}))
      ->capture_default_str();
  app.add_option("--redis-connections", flags.redis_connections,
                 "Redis: pipelined connections per server")
      ->envname("SLUICE_REDIS_CONNECTIONS")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--redis-connect-timeout-ms", flags.redis_connect_timeout_ms,
                 "Redis: time to connect (and authenticate)")
      ->envname("SLUICE_REDIS_CONNECT_TIMEOUT_MS")
      ->check(CLI::Range(int64_t{1}, int64_t{60'000}))
      ->capture_default_str();
  app.add_option("--redis-command-timeout-ms", flags.redis_command_timeout_ms,
                 "Redis: time for an answer; then the limit's failure mode decides")
      ->envname("SLUICE_REDIS_COMMAND_TIMEOUT_MS")
      ->check(CLI::Range(int64_t{1}, int64_t{60'000}))
      ->capture_default_str();
  app.add_option("--redis-breaker-failures", flags.redis_breaker_failures,
                 "Redis: consecutive failures that open a server's circuit breaker")
      ->envname("SLUICE_REDIS_BREAKER_FAILURES")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--redis-breaker-open-ms", flags.redis_breaker_open_ms,
                 "Redis: how long an open breaker refuses at once before one probe")
      ->envname("SLUICE_REDIS_BREAKER_OPEN_MS")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();

  app.add_option("--memory-max-bytes", flags.memory_max_bytes,
                 "memory store: the bound for all counters, override limits' included; "
                 "Redis: for the over-limit cache and the batched limits' views together "
                 "(bytes, or with Ki, Mi, Gi)")
      ->envname("SLUICE_MEMORY_MAX_BYTES")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            constexpr uint64_t kLeast = uint64_t{1} << 20;
            const auto bytes = sluice::util::ParseByteSize(text);
            if (!bytes) return bytes.error();
            if (*bytes < kLeast) return "'" + text + "' is below the least bound, 1Mi";
            return "";
          },
          "BYTES"))
      ->capture_default_str();
  CLI::Option* local_cache_bytes =
      app.add_option("--local-cache-bytes", flags.local_cache_bytes,
                     "Redis: the over-limit cache's memory bound, counted inside "
                     "--memory-max-bytes (bytes, or with Ki, Mi, Gi; 0: no cache)")
          ->envname("SLUICE_LOCAL_CACHE_BYTES")
          ->check(CLI::Validator(
              [](std::string& text) -> std::string {
                const auto bytes = sluice::util::ParseByteSize(text);
                if (!bytes) return bytes.error();
                if (*bytes != 0 && *bytes < 4096) {
                  return "'" + text + "' is below the least bound, 4Ki (0 turns the cache off)";
                }
                return "";
              },
              "BYTES"))
          ->capture_default_str();
  app.add_option("--usage-tracking", flags.usage_tracking,
                 "per-client usage views: distinct identities seen, near, over each limit and "
                 "their peak usage (sluice_limit_identities, GET /v1/usage): on or off")
      ->envname("SLUICE_USAGE_TRACKING")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--usage-period", flags.usage_period,
                 "the rolling period of the usage views (kept in 6 buckets), 1m to 7d")
      ->envname("SLUICE_USAGE_PERIOD")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            const auto d = sluice::ParseDuration(text);
            if (!d) return d.error().message;
            if (*d < std::chrono::minutes(1) || *d > std::chrono::hours(24 * 7)) {
              return "'" + text + "' is outside 1m to 7d";
            }
            return "";
          },
          "DURATION"))
      ->capture_default_str();
  app.add_option("--near-limit-ratio", flags.near_limit_ratio,
                 "the fraction of a limit used that counts as near it (sluice_near_limit_total, "
                 "the usage views' near state)")
      ->envname("SLUICE_NEAR_LIMIT_RATIO")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--region", flags.region,
                 "this node's region, for limits of scope: global (docs/regions.md); empty: "
                 "none, and such limits are refused")
      ->envname("SLUICE_REGION")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            const bool ok = !name.empty() && name.size() <= 64 &&
                            name.find_first_not_of(
                                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789_-.") == std::string::npos;
            return ok ? "" : "a region is 1 to 64 letters, digits, '_', '-' or '.'";
          },
          "NAME"))
      ->capture_default_str();
  app.add_option("--global-store", flags.global_store,
                 "redis://host:port every region reaches, where regions lease their parts of "
                 "limits with regions mode leased; empty: none")
      ->envname("SLUICE_GLOBAL_STORE")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!flags.global_store.empty() && flags.region.empty()) {
    std::fprintf(stderr,
                 "sluiced: --global-store (SLUICE_GLOBAL_STORE) needs --region (SLUICE_REGION): "
                 "a node leases its region's part\n");
    return 2;
  }
  // A setting must have its effect. The memory store has no cache in front of it; with Redis,
  // the counters are in Redis's memory and --memory-max-bytes bounds what sluiced keeps of
  // them: the over-limit cache, which must fit in it, and the batched limits' views, which get
  // what the cache leaves.
  const bool redis = flags.store != "memory";
  if (!redis && local_cache_bytes->count() > 0) {
    std::fprintf(stderr,
                 "sluiced: --local-cache-bytes (SLUICE_LOCAL_CACHE_BYTES) bounds the over-limit "
                 "cache in front of a Redis store; the memory store has none\n");
    return 2;
  }
  if (redis) {
    const uint64_t memory_max = *sluice::util::ParseByteSize(flags.memory_max_bytes);  // checked
    uint64_t cache = *sluice::util::ParseByteSize(flags.local_cache_bytes);            // checked
    if (local_cache_bytes->count() == 0) cache = std::min(cache, memory_max);
    if (cache > memory_max) {
      std::fprintf(stderr,
                   "sluiced: --local-cache-bytes %s is more than --memory-max-bytes %s, which it "
                   "is counted inside\n",
                   flags.local_cache_bytes.c_str(), flags.memory_max_bytes.c_str());
      return 2;
    }
    flags.local_cache_bytes = std::to_string(cache);
  }

  if (auto r = SetupLogging(flags.log_level, flags.log_format); !r) {
    std::fprintf(stderr, "sluiced: %s\n", r.error().message.c_str());
    return 2;
  }
  return Run(flags);
}
