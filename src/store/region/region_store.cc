#include "sluice/region_store.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "sluice/redis_store.h"
#include "store/forwarding.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_endpoint.h"
#include "store/redis/sentinel_transport.h"
#include "store/region/region_script.h"
#include "store/region/region_stats.h"

namespace sluice {
namespace {

// The global store counts a grant for this many refresh periods after it answered: one failed
// refresh, even two, change nothing.
constexpr int kLeaseRefreshes = 3;

// How often the refresher looks for parts due: a fifth of the shortest refresh (50 ms).
constexpr auto kLookEvery = std::chrono::milliseconds(10);

// A node keeps a grant, after it asked for it, for fewer refreshes if it is above its static part
// and for more if not. The parts above the static ones were carved from regions holding less
// than theirs: with the link gone for every region, the regions above their static parts must
// give them up before any region below takes its static part back (every node asks once a
// refresh: their last grants were asked for within a refresh and a round trip of each other);
// with the link gone for one region below its static part, the global store frees its static
// part after 3 refreshes, and the others shrink at their next refresh, before it takes it back.
constexpr int kAboveStaticRefreshes = 2;
constexpr int kAtMostStaticRefreshes = 5;
// Demand is asked for with this headroom (in percent), so a region's part is not its ceiling.
constexpr int64_t kDemandHeadroomPercent = 125;
// Demand is the rate of hits over the limit's period, but over no more than this many refreshes
// (an hourly limit's demand is what the last few refreshes saw).
constexpr int kDemandRefreshes = 8;

// The hits one refresh interval saw, from `since` to the next one's since.
struct Seen {
  Timestamp since;
  int64_t hits = 0;
};

class RegionStoreImpl;

// What one leased limit holds of the whole: the inner limiter enforcing the current part, and
// what the refresher needs to renew it. Shared by the limiter and the refresher.
struct Pool {
  RegionScope scope;
  LimiterOptions inner_options;  // how the inner store makes the part's limiter
  int64_t static_units = 0;
  const Clock* clock = nullptr;       // the store's
  std::shared_ptr<Limiter> fallback;  // the static part's limiter, never null

  mutable std::mutex mu;
  std::shared_ptr<Limiter> current;  // never null
  int64_t units = 0;                 // current's limit
  Timestamp next_due{};
  Timestamp lease_until{};  // our grant is valid until then (see kAboveStaticRefreshes)
  Timestamp last_grant{};
  Timestamp demand_since{};
  std::deque<Seen> seen;  // the last refreshes' hits, oldest first, spanning about a period

  std::atomic<int64_t> requested{0};  // hits asked for since demand_since (refused ones too)
  std::atomic<bool> cut_off{false};   // the last exchange with the global store failed
  std::atomic<uint64_t> leases{0};
  std::atomic<uint64_t> cutoff_decisions{0};

