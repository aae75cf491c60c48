// The Redis store: limits whose counters live in Redis (one server, or a Redis Cluster), every
// read-decide-write one atomic Lua script, so any number of sluice nodes share one exact count
// per key.
//
//   auto store = OpenRedisStore(*ParseRedisAddress("redis://127.0.0.1:6379"));
//   auto limiter = (*store)->MakeLimiter(spec, "api_per_key", /*fail_open=*/true);
//
// A sluice::Store (store.h). One store holds the connections (pipelined: concurrent decisions from
// many threads share round trips) and the circuit breaker, for any number of limits. Time is
// Redis's own clock (TIME, microseconds) unless use_server_time is false, when the `now` passed to
// Decide is used (replays and parity tests). Keys: <prefix>:{<limit id>:<escaped identity>}, every
// one with a TTL no longer than the time its counter takes to replenish. Thread-safe.
#ifndef SLUICE_REDIS_STORE_H_
#define SLUICE_REDIS_STORE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/limiter.h"
#include "sluice/scheduler.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice {

// What the Redis store tells its owner about Redis, for logs: state changes, not every call.
enum class RedisEventKind {
  kConnected,       // first answer from a server
  kConnectionLost,  // I/O error or timeout on a server that answered before (or never did)
  kConnectionRestored,
  kBreakerOpened,  // a server's circuit breaker opened: calls are refused at once
  kBreakerClosed,
  kAuthFailed,      // AUTH refused (wrong password or user), or NOAUTH: no password given
  kCommandError,    // Redis answered a script call with an error (OOM, WRONGTYPE, ...)
  kEvictionPolicy,  // first reading of a server's eviction policy, and every change of it
  kKeysEvicted,     // the server's evicted_keys grew
};

// The events of one kind for one server are rate-limited (RedisStoreOptions::event_interval):
// the first is passed on at once; later ones within the interval are held, and the latest of
// them is passed on when the interval has passed, with `suppressed` saying how many were not.
struct RedisEvent {
  RedisEventKind kind;
  std::string server;   // host:port, never credentials
  std::string message;  // one line for a log, beginning "redis host:port"
  bool unsafe = false;  // kEvictionPolicy: the policy can evict sluice's counters
  uint64_t suppressed = 0;
};

// Called on a connection's I/O thread, the store's monitor thread or a caller's: must be quick
// and must not call into the store.
using RedisEventHook = std::function<void(const RedisEvent&)>;

// TLS to Redis (rediss://, rediss+cluster://, rediss+sentinel://): docs/redis.md,
// docs/security.md.
struct RedisTlsOptions {
  bool enabled = false;      // set by ParseRedisAddress for the rediss schemes
  std::string ca_file = {};  // PEM CAs the server's certificate must chain to; empty: the system's
  std::string cert_file = {};  // client certificate (PEM, chain after it), for servers that ask
  std::string key_file = {};   // its private key; with cert_file
  // The name the server's certificate is verified against (and sent as SNI); empty: the
  // address's host, and for a cluster's nodes named by IP, the first seed's host. Sentinels are
  // verified against their own hosts; a master they name by IP against this, else the first
  // sentinel host name.
  std::string server_name = {};
  bool insecure_skip_verify = false;  // accept any certificate: encryption without identity
};

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Non-empty: a Redis Cluster reached through these "host:port" seeds (host and port unused).
  std::vector<std::string> cluster_seeds;
  // Non-empty: a Redis reached through this Unix socket (host and port unused); not with
  // cluster_seeds (a cluster's nodes name each other by host and port).
  std::string unix_path;
  // Non-empty: Redis Sentinel. These "host:port" sentinels are asked where the master named
  // sentinel_master is (host and port unused) and watched for its failovers (docs/redis.md,
  // "Sentinel"). user and password are the master's; sentinel_password the sentinels' own
  // (empty: no AUTH to the sentinels).
  std::vector<std::string> sentinels;
  std::string sentinel_master;
  std::string sentinel_password;
  std::string user;  // ACL user (AUTH user password); empty: AUTH password, or no AUTH
  std::string password;
  int db = 0;
  RedisTlsOptions tls;
  int connections = 2;  // pipelined connections per Redis server
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds command_timeout{50};
  bool use_server_time = true;
  std::string key_prefix = "sluice";
  size_t max_key_bytes = 1024;  // identities longer than this get kInvalidRequest
  // Circuit breaker, one per Redis server, shared by the store's limits: after this many
  // consecutive connection failures or timeouts, refuse at once for breaker_open_for, then let
  // one probe through.
  int breaker_failures = 5;
  std::chrono::milliseconds breaker_open_for{1000};
  const Clock* clock = nullptr;  // for the breaker and events; nullptr: a MonotonicClock of its own

  // The monitor: a round at once, then every monitor_interval (0: no monitor), that PINGs each
  // connection that had no answer since its last round (a connection Redis closed is re-made
  // before a request needs it, and a server found answering again closes its breaker), and reads
  // each server's eviction policy and evicted_keys (MonitorOnce).
  std::chrono::milliseconds monitor_interval{500};
  // Where the monitor runs; null: a ThreadScheduler of the store's own on its clock. Tests pass
  // a ManualScheduler: the monitor runs when they advance it (never: nothing connects until the
  // first request).
  std::shared_ptr<Scheduler> scheduler = nullptr;
  RedisEventHook on_event;  // empty: events are dropped
  std::chrono::milliseconds event_interval{10'000};

  // Used by MakeRedisLimiter only (RedisStore::MakeLimiter takes them per limit).
  std::string limit_id = "default";
  bool fail_open = true;  // when Redis cannot answer: admit (true) or reject (false)
};

