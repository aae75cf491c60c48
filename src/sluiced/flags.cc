#include "sluiced/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "http/check_json.h"
#include "sluice/algorithm.h"
#include "sluice/duration.h"
#include "sluice/quota_sync.h"
#include "sluiced/store_file.h"
#include "util/byte_size.h"
#include "util/unix_socket.h"

namespace sluice::server {
namespace {

// The flags as CLI11 writes them: the help text shows these defaults, and the validators check
// the text, so that Settings can take each value as already valid.
struct Flags {
  std::string config;
  std::string http = "127.0.0.1:8080";
  std::string grpc = "127.0.0.1:8081";
  std::string forward_auth = "off";
  std::string unix_socket_mode = "0660";
  std::string unix_socket_group;  // empty: the process's own
  std::string store = "memory";
  std::string admin_token;
  std::string api_tokens;
  int threads = std::max(1u, std::thread::hardware_concurrency());
  std::string log_level = "info";
  std::string log_format = "text";
  bool check_config = false;
  bool merge_domain_config = false;
  std::string over_limit_hits = "drop";
  std::string default_algorithm = "token_bucket";
  std::string default_sync = "exact";
  bool legacy_headers = false;
  std::string grpc_response_headers = "draft11";
  int64_t http_timeout_ms = 10'000;
  size_t http_max_connections = 1024;
  size_t http_max_body_bytes = MaxCheckBodyBytes();
  int64_t shutdown_grace_ms = 10'000;
  size_t grpc_max_connections = GrpcServerOptions{}.max_connections;
  uint32_t grpc_max_concurrent_streams = GrpcServerOptions{}.max_concurrent_streams;
  int64_t grpc_idle_timeout_ms = GrpcServerOptions{}.idle_timeout.count();
  int64_t grpc_max_connection_age_ms = GrpcServerOptions{}.max_connection_age.count();
  size_t grpc_max_message_bytes = GrpcServerOptions{}.max_message_bytes;
  std::string grpc_reflection = "on";
  int redis_connections = 4;
  int64_t redis_connect_timeout_ms = 200;
  int64_t redis_command_timeout_ms = 50;
  int redis_breaker_failures = 5;
  int64_t redis_breaker_open_ms = 1000;
  std::string redis_sentinel_password;
  std::string memory_max_bytes = "512Mi";
  std::string local_cache_bytes = "64Mi";
  std::string usage_tracking = "on";
  std::string usage_period = "1h";
  double near_limit_ratio = 0.9;
  std::string region;        // empty: none (limits of scope global are then refused)
  std::string global_store;  // empty: none (regions mode leased is then refused)
  TlsFlags tls;
  // TLS to Redis (rediss://) and the store addresses read from files (store_file.h).
  std::string store_file;
  std::string global_store_file;
  std::string redis_tls_ca;
  std::string redis_tls_cert;
  std::string redis_tls_key;
  std::string redis_tls_server_name;
  bool redis_tls_insecure_skip_verify = false;
  std::string state_dir;
  std::string snapshot_interval = "10s";
};

// What the config is, where sluiced listens, how it answers, how it logs.
void AddServingFlags(CLI::App& app, Flags& flags) {
  app.add_option("--config", flags.config, "rate limit config: a YAML file or a directory")
      ->envname("SLUICE_CONFIG")
      ->required();
  app.add_option("--http", flags.http, "HTTP API address host:port, unix:/path, or off")
      ->envname("SLUICE_HTTP")
      ->capture_default_str();
  app.add_option("--grpc", flags.grpc, "Envoy gRPC address host:port, unix:/path, or off")
      ->envname("SLUICE_GRPC")
      ->capture_default_str();
  app.add_option("--forward-auth", flags.forward_auth,
                 "forward-auth endpoint for nginx auth_request, Caddy forward_auth, Traefik "
                 "ForwardAuth and Envoy ext_authz (HTTP): address host:port, unix:/path, or off; "
                 "docs/gateways.md")
      ->envname("SLUICE_FORWARD_AUTH")
      ->capture_default_str();
  app.add_option("--unix-socket-mode", flags.unix_socket_mode,
                 "permissions (octal) of the listeners' Unix socket files; docs/security.md")
      ->envname("SLUICE_UNIX_SOCKET_MODE")
      ->check([](const std::string& v) {
        auto mode = util::ParseSocketMode(v);
        return mode ? std::string() : mode.error();
      })
      ->capture_default_str();
  app.add_option("--unix-socket-group", flags.unix_socket_group,
                 "group of the listeners' Unix socket files (default: the process's own)")
      ->envname("SLUICE_UNIX_SOCKET_GROUP");
  app.add_option("--store", flags.store,
                 "memory, redis://host:port, redis+cluster://host:port, "
                 "redis+sentinel://host:port[,host:port...]/MASTER or redis+unix:///path "
                 "(rediss: over TLS)")
      ->envname("SLUICE_STORE")
      ->capture_default_str();
  app.add_option("--admin-token", flags.admin_token,
                 "bearer token of the admin API (off without one); prefer the env variable")
      ->envname("SLUICE_ADMIN_TOKEN");
  app.add_option("--api-tokens", flags.api_tokens,
                 "YAML file of the clients that may check, each with a token_sha256 or a client "
                 "certificate san and its domains; reloaded on SIGHUP; docs/security.md")
      ->envname("SLUICE_API_TOKENS");
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
  app.add_option("--grpc-reflection", flags.grpc_reflection,
                 "gRPC server reflection (grpc.reflection.v1alpha, for grpcurl list/describe): "
                 "on or off")
      ->envname("SLUICE_GRPC_REFLECTION")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
}

// The front ends' bounds and timeouts, and the Redis store's pool, timeouts and breaker.
void AddBoundsFlags(CLI::App& app, Flags& flags) {
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
  app.add_option("--redis-sentinel-password", flags.redis_sentinel_password,
                 "Redis: the sentinels' own password, for redis+sentinel:// (the address's "
                 "password is the master's)")
      ->envname("SLUICE_REDIS_SENTINEL_PASSWORD");
}

// Memory, usage views and regions; returns --local-cache-bytes, whose presence counts.
CLI::Option* AddMemoryFlags(CLI::App& app, Flags& flags) {
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
  return local_cache_bytes;
}

// TLS to Redis, and the store addresses read from files (docs/redis.md, docs/security.md).
void AddRedisTlsFlags(CLI::App& app, Flags& flags) {
  CLI::Option* store = app.get_option("--store");
  CLI::Option* global_store = app.get_option("--global-store");
  app.add_option("--store-file", flags.store_file,
                 "read --store from this file (one line; not readable by others), so that no "
                 "Redis password is in the arguments or the environment")
      ->envname("SLUICE_STORE_FILE")
      ->excludes(store);
  app.add_option("--global-store-file", flags.global_store_file,
                 "read --global-store from this file, as --store-file")
      ->envname("SLUICE_GLOBAL_STORE_FILE")
      ->excludes(global_store);
  app.add_option("--redis-tls-ca", flags.redis_tls_ca,
                 "rediss://: the CAs (PEM) the Redis server's certificate must chain to; "
                 "default: the system's")
      ->envname("SLUICE_REDIS_TLS_CA");
  app.add_option("--redis-tls-cert", flags.redis_tls_cert,
                 "rediss://: client certificate (PEM) for servers that require one")
      ->envname("SLUICE_REDIS_TLS_CERT");
  app.add_option("--redis-tls-key", flags.redis_tls_key,
                 "rediss://: the client certificate's private key (PEM)")
      ->envname("SLUICE_REDIS_TLS_KEY");
  app.add_option("--redis-tls-server-name", flags.redis_tls_server_name,
                 "rediss://: the name the server's certificate must carry (and SNI); default: "
                 "the address's host, and for cluster nodes or a sentinel's master named by IP, "
                 "the first seed's (sentinel's) host name")
      ->envname("SLUICE_REDIS_TLS_SERVER_NAME");
  app.add_flag("--redis-tls-insecure-skip-verify", flags.redis_tls_insecure_skip_verify,
               "rediss://: accept any server certificate (encryption without knowing who "
               "answers; logged as a warning at every start)")
      ->envname("SLUICE_REDIS_TLS_INSECURE_SKIP_VERIFY");
}

// --store-file and --global-store-file into the addresses; 0, or 2 with the message printed.
int ReadStoreFiles(Flags& flags) {
  const std::pair<std::string*, const std::string*> files[] = {
      {&flags.store, &flags.store_file}, {&flags.global_store, &flags.global_store_file}};
  for (const auto& [address, file] : files) {
    if (file->empty()) continue;
    auto text = ReadStoreFile(*file);
    if (!text) {
      std::fprintf(stderr, "sluiced: --%sstore-file: %s\n",
                   address == &flags.store ? "" : "global-", text.error().message.c_str());
      return 2;
    }
    *address = std::move(*text);
  }
  if (flags.redis_tls_cert.empty() != flags.redis_tls_key.empty()) {
    std::fprintf(stderr,
                 "sluiced: --redis-tls-cert and --redis-tls-key go together (a client "
                 "certificate and its key)\n");
    return 2;
  }
  return 0;
}

// How --memory-max-bytes is shared out, computed here only. The memory store takes all of it;
// with Redis, the counters are in Redis's memory and the bound covers what sluiced keeps of them:
// the over-limit cache, which must fit in it, and the batched limits' views, which get what the
// cache leaves. The usage views take a sixteenth of what the store leaves in this process (all
// of it with the memory store; what the over-limit cache leaves with Redis), out of the memory
// store's bound or out of the batched views'.
struct MemoryBudget {
  size_t memory_store = 0;  // the memory store's bound
  size_t local_cache = 0;   // Redis: the over-limit cache's
  size_t batched = 0;       // Redis: the batched limits' views'
  size_t usage_views = 0;   // 0: usage tracking off
};

MemoryBudget ComputeMemoryBudget(size_t memory_max, size_t cache, bool memory_store,
                                 bool usage_tracking) {
  MemoryBudget b;
  if (usage_tracking) {
    const size_t in_process = memory_store ? 0 : cache;
    b.usage_views = (memory_max - std::min(memory_max, in_process)) / 16;
  }
  b.local_cache = cache;
  b.batched = memory_max - std::min(memory_max, cache);
  b.batched -= std::min(b.batched, b.usage_views);
  b.memory_store = memory_store ? memory_max - b.usage_views : memory_max;
  return b;
}

// --state-dir and --snapshot-interval: the memory store's counters across restarts.
CLI::Option* AddStateFlags(CLI::App& app, Flags& flags) {
  app.add_option("--state-dir", flags.state_dir,
                 "directory where the memory store keeps its counters across restarts (a "
                 "snapshot every --snapshot-interval and at shutdown; locked: one sluiced a "
                 "directory); docs/quotas.md")
      ->envname("SLUICE_STATE_DIR");
  return app
      .add_option("--snapshot-interval", flags.snapshot_interval,
                  "how often --state-dir's snapshot is written, 10ms to 1h")
      ->envname("SLUICE_SNAPSHOT_INTERVAL")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            const auto d = sluice::ParseDuration(text);
            if (!d) return d.error().message;
            if (*d < std::chrono::milliseconds(10) || *d > std::chrono::hours(1)) {
              return "'" + text + "' is outside 10ms to 1h";
            }
            return "";
          },
          "DURATION"))
      ->capture_default_str();
}