  // A part above the static one ends with its grant on the request path, not when the refresher
  // next runs: an exchange with a global store that went silent blocks the refresher for its
  // whole timeout, and the regions below their static parts take theirs back on time.
  std::shared_ptr<Limiter> Current() const {
    std::lock_guard<std::mutex> lock(mu);
    return Expired() ? fallback : current;
  }
  int64_t UnitsInForce() const {
    std::lock_guard<std::mutex> lock(mu);
    return Expired() ? static_units : units;
  }
  bool Expired() const { return units > static_units && clock->Now() >= lease_until; }
  void Count(int64_t cost) {
    requested.fetch_add(std::max<int64_t>(cost, 0), std::memory_order_relaxed);
    if (cut_off.load(std::memory_order_relaxed)) {
      cutoff_decisions.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

// A leased limit's limiter: its pool's current part, the demand it sees counted. A limit of
// any other kind passes through the layer (a plain ForwardingLimiter).
class RegionLimiter final : public internal::ForwardingLimiter {
 public:
  RegionLimiter(RegionStoreImpl* store, std::shared_ptr<Pool> pool, const LimitSpec& spec);
  ~RegionLimiter() override;

  void Count(int64_t cost) const { pool_->Count(cost); }

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    Count(cost);
    return ForwardingLimiter::Decide(key, now, cost);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    Count(cost);
    return ForwardingLimiter::Charge(key, now, cost);
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    Count(cost);
    ForwardingLimiter::DecideAsync(key, now, cost, std::move(done));
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    Count(cost);
    ForwardingLimiter::ChargeAsync(key, now, cost, std::move(done));
  }
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    for (const DecideRequest& r : requests) Count(r.cost);
    ForwardingLimiter::DecideBatch(requests, out);
  }
  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override;
  // Its spec is the static part: the part it enforces moves (Decision::limit says which one
  // decided), the spec a caller sees does not.
  const LimitSpec& spec() const override { return spec_; }
  bool served_by_layer() const override { return true; }

 protected:
  std::shared_ptr<Limiter> Current() const override { return pool_->Current(); }

 private:
  RegionStoreImpl* const store_;
  const std::shared_ptr<Pool> pool_;
  const LimitSpec spec_;
};

class RegionStoreImpl final : public internal::ForwardingStore<RegionStore> {
 public:
  RegionStoreImpl(std::shared_ptr<Store> inner, RegionStoreOptions options,
                  RedisStoreOptions global, internal::RedisEndpoint endpoint)
      : ForwardingStore(std::move(inner)),
        options_(std::move(options)),
        global_(std::move(global)),
        global_endpoint_(std::move(endpoint)),
        clock_(options_.clock != nullptr       ? options_.clock
               : options_.scheduler != nullptr ? &options_.scheduler->clock()
                                               : &own_clock_),
        scheduler_(options_.scheduler != nullptr ? options_.scheduler
                                                 : std::make_shared<ThreadScheduler>(*clock_)) {
    if (options_.node.empty()) {
      std::random_device random;
      char name[40];
      std::snprintf(name, sizeof name, "node-%08x%08x", random(), random());
      options_.node = name;
    }
    if (!global_.sentinels.empty()) {
      // Sentinel: the master the sentinels name, ROLE-checked and followed across failovers as
      // for --store (one connection: the refresher's exchanges never overlap). Its events (why
      // no master can be trusted, once per change) go to the same hook.
      sentinel_events_ = [this](RedisEvent e) {
        if (!options_.on_event) return;
        e.message = "global store " + e.message;
        options_.on_event(e);
      };
      sentinel_ = internal::MakeSentinelTransport(
          internal::SentinelFor(global_, global_endpoint_), 1,
          {{global_.breaker_failures, global_.breaker_open_for}, clock_, &sentinel_events_});
    }
    // A new limit's first grant is due at once, each next one a refresh (>= 50 ms) after the
    // last: looked for every kLookEvery, they are at most that late.
    refresher_ = scheduler_->Every(
        kLookEvery, [this](Timestamp now) { RefreshDue(now, /*force=*/false); }, Duration(0));
  }

  // The refresher goes first: it reads the pools and the global store's client.
  ~RegionStoreImpl() override { refresher_.reset(); }

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    if (!options.region.global || options.region.mode != RegionMode::kLeased) {
      return ForwardingStore::MakeLimiter(spec, options);
    }
    if (options.region.region != options_.region) {
      return MakeError("limit '" + options.id + "' is for region '" + options.region.region +
                       "', this store's is '" + options_.region + "'");
    }
    auto inner = inner_store().MakeLimiter(spec, options);  // the static part, where a node starts
    if (!inner) return std::unexpected(inner.error());
    auto pool = std::make_shared<Pool>();
    pool->scope = options.region;
    pool->inner_options = options;
    pool->static_units = spec.limit;
    pool->clock = clock_;
    pool->units = spec.limit;
    pool->current = std::move(*inner);
    pool->fallback = pool->current;
    const Timestamp now = clock_->Now();
    pool->demand_since = now;
    pool->last_grant = now;  // the age counts from the start until a first grant
    pool->next_due = now;
    return std::unique_ptr<Limiter>(std::make_unique<RegionLimiter>(this, std::move(pool), spec));
  }

  // The demand the leased limits see; the inner limiters of their current parts stay alive until
  // the answer, even if a refresh replaces them (ForwardingStore).
  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override {
    for (const LimitCheck& c : checks) {
      if (const RegionLimiter* l = Own<RegionLimiter>(c)) l->Count(c.cost);
    }
    ForwardingStore::DecideAllAsync(checks, now, std::move(done));
  }

  // Shown only while it leases some limit's part.
  void ReportStats(StatsSink& sink) const override {
    ForwardingStore::ReportStats(sink);
    const Timestamp now = clock_->Now();
    std::lock_guard<std::mutex> lock(mu_);
    if (pools_.empty()) return;
    double age = 0;
    for (const auto& pool : pools_) age = std::max(age, AgeSeconds(*pool, now));
    internal::ReportRegionSyncAge(age, sink);
  }

  void RefreshDue(Timestamp now, bool force) override {
    std::vector<std::shared_ptr<Pool>> due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& pool : pools_) {
        std::lock_guard<std::mutex> pool_lock(pool->mu);
        if (force || pool->next_due <= now) due.push_back(pool);
      }
    }
    for (const auto& pool : due) Refresh(*pool);
  }