struct RedisStoreStats {
  uint64_t requests = 0;           // commands written to Redis
  uint64_t batches = 0;            // writes; requests / batches is the pipelining factor
  uint64_t redirects = 0;          // cluster MOVED / ASK followed
  uint64_t retries = 0;            // cluster TRYAGAIN / CLUSTERDOWN / failover retries
  uint64_t map_refreshes = 0;      // cluster slot map reads
  uint64_t short_circuited = 0;    // calls refused at once by a node's open breaker
  uint64_t connection_errors = 0;  // calls failed by I/O errors or timeouts
  uint64_t refunds = 0;            // DecideAll: admissions given back after another slot said no
  uint64_t refund_failures = 0;    // ... that could not be given back (Redis did not answer)
};

class RedisStore : public Store {
 public:
  // A limit whose keys are <prefix>:{<options.id>:<identity>}. options.fail_open: when Redis
  // cannot answer (down, slow, breaker open), admit and mark the decision degraded; otherwise
  // reject.
  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override = 0;
  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec, std::string_view limit_id,
                                               bool fail_open) {
    return MakeLimiter(spec, LimiterOptions{.id = std::string(limit_id), .fail_open = fail_open});
  }

  // Store::DecideAll: checks whose keys share a hash slot (on a standalone Redis: all of them)
  // are one atomic script call, so there the all-or-nothing guarantee is exact. A cluster's
  // slots are one call each; when one rejects, the others' admissions are refunded by a second
  // call (docs/redis.md states what that guarantees).
  //
  // Store::DecideAllAsync: `done` runs on a Redis connection's I/O thread, or on the caller's
  // thread before DecideAllAsync returns when nothing needs Redis (every check decided at once,
  // or refused by an open breaker) or the store is a cluster (its transport is synchronous, see
  // docs/redis.md).

  // Whether Redis answers a PING now; Store::Ready(). Bounded by the command timeout. An
  // eviction policy that can drop counters does not make the store unready (docs/redis.md,
  // "Redis settings"): every replica shares the one Redis, so not-ready would take the whole
  // service down over what the metrics and the log already report.
  virtual bool Ping() = 0;
  bool Ready() override { return Ping(); }

  // One round of the monitor now, on the caller's thread (tests; the monitor thread runs the
  // same): PINGs idle connections without waiting for them, reads eviction settings and
  // evicted_keys (waiting, bounded by the command timeout), passes on held events that are due.
  virtual void MonitorOnce() = 0;

  // Store::Stats() counts failed and short-circuited calls; these are the connections' own.
  virtual RedisStoreStats RedisStats() const = 0;
};

// Parses "redis://[user:password@]host:port[/db]",
// "redis+cluster://[user:password@]host:port[,host:port...]" and
// "redis+unix://[user:password@]/path/to/redis.sock[?db=N]"
// "rediss://" and "rediss+cluster://" are the same over TLS (tls.enabled; the files are the
// caller's to set).
// "redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]" (or rediss+sentinel://)
// into options (others default).
Result<RedisStoreOptions> ParseRedisAddress(std::string_view address);

// The address as logs and error messages may show it: a user and password replaced by "***"
// ("redis://***@host:port/0", "redis+unix://***@/run/redis/redis.sock"); anything else
// ("memory", an address without credentials) as it is.
std::string RedactRedisAddress(std::string_view address);

// Connects lazily: a store can be opened while Redis is down, and its limits apply their
// failure policy until it is back.
Result<std::shared_ptr<RedisStore>> OpenRedisStore(const RedisStoreOptions& options);

// A store of its own for one limit (options.limit_id, options.fail_open).
Result<std::unique_ptr<Limiter>> MakeRedisLimiter(const LimitSpec& spec,
                                                  const RedisStoreOptions& options);

// "<prefix>:{<limit id>:<identity>}" with '{', '}', '%', ':' and bytes outside printable ASCII
// written as %XX, so no identity can leave its hash tag or its namespace.
std::string RedisKeyFor(std::string_view key_prefix, std::string_view limit_id,
                        std::string_view identity);
inline std::string RedisKeyFor(const RedisStoreOptions& options, std::string_view identity) {
  return RedisKeyFor(options.key_prefix, options.limit_id, identity);
}

}  // namespace sluice

#endif  // SLUICE_REDIS_STORE_H_
