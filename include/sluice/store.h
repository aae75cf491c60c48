// Store: where the counters of many limits live -- the embedded memory store, Redis, a Redis
// Cluster, or a layer in front of another store. This is the one seam between sluice's service
// and its backends: the service makes every limiter through it, decides every request through
// it and asks it whether it is ready; nothing above it knows which store it is.
//
//   auto store = OpenStore("redis://127.0.0.1:6379", {});      // open_store.h
//   auto per_key = (*store)->MakeLimiter(spec, {.id = "api_per_key"});
//   const LimitCheck checks[] = {{per_key->get(), "api_key=k1", 1}};
//   Decision out[1];
//   (*store)->DecideAll(checks, clock.Now(), out);
//
// A store that wraps another one makes its own limiters (holding the inner store's) and hands
// the inner store only limiters the inner store made. A limiter knows which store made it
// (Limiter::owner()); a store refuses, as kInvalidRequest, a limiter that another store made.
// Implementations are thread-safe.
#ifndef SLUICE_STORE_H_
#define SLUICE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/limiter.h"
#include "sluice/permits.h"
#include "sluice/quota_sync.h"
#include "sluice/region_scope.h"
#include "sluice/stats_sink.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice {

// How one limit is kept in its store.
struct LimiterOptions {
  // Names the limit's counters where several nodes share them (Redis keys
  // <prefix>:{<id>:<identity>}): limits with the same id share counters. The memory store,
  // whose counters are its own, ignores it.
  std::string id = "default";
  // When the store cannot answer (Redis down, slow, its breaker open): admit (true) or reject
  // (false); either way the decision is marked degraded. Stores that cannot fail ignore it.
  bool fail_open = true;
  // How many limits share a store's memory bound: a store with one (the memory store) gives
  // this limiter an equal part of what it keeps for such limits. Others ignore it.
  size_t limits_sharing_memory = 1;
  // Made for requests rather than for the config (Envoy's per-request `limit` overrides, which
  // any client can vary): a store with a memory bound keeps such limiters in a smaller part of
  // it of their own, so clients cannot take the configured limits' memory, and makes at most
  // MaxTransientLimiters() of them at once.
  bool transient = false;
  // How nodes share this limit. Stores without shared counters (the memory store) ignore it;
  // the Redis store honours it behind the layers OpenStore puts in front of it.
  QuotaSync sync = {};
  // Orders this limit's spec among the specs nodes made limiters of the same id with: when the
  // limit changes, nodes reload one after another, and a store whose counters are shared (Redis)
  // records with each counter the spec and generation it was written under, carries a counter
  // of an older generation over to this spec and decides one of a newer generation under the
  // spec it records (docs/quotas.md, "Changing a limit mid-period"). The service gives the
  // microsecond (its clock's: wall time) at which it installed the spec. Others ignore it.
  int64_t spec_generation = 0;
  // How regions share this limit (docs/regions.md). The spec a store is given is already this
  // region's static part; the region layer (region_store.h) moves a leased limit's part, and
  // every other store ignores it.
  RegionScope region = {};
};

// Whether a request whose checks got the decisions `out` is refused: when any check that is not
// a quota check is not allowed, or when it has quota checks and none of them is allowed. Every
// store applies this rule (src/store/give_back.h), and so does the service.
bool RequestRefused(std::span<const LimitCheck> checks, std::span<const Decision> out);

// The generic store families of /metrics from a store's Stats(): counters held, evictions and,
// for a store with a memory bound (max_bytes > 0), its accounted bytes and that bound.
void ReportStoreStats(const StoreStats& stats, StatsSink& sink);

class Store {
 public:
  virtual ~Store() = default;

  // A limiter for `spec` whose counters live in this store. The store must outlive it.
  virtual Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                                       const LimiterOptions& options) = 0;

  // Decides one request against several limits, all or nothing. out[i] (out.size() >=
  // checks.size()) is checks[i]'s own verdict, decided at `now` (a store with a clock of its own,
  // such as Redis's, uses that instead). When any check is not allowed (over its limit,
  // invalid, or failed closed), no limit keeps the quota this request took, and the `remaining`
  // of those that allowed is reported as after the give-back. A degraded admission (fail-open)
  // took nothing and gives nothing back. The same limiter and key may appear more than once:
  // each check takes its own cost. A null limiter, or one another store made, is
  // kInvalidRequest. docs/algorithms.md ("Refunds") and docs/redis.md say how exact the
  // give-back is for each store.
  virtual void DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                         std::span<Decision> out) = 0;

  using DecideAllCallback = std::function<void(std::span<const Decision>)>;

  // DecideAll without waiting: the same verdicts, delivered to `done` (one decision per check,
  // in order) exactly once. A store that decides in memory calls `done` on the caller's thread
  // before DecideAllAsync returns; a remote store may call it on its I/O thread, before or
  // after DecideAllAsync returns. `checks` and their keys are read before DecideAllAsync
  // returns. `done` must not block; it may call DecideAllAsync again.
  virtual void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                              DecideAllCallback done) = 0;

  // Whether the store can decide now: always for the memory store; for Redis, whether it
  // answers a PING (bounded by the command timeout). Readiness probes (HTTP /readyz, and gRPC
  // health) all come from here.
  virtual bool Ready() = 0;

  // Summed over every limiter this store has made that is still alive: counters held, memory,
  // evictions, expirations, failed and short-circuited calls.
  virtual StoreStats Stats() const = 0;

  // Reports the store-wide series of this store's own (a layer: after those of the store it
  // wraps) to `sink`, for /metrics. The generic counts of Stats() are ReportStoreStats's; the
  // per-limit series are Limiter::ReportStats's. Default: nothing.
  virtual void ReportStats(StatsSink& sink) const { (void)sink; }

  // How many transient limiters (LimiterOptions::transient) can be alive at once. Beyond it
  // MakeLimiter refuses one until another is destroyed: the caller drops one it holds (its
  // least recently used) first. Stores without a memory bound have no such limit.
  virtual size_t MaxTransientLimiters() const { return SIZE_MAX; }

  // A concurrency limit (permits.h) whose permits live in this store, named options.id (the
  // limit's id, as for MakeLimiter; fail_open is its failure mode). Default: refused, for a store
  // that cannot keep permits atomically.
  virtual Result<std::unique_ptr<PermitPool>> MakePermitPool(const PermitSpec& spec,
                                                             const LimiterOptions& options) {
    (void)spec;
    (void)options;
    return MakeError("this store cannot hold concurrency permits");
  }
};

}  // namespace sluice

#endif  // SLUICE_STORE_H_