  void Register(const std::shared_ptr<Pool>& pool) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pools_.push_back(pool);  // its first grant is due at once: at the next look
    }
  }
  void Unregister(const Pool* pool) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(pools_, [pool](const auto& p) { return p.get() == pool; });
  }

  static double AgeSeconds(const Pool& pool, Timestamp now) {
    std::lock_guard<std::mutex> lock(pool.mu);
    return std::chrono::duration<double>(now - pool.last_grant).count();
  }

 private:
  // One exchange with the global store for `pool`: its demand out, its part back.
  void Refresh(Pool& pool) {
    const Timestamp asked = clock_->Now();
    const Duration refresh = pool.scope.refresh;
    int64_t demand = 0;
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      pool.next_due = asked + refresh;
      pool.seen.push_back(
          {pool.demand_since, pool.requested.exchange(0, std::memory_order_relaxed)});
      pool.demand_since = asked;
      // The larger of two rates: over the last refresh, so that a rise is asked for at once, and
      // over the last period of the limit (kDemandRefreshes refreshes at most), so that a quiet
      // region whose few hits a refresh read as 1 one time and 2 the next is not cut to the
      // lower reading in the middle of a window it still uses.
      const Duration span =
          std::clamp<Duration>(pool.scope.global_spec.period, refresh, refresh * kDemandRefreshes);
      while (pool.seen.size() > 1 && pool.seen.front().since < asked - span) {
        pool.seen.pop_front();
      }
      const auto per_period = [&](int64_t hits, Timestamp since) {
        const double seconds = std::chrono::duration<double>(asked - since).count();
        const double period = std::chrono::duration<double>(pool.scope.global_spec.period).count();
        return seconds > 0 ? static_cast<double>(hits) * period / seconds : 0.0;
      };
      int64_t hits = 0;
      for (const Seen& seen : pool.seen) hits += seen.hits;
      const double rate = std::max(per_period(pool.seen.back().hits, pool.seen.back().since),
                                   per_period(hits, pool.seen.front().since));
      demand = static_cast<int64_t>(rate * kDemandHeadroomPercent / 100.0);
    }
    const Duration ttl = refresh * kLeaseRefreshes;
    auto granted = AskGlobal(pool, demand, ttl);
    if (!granted) {
      pool.cut_off.store(true, std::memory_order_relaxed);
      LinkDown(granted.error().message);
      // Past the grant: back to the static share, which the global store counts us at now.
      bool expired;
      int64_t held;
      {
        std::lock_guard<std::mutex> lock(pool.mu);
        expired = asked >= pool.lease_until;
        held = pool.units;
      }
      if (expired && held != pool.static_units) {
        Tell(RedisEventKind::kConnectionLost,
             "limit '" + pool.inner_options.id + "': its grant of " + std::to_string(held) +
                 " expired while the global store is unreachable; deciding on its static part, " +
                 std::to_string(pool.static_units) + " of " +
                 std::to_string(pool.scope.global_spec.limit));
        Install(pool, pool.static_units);
      }
      return;
    }
    LinkUp();
    pool.cut_off.store(false, std::memory_order_relaxed);
    pool.leases.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      // Counted from the asking; see kAboveStaticRefreshes.
      pool.lease_until = asked + refresh * (*granted > pool.static_units ? kAboveStaticRefreshes
                                                                         : kAtMostStaticRefreshes);
      pool.last_grant = clock_->Now();
    }
    Install(pool, *granted);
  }

  // The link's changes, told once each (the refresher's only, as client_).
  void LinkDown(const std::string& why) {
    if (link_ == Link::kDown) return;
    Tell(RedisEventKind::kConnectionLost,
         std::string("unreachable (") + why + "): leased limits keep their grants until they " +
             "expire (2 x refresh after asking above their static shares, 5 x at or below), " +
             "then decide on their static shares" +
             (link_ == Link::kUnknown ? "; until it answers they decide on their static shares"
                                      : ""));
    link_ = Link::kDown;
  }
  void LinkUp() {
    if (link_ == Link::kUp) return;
    Tell(link_ == Link::kUnknown ? RedisEventKind::kConnected : RedisEventKind::kConnectionRestored,
         link_ == Link::kUnknown ? "reached: leased limits follow demand"
                                 : "reachable again: leased limits follow demand");
    link_ = Link::kUp;
  }
  void Tell(RedisEventKind kind, const std::string& what) const {
    if (!options_.on_event) return;
    const std::string server = !global_.sentinels.empty() ? "sentinel:" + global_.sentinel_master
                               : global_.unix_path.empty()
                                   ? global_.host + ":" + std::to_string(global_.port)
                                   : "unix:" + global_.unix_path;
    options_.on_event(
        {.kind = kind, .server = server, .message = "global store redis " + server + ": " + what});
  }

  void Install(Pool& pool, int64_t units) {
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      if (pool.units == units) return;
    }
    std::shared_ptr<Limiter> made = pool.fallback;
    if (units != pool.static_units) {
      auto spec = RegionPart(pool.scope.global_spec, units);
      if (!spec) return;
      auto limiter = inner_store().MakeLimiter(*spec, pool.inner_options);
      if (!limiter) return;  // keeps the part it has
      made = std::move(*limiter);
    }
    std::shared_ptr<Limiter> old;
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      old = std::exchange(pool.current, std::move(made));
      pool.units = units;
    }
  }

  Result<internal::RedisReply> EvalGlobal(const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args) {
    if (sentinel_ != nullptr) return sentinel_->Eval(internal::kRegionGrantScript, keys, args);
    if (client_ == nullptr) {
      auto client = internal::RedisClient::Connect(global_endpoint_);
      if (!client) return std::unexpected(client.error());
      client_ = std::move(*client);
    }
    return client_->Eval(internal::kRegionGrantScript, keys, args);
  }

  Result<int64_t> AskGlobal(const Pool& pool, int64_t demand, Duration ttl) {
    const RegionScope& s = pool.scope;
    std::vector<std::string> args = {
        options_.region,
        options_.node,
        std::to_string(demand),
        std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(ttl).count()),
        std::to_string(s.global_spec.limit),
        std::to_string(s.shares.size())};
    for (const RegionShare& share : s.shares) {
      args.push_back(share.region);
      args.push_back(std::to_string(share.ppm));
    }
    auto reply = EvalGlobal({"sluice-region:{" + pool.inner_options.id + "}"}, args);
    if (!reply || reply->type != internal::RedisReply::Type::kArray ||
        reply->elements.size() != 2 ||
        reply->elements[0].type != internal::RedisReply::Type::kInteger) {
      client_.reset();  // after a timeout the connection is unusable
      if (!reply) return std::unexpected(reply.error());
      return MakeError("global store: unexpected answer to the region script");
    }
    return std::clamp<int64_t>(reply->elements[0].integer, 1, s.global_spec.limit);
  }

  RegionStoreOptions options_;
  const RedisStoreOptions global_;
  const internal::RedisEndpoint global_endpoint_;  // TLS, AUTH and SELECT as global_ says
  MonotonicClock own_clock_;
  const Clock* const clock_;
  const std::shared_ptr<Scheduler> scheduler_;
  std::function<void(RedisEvent)> sentinel_events_;     // sentinel_'s, to options_.on_event
  std::unique_ptr<internal::RedisTransport> sentinel_;  // --global-store redis+sentinel://
  std::unique_ptr<internal::RedisClient> client_;  // the refresher's only (its runs never overlap)
  enum class Link { kUnknown, kUp, kDown };
  Link link_ = Link::kUnknown;  // the refresher's only
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Pool>> pools_;
  std::unique_ptr<Scheduler::Task> refresher_;  // RefreshDue every kLookEvery
};