// --state-dir keeps the memory store's counters; Redis keeps its own. Given on the command line
// with another store, the flags are refused; given by the environment alone (the Debian unit sets
// SLUICE_STATE_DIR for every store), they are ignored with a warning, so that a unit pointed at
// Redis in /etc/default/sluiced still starts. Clears flags.state_dir when ignored.
int CheckStateFlags(Flags& flags, bool interval_set, bool on_command_line) {
  if (flags.state_dir.empty() && !interval_set) return 0;
  if (flags.store != "memory" || !flags.global_store.empty()) {
    if (!on_command_line) {
      std::fprintf(stderr,
                   "sluiced: warning: SLUICE_STATE_DIR and SLUICE_SNAPSHOT_INTERVAL are ignored: "
                   "they keep the memory store's counters, and this store keeps its own\n");
      flags.state_dir.clear();
      return 0;
    }
    std::fprintf(stderr,
                 "sluiced: --state-dir and --snapshot-interval (SLUICE_STATE_DIR, "
                 "SLUICE_SNAPSHOT_INTERVAL) keep the memory store's counters across restarts; "
                 "they need --store memory without --global-store\n");
    return 2;
  }
  if (flags.state_dir.empty()) {
    std::fprintf(stderr,
                 "sluiced: --snapshot-interval (SLUICE_SNAPSHOT_INTERVAL) needs --state-dir "
                 "(SLUICE_STATE_DIR): the directory the snapshots go to\n");
    return 2;
  }
  return 0;
}

