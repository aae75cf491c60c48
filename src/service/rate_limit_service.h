// The heart of sluiced: matches each request descriptor to its configured limit, decides it
// in the store (all of one request's limits together: a request rejected by one limit takes
// no quota from the others), applies the limit's mode (enforce, shadow, soft) and failure mode,
// and records metrics. Both front ends (HTTP JSON and Envoy gRPC) call CheckAsync().
//
//   auto store = OpenStore("memory");                  // sluice/open_store.h
//   auto service = RateLimitService::Create(config, *store, options, &metrics);
//   Result<CheckResponse> r = (*service)->Check(request);  // error: a bad request (400)
//
// The config is swapped atomically by Reload(); a Check() in flight finishes on the config it
// started with. Limits keep their counters across a reload when their id and spec are
// unchanged. Thread-safe.
#ifndef SLUICE_SERVICE_RATE_LIMIT_SERVICE_H_
#define SLUICE_SERVICE_RATE_LIMIT_SERVICE_H_

#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "metrics/metrics.h"
#include "service/check.h"
#include "sluice/clock.h"
#include "sluice/stats_sink.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice::server {

struct ServiceOptions {
  // How hits over a limit count where its rule does not say (over_limit_hits): drop (a refused
  // request takes nothing) or count (every hit is charged, as envoyproxy/ratelimit counts).
  OverLimitHits over_limit_hits = OverLimitHits::kDrop;
  const Clock* clock = nullptr;  // nullptr: a MonotonicClock of the service's own
  // Descriptors answered without a check (past the bounds, service/check_rules.h), at most one
  // message per 10 s of `clock` (UncheckedReport): sluiced logs it as a warning.
  std::function<void(const std::string&)> unchecked_warning;
  // Envoy requests naming an unknown time zone for a calendar limit (decided in the rule's
  // zone), at most one message per 10 s of `clock` (RequestZones): sluiced logs it.
  std::function<void(const std::string&)> zone_warning;
  // The per-client usage views (metrics/usage_views.h), recorded on every decision of a counted
  // limit; nullptr: off (--usage-tracking off). Must outlive the service.
  UsageViews* usage = nullptr;
};

// What the admin API shows of one counter.
struct CounterState {
  std::string counter_key;
  const Limit* limit = nullptr;
  std::shared_ptr<const Config> config;  // keeps `limit` alive
  int64_t remaining = 0;
  Duration reset_after{0};
};

// What an admin adjustment (POST /v1/state) did to one counter: read before and after it, in the
// store's one atomic step.
struct CounterChange {
  CounterState before;
  CounterState after;
};

// Why an admin adjustment did not happen: the request's fault (400: no such counter, a change
// that does not apply to the limit), or the store's or the audit log's (503: nothing changed).
struct AdminFailure {
  bool unavailable = false;
  std::string message;
};

// The answer to an acquire (POST /v1/acquire; service/permit_rules.h): the check's answer, and
// when it is OK, the permit that holds its concurrency slots (empty when no descriptor has a
// concurrency limit: nothing to give back) and how long it lives unless renewed (the shortest
// permit_ttl of its slots).
struct AcquireResponse {
  CheckResponse check;
  std::string permit;
  Duration permit_ttl{0};
};

// What a release or a renew did: `done` when every slot of the permit was held (and is now free,
// or extended); false for a permit unknown, expired or already released. `degraded`: the store
// could not be asked, nothing is known to have changed (a release leaves the slot held until its
// TTL). A renew's permit_ttl is the shortest of its slots'.
struct PermitResult {
  bool done = false;
  bool degraded = false;
  Duration permit_ttl{0};
  // The latest of the store's clocks when its slots were decided (microseconds since the epoch;
  // 0 when no store answered): from this instant the released slots are free.
  int64_t store_time_us = 0;
  // A slot of the permit is in a domain the caller may not check (DomainGate): nothing was
  // released or renewed.
  bool forbidden = false;
};

// Whether a release or renew may touch a slot of `domain`: the caller's identity's rule
// (service/caller_auth.h), asked for the domain of every slot whose limit the config in force
// has (a slot it no longer has is touched by nobody) before any slot is; empty: every domain.
// Asked before ReleaseAsync or RenewAsync returns, never after.
using DomainGate = std::function<bool(std::string_view domain)>;