RegionLimiter::RegionLimiter(RegionStoreImpl* store, std::shared_ptr<Pool> pool,
                             const LimitSpec& spec)
    : ForwardingLimiter(store), store_(store), pool_(std::move(pool)), spec_(spec) {
  store_->Register(pool_);
}

RegionLimiter::~RegionLimiter() { store_->Unregister(pool_.get()); }

void RegionLimiter::ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const {
  ForwardingLimiter::ReportStats(sink, limit_labels);
  internal::ReportRegionLimit({pool_->UnitsInForce(), pool_->leases.load(std::memory_order_relaxed),
                               pool_->cutoff_decisions.load(std::memory_order_relaxed)},
                              sink, limit_labels);
}

}  // namespace

Result<std::shared_ptr<RegionStore>> OpenRegionStore(std::shared_ptr<Store> inner,
                                                     RegionStoreOptions options) {
  if (inner == nullptr) return MakeError("the region layer needs a store behind it");
  auto global = ParseRedisAddress(options.global_store);
  if (!global) return MakeError("--global-store: " + global.error().message);
  if (!global->cluster_seeds.empty()) {
    return MakeError(
        "--global-store: a Redis Cluster is not supported yet (each limit's data is one hash: "
        "name one node, redis://host:port)");
  }
  if (options.region.empty()) return MakeError("the region layer needs this node's region");
  const bool tls = global->tls.enabled;
  global->tls = options.tls;
  global->tls.enabled = tls;
  global->connect_timeout = options.global_timeout;
  global->command_timeout = options.global_timeout;
  auto endpoint = internal::MakeEndpoint(*global);
  if (!endpoint) return MakeError("--global-store: " + endpoint.error().message);
  return std::shared_ptr<RegionStore>(std::make_shared<RegionStoreImpl>(
      std::move(inner), std::move(options), std::move(*global), std::move(*endpoint)));
}

}  // namespace sluice