// Whether argv names one of the flags (as "--flag VALUE" or "--flag=VALUE").
bool OnCommandLine(int argc, char** argv, std::initializer_list<std::string_view> names) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    for (std::string_view name : names) {
      if (arg == name ||
          (arg.starts_with(name) && arg.size() > name.size() && arg[name.size()] == '=')) {
        return true;
      }
    }
  }
  return false;
}

// The checks that span flags (each flag's own range was CLI11's): 0, or 2 with the message
// printed. A setting must have its effect: the memory store has no cache in front of it, and
// the over-limit cache is counted inside --memory-max-bytes. Sets `cache` to the over-limit
// cache's bound (its default, 64Mi, shrinks to a smaller --memory-max-bytes).
int CheckCombinations(const Flags& flags, bool cache_set, uint64_t& cache) {
  if (!flags.global_store.empty() && flags.region.empty()) {
    std::fprintf(stderr,
                 "sluiced: --global-store (SLUICE_GLOBAL_STORE) needs --region (SLUICE_REGION): "
                 "a node leases its region's part\n");
    return 2;
  }
  const bool redis = flags.store != "memory";
  if (!redis && cache_set) {
    std::fprintf(stderr,
                 "sluiced: --local-cache-bytes (SLUICE_LOCAL_CACHE_BYTES) bounds the over-limit "
                 "cache in front of a Redis store; the memory store has none\n");
    return 2;
  }
  cache = *util::ParseByteSize(flags.local_cache_bytes);  // checked by its validator
  if (!redis) return 0;
  const uint64_t memory_max = *util::ParseByteSize(flags.memory_max_bytes);  // checked
  if (!cache_set) cache = std::min(cache, memory_max);
  if (cache > memory_max) {
    std::fprintf(stderr,
                 "sluiced: --local-cache-bytes %s is more than --memory-max-bytes %s, which it "
                 "is counted inside\n",
                 flags.local_cache_bytes.c_str(), flags.memory_max_bytes.c_str());
    return 2;
  }
  return 0;
}