class RateLimitService {
 public:
  // Decides in `store`: the service makes its limiters there and never learns which store it
  // is (the server binary opens it, sluiced/server.cc, from --store with OpenStore).
  static Result<std::unique_ptr<RateLimitService>> Create(std::shared_ptr<const Config> config,
                                                          std::shared_ptr<Store> store,
                                                          ServiceOptions options, Metrics* metrics);
  virtual ~RateLimitService() = default;

  // Errors are the caller's: what the rules refuse (service/check_rules.h: unknown domain, no
  // descriptors, too many, empty entries, sizes over CheckLimits, negative hits). Store
  // failures are not errors: they are decided by each limit's failure_mode and marked degraded.
  virtual Result<CheckResponse> Check(const CheckRequest& request) = 0;

  using CheckCallback = std::function<void(Result<CheckResponse>)>;

  // The one decision path; Check() is CheckAsync waited for. `done` gets the answer exactly
  // once: on the caller's thread before CheckAsync returns when nothing waits on a remote store
  // (the memory store, invalid requests, a cluster store), otherwise on the store's I/O thread,
  // before or after CheckAsync returns. `request` is read before CheckAsync returns. `done`
  // must not block. Front ends call only this.
  virtual void CheckAsync(const CheckRequest& request, CheckCallback done) { done(Check(request)); }

  // Concurrency permits (docs/load-protection.md). Errors are the caller's (400): what the rules
  // refuse (service/permit_rules.h), a malformed permit. `done` is called as CheckAsync's is.
  using AcquireCallback = std::function<void(Result<AcquireResponse>)>;
  using PermitCallback = std::function<void(Result<PermitResult>)>;
  virtual void AcquireAsync(const CheckRequest& request, AcquireCallback done) {
    (void)request;
    done(MakeError("this service cannot acquire permits"));
  }
  virtual void ReleaseAsync(std::string_view permit, const DomainGate& may, PermitCallback done) {
    (void)permit;
    (void)may;
    done(MakeError("this service cannot release permits"));
  }
  virtual void RenewAsync(std::string_view permit, const DomainGate& may, PermitCallback done) {
    (void)permit;
    (void)may;
    done(MakeError("this service cannot renew permits"));
  }

  // Swaps in a new config (already validated by LoadConfig). Counters of limits whose id and
  // spec are unchanged carry over.
  virtual Result<void> Reload(std::shared_ptr<const Config> config) = 0;
  virtual std::shared_ptr<const Config> config() const = 0;

  // The store's Stats(): counters of every limiter it holds (configured and override limits;
  // keys held, evictions, errors).
  virtual StoreStats StoreTotals() const = 0;

  // The store's families for /metrics (Metrics::SetStatsSource): the generic ones from its
  // Stats() (ReportStoreStats), the store's own (Store::ReportStats), and each configured
  // limit's (Limiter::ReportStats) labelled with its domain and metric name.
  virtual void ReportStats(StatsSink& sink) const { (void)sink; }

  // Ready to serve: not draining, a config is loaded and Store::Ready() (a PING for Redis). The
  // one readiness rule: HTTP /readyz and gRPC's grpc.health.v1.Health both answer from it.
  virtual bool Ready() = 0;

  // The server is stopping (SIGTERM): Ready() is false from here on, so that load balancers and
  // health checks take it out of rotation while requests in flight finish. Checks are still
  // answered. Irreversible.
  virtual void StartDraining() = 0;

  // Admin: one counter, found as Check() would find it (descriptor entries of one request
  // descriptor). State() asks without consuming; Reset() forgets the counter.
  virtual Result<CounterState> State(
      std::string_view domain, const std::vector<std::pair<std::string, std::string>>& entries) = 0;
  virtual Result<void> Reset(std::string_view domain,
                             const std::vector<std::pair<std::string, std::string>>& entries) = 0;

  // Admin: credits, debits or sets one counter (Limiter::Adjust), found as State() finds it.
  // `before_write` runs once the counter is found and the change is known to apply, before the
  // store is asked, with the counter key: its error (the audit line could not be written)
  // stops the adjustment, which then never happens (unavailable). Default: refused.
  using BeforeWrite = std::function<Result<void>(const std::string& counter_key)>;
  virtual std::expected<CounterChange, AdminFailure> Adjust(
      std::string_view domain, const std::vector<std::pair<std::string, std::string>>& entries,
      const Adjustment& change, const BeforeWrite& before_write) {
    (void)domain;
    (void)entries;
    (void)change;
    (void)before_write;
    return std::unexpected(AdminFailure{false, "this service cannot adjust counters"});
  }
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_RATE_LIMIT_SERVICE_H_