LoadOptions LoadOptionsFrom(const Flags& flags) {
  LoadOptions options;
  options.merge_domains = flags.merge_domain_config;
  options.default_algorithm = *ParseAlgorithm(flags.default_algorithm);  // checked: IsMember
  if (flags.default_sync == "leased") options.default_sync.mode = SyncMode::kLeased;
  if (flags.default_sync == "batched") options.default_sync.mode = SyncMode::kBatched;
  options.region.region = flags.region;
  options.region.global_store = !flags.global_store.empty();
  return options;
}

// `listen` as an address, or nullopt for a listener that is off ("off" or empty).
std::optional<std::string> Listener(const std::string& listen) {
  if (listen.empty() || listen == "off") return std::nullopt;
  return listen;
}

void SetFrontEnds(const Flags& flags, Settings& s) {
  s.http = Listener(flags.http);
  s.forward_auth = Listener(flags.forward_auth);
  s.grpc = Listener(flags.grpc);
  s.threads = flags.threads;
  s.admin_token = flags.admin_token;
  s.api_tokens = flags.api_tokens;
  s.headers.legacy = flags.legacy_headers;
  // The HTTP API and the forward-auth endpoint are two listeners with the same bounds and
  // timeouts: one place says which flags make them.
  s.listener.threads = flags.threads;
  s.listener.max_connections = flags.http_max_connections;
  s.listener.max_body_bytes = flags.http_max_body_bytes;
  s.listener.request_timeout = std::chrono::milliseconds(flags.http_timeout_ms);
  s.listener.shutdown_grace = std::chrono::milliseconds(flags.shutdown_grace_ms);
  const util::UnixSocketOptions unix_socket{
      .mode = *util::ParseSocketMode(flags.unix_socket_mode),  // checked by its validator
      .group = flags.unix_socket_group};
  s.listener.unix_socket = unix_socket;
  GrpcServerOptions& g = s.grpc_options;
  g.threads = flags.threads;
  g.headers = s.headers;
  g.headers.set = *ParseHeaderSet(flags.grpc_response_headers);  // checked: IsMember
  g.max_connections = flags.grpc_max_connections;
  g.max_concurrent_streams = flags.grpc_max_concurrent_streams;
  g.idle_timeout = std::chrono::milliseconds(flags.grpc_idle_timeout_ms);
  g.max_connection_age = std::chrono::milliseconds(flags.grpc_max_connection_age_ms);
  g.max_message_bytes = flags.grpc_max_message_bytes;
  g.reflection = flags.grpc_reflection == "on";
  g.shutdown_grace = std::chrono::milliseconds(flags.shutdown_grace_ms);
  g.unix_socket = unix_socket;
}

void SetStore(const Flags& flags, const MemoryBudget& budget, Settings& s) {
  s.store = flags.store;
  s.memory_store = flags.store == "memory";
  OpenStoreOptions& o = s.store_options;
  o.memory.max_bytes = budget.memory_store;
  o.local_cache_bytes = budget.local_cache;
  o.batched_bytes = budget.batched;
  o.redis_connections = flags.redis_connections;
  o.redis_connect_timeout = std::chrono::milliseconds(flags.redis_connect_timeout_ms);
  o.redis_command_timeout = std::chrono::milliseconds(flags.redis_command_timeout_ms);
  o.redis_breaker_failures = flags.redis_breaker_failures;
  o.redis_breaker_open_for = std::chrono::milliseconds(flags.redis_breaker_open_ms);
  o.redis_sentinel_password = flags.redis_sentinel_password;
  o.region = flags.region;
  o.global_store = flags.global_store;
  o.redis_tls.ca_file = flags.redis_tls_ca;
  o.redis_tls.cert_file = flags.redis_tls_cert;
  o.redis_tls.key_file = flags.redis_tls_key;
  o.redis_tls.server_name = flags.redis_tls_server_name;
  o.redis_tls.insecure_skip_verify = flags.redis_tls_insecure_skip_verify;
  s.over_limit_hits =
      flags.over_limit_hits == "count" ? OverLimitHits::kCount : OverLimitHits::kDrop;
}

Settings SettingsFrom(const Flags& flags, uint64_t cache) {
  Settings s;
  s.config = flags.config;
  s.load = LoadOptionsFrom(flags);
  s.check_config = flags.check_config;
  s.log_level = flags.log_level;
  s.log_format = flags.log_format;
  SetFrontEnds(flags, s);
  const bool usage_tracking = flags.usage_tracking == "on";
  const MemoryBudget budget =
      ComputeMemoryBudget(*util::ParseByteSize(flags.memory_max_bytes),  // checked
                          cache, flags.store == "memory", usage_tracking);
  SetStore(flags, budget, s);
  s.near_limit_ratio = flags.near_limit_ratio;
  s.usage_period = flags.usage_period;
  s.state_dir = flags.state_dir;
  s.snapshot_interval = *ParseDuration(flags.snapshot_interval);  // checked
  if (usage_tracking) {
    s.usage = UsageOptions{.period = *ParseDuration(flags.usage_period),  // checked
                           .near_limit_ratio = flags.near_limit_ratio,
                           .max_bytes = budget.usage_views};
  }
  return s;
}

}  // namespace

std::expected<Settings, int> ParseFlags(int argc, char** argv) {
  Flags flags;
  CLI::App app{
      "sluiced: the sluice rate limit server (HTTP JSON API and Envoy gRPC protocol).\n"
      "Every flag can also be set by the environment variable named after it."};
  AddServingFlags(app, flags);
  AddBoundsFlags(app, flags);
  CLI::Option* local_cache_bytes = AddMemoryFlags(app, flags);
  AddTlsFlags(app, flags.tls);
  AddRedisTlsFlags(app, flags);
  CLI::Option* snapshot_interval = AddStateFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return std::unexpected(app.exit(e));
  }
  if (int code = ReadStoreFiles(flags); code != 0) return std::unexpected(code);
  if (int code = CheckStateFlags(flags, snapshot_interval->count() > 0,
                                 OnCommandLine(argc, argv, {"--state-dir", "--snapshot-interval"}));
      code != 0) {
    return std::unexpected(code);
  }
  uint64_t cache = 0;
  if (int code = CheckCombinations(flags, local_cache_bytes->count() > 0, cache); code != 0) {
    return std::unexpected(code);
  }
  auto tls = TlsOptionsFrom(flags.tls);
  if (!tls) return std::unexpected(tls.error());
  Settings settings = SettingsFrom(flags, cache);
  settings.tls = std::move(*tls);
  return settings;
}

}  // namespace sluice::server
