#include "sluice/leased_store.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "sluice/decide_all.h"
#include "store/forwarding.h"
#include "store/give_back.h"
#include "store/lease/lease_book.h"
#include "store/lease/lease_stats.h"

namespace sluice {
namespace {

using internal::LeaseBook;
using internal::LeasePlan;
using internal::LeaseStep;

// How often expired leases are looked for: a small part of the shortest lease_ttl (10 ms).
constexpr auto kSweepEvery = std::chrono::milliseconds(20);

class LeasedStoreImpl;
class LeasedLimiter;

// A limiter whose keys are decided from leases.
class LeasedLimiter final : public internal::ForwardingLimiter {
 public:
  LeasedLimiter(LeasedStoreImpl* store, std::unique_ptr<Limiter> inner, const QuotaSync& sync,
                std::shared_ptr<std::atomic<int64_t>> byte_budget);
  ~LeasedLimiter() override;

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    return DecideOne(key, now, cost, /*charge=*/false);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    return DecideOne(key, now, cost, /*charge=*/true);
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    DecideOneAsync(key, now, cost, /*charge=*/false, std::move(done));
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    DecideOneAsync(key, now, cost, /*charge=*/true, std::move(done));
  }
  // One by one, each from the leases (Limiter's loop over Decide).
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    Limiter::DecideBatch(requests, out);
  }
  // A fixed window's admission goes back to the window it was counted in, which only the
  // shared store knows; the buckets' into the units held (the same quota, nearer).
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    if (cost <= 0 || cost > spec().Capacity()) return;
    if (spec().algorithm == Algorithm::kFixedWindow || !book_->PutBack(key, now, cost)) {
      inner()->Refund(key, at, now, cost);
    }
  }
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    if (cost <= 0 || cost > spec().Capacity()) return;
    if (spec().algorithm == Algorithm::kFixedWindow || !book_->PutBack(key, now, cost)) {
      inner()->RefundAsync(key, at, now, cost);
    }
  }
  // TakeAsync and GiveBack (the leases' own traffic, from a layer above) pass through.
  // The shared counter is forgotten: what this node held of it goes with it.
  void Reset(std::string_view key) override {
    book_->Forget(key);
    inner()->Reset(key);
  }
  StoreStats Stats() const override;
  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override {
    ForwardingLimiter::ReportStats(sink, limit_labels);
    internal::ReportLeaseCounters(book_->counters(), sink, limit_labels);
  }
  uint64_t local_decisions() const {
    return book_->counters().local.load(std::memory_order_relaxed);
  }
  bool served_by_layer() const override { return true; }
  using ForwardingLimiter::inner;
  LeaseBook& book() { return *book_; }
  const QuotaSync& sync() const { return sync_; }

  // Takes for the key: `cost` for a request (0 for a prefetch) and `want` units ahead.
  void Take(std::string_view key, Timestamp now, int64_t cost, int64_t want,
            std::function<void(const Decision&)> done);
  // Gives back what has expired by `now`.
  void ReturnExpired(Timestamp now);

 private:
  Decision DecideOne(std::string_view key, Timestamp now, int64_t cost, bool charge);
  void DecideOneAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                      DecisionCallback done);

  LeasedStoreImpl* const store_;
  const QuotaSync sync_;
  const std::shared_ptr<LeaseBook> book_;
};

class LeasedStoreImpl final : public internal::ForwardingStore<LeasedStore> {
 public:
  LeasedStoreImpl(std::shared_ptr<Store> inner, LeasedStoreOptions options)
      : ForwardingStore(std::move(inner)),
        options_(std::move(options)),
        clock_(options_.clock != nullptr       ? options_.clock
               : options_.scheduler != nullptr ? &options_.scheduler->clock()
                                               : &own_clock_),
        scheduler_(options_.scheduler != nullptr ? options_.scheduler
                                                 : std::make_shared<ThreadScheduler>(*clock_)),
        byte_budget_(
            std::make_shared<std::atomic<int64_t>>(static_cast<int64_t>(options_.max_bytes))) {
    if (options_.holder.empty()) {
      std::random_device random;
      char name[40];
      std::snprintf(name, sizeof name, "node-%08x%08x", random(), random());
      options_.holder = name;
    }
    sweep_ = scheduler_->Every(kSweepEvery, [this](Timestamp now) { ReturnExpired(now); });
  }

  // The sweep goes first: it reads the limiters' registry.
  ~LeasedStoreImpl() override { sweep_.reset(); }

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    if (options.sync.mode != SyncMode::kLeased) return ForwardingStore::MakeLimiter(spec, options);
    if (!SharedSyncCanServe(spec)) {
      return MakeError("limit '" + options.id + "': sync mode leased needs token_bucket, gcra, " +
                       "fixed_window or leaky_bucket without shaper, not " +
                       std::string(AlgorithmName(spec.algorithm)) + (spec.shaper ? " shaper" : ""));
    }
    auto inner = inner_store().MakeLimiter(spec, options);
    if (!inner) return std::unexpected(inner.error());
    return std::unique_ptr<Limiter>(
        std::make_unique<LeasedLimiter>(this, std::move(*inner), options.sync, byte_budget_));
  }

  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override;
  // One check of a leased limit: from its units, a take, or a charge of the shared quota.
  void DecideOneLeased(LeasedLimiter& l, const LimitCheck& c, Timestamp now,
                       DecideAllCallback done);

  StoreStats Stats() const override {
    StoreStats s = ForwardingStore::Stats();
    std::lock_guard<std::mutex> lock(registry_mu_);
    for (const LeasedLimiter* l : limiters_) {
      const StoreStats own = l->Stats();
      s.leased_decisions += own.leased_decisions;
      s.leases_taken += own.leases_taken;
      s.leases_expired += own.leases_expired;
      s.lease_returns += own.lease_returns;
      s.lease_units_held += own.lease_units_held;
    }
    return s;
  }
  void ReportStats(StatsSink& sink) const override {
    ForwardingStore::ReportStats(sink);
    uint64_t local = 0;
    {
      std::lock_guard<std::mutex> lock(registry_mu_);
      for (const LeasedLimiter* l : limiters_) local += l->local_decisions();
    }
    internal::ReportLeasedDecisions(local, sink);
  }

  void ReturnExpired(Timestamp now) override {
    std::lock_guard<std::mutex> lock(registry_mu_);
    for (LeasedLimiter* l : limiters_) l->ReturnExpired(now);
  }

  void Register(LeasedLimiter* l) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    limiters_.push_back(l);
  }
  void Unregister(LeasedLimiter* l) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    std::erase(limiters_, l);
  }

  const std::string& holder() const { return options_.holder; }
  const Clock& clock() const { return *clock_; }

 private:
  LeasedStoreOptions options_;
  MonotonicClock own_clock_;
  const Clock* const clock_;
  const std::shared_ptr<Scheduler> scheduler_;
  const std::shared_ptr<std::atomic<int64_t>> byte_budget_;
  mutable std::mutex registry_mu_;
  std::vector<LeasedLimiter*> limiters_;
  std::unique_ptr<Scheduler::Task> sweep_;  // ReturnExpired every kSweepEvery
};

LeasedLimiter::LeasedLimiter(LeasedStoreImpl* store, std::unique_ptr<Limiter> inner,
                             const QuotaSync& sync,
                             std::shared_ptr<std::atomic<int64_t>> byte_budget)
    : ForwardingLimiter(store, std::move(inner)),
      store_(store),
      sync_(sync),
      book_(std::make_shared<LeaseBook>(spec(), sync, std::move(byte_budget))) {
  store_->Register(this);
}

LeasedLimiter::~LeasedLimiter() {
  store_->Unregister(this);
  // Shutdown, or a reload that changed the limit: the units go back for the other nodes.
  book_->Close();
  const Timestamp now = store_->clock().Now();
  for (const internal::GiveBackOrder& o : book_->TakeAll()) {
    inner()->GiveBack(o.key, o.stamp_us, now, o.units);
  }
}

StoreStats LeasedLimiter::Stats() const {
  StoreStats s = inner()->Stats();
  const internal::LeaseCounters& c = book_->counters();
  s.leased_decisions = c.local.load(std::memory_order_relaxed);
  s.leases_taken = c.taken.load(std::memory_order_relaxed);
  s.leases_expired = c.expired.load(std::memory_order_relaxed);
  s.lease_returns = c.returned.load(std::memory_order_relaxed);
  s.lease_units_held = c.held.load(std::memory_order_relaxed);
  return s;
}

void LeasedLimiter::Take(std::string_view key, Timestamp now, int64_t cost, int64_t want,
                         std::function<void(const Decision&)> done) {
  const LeaseRequest request{
      .cost = cost, .want = want, .holder = store_->holder(), .ttl = sync_.lease_ttl};
  // The inner limiter is shared with the take, which may answer after this limiter is gone (a
  // reload).
  inner()->TakeAsync(key, now, request,
                     [book = book_, inner = shared_inner(), key = std::string(key), now, cost, want,
                      done = std::move(done)](const LeaseGrant& grant) {
                       book->Granted(key, now, cost, want, grant);
                       if (book->closed()) {  // the limiter went while this was out
                         for (const internal::GiveBackOrder& o : book->TakeAll()) {
                           inner->GiveBack(o.key, o.stamp_us, now, o.units);
                         }
                       }
                       if (done) done(grant.decision);
                     });
}

void LeasedLimiter::ReturnExpired(Timestamp now) {
  for (const internal::GiveBackOrder& o : book_->TakeExpired(now)) {
    inner()->GiveBack(o.key, o.stamp_us, now, o.units);
  }
}

Decision LeasedLimiter::DecideOne(std::string_view key, Timestamp now, int64_t cost, bool charge) {
  const LimitCheck check{.limiter = this, .key = key, .cost = cost, .charge = charge};
  Decision out[1];
  store_->DecideAll(std::span(&check, 1), now, out);
  return out[0];
}

void LeasedLimiter::DecideOneAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                                   DecisionCallback done) {
  const LimitCheck check{.limiter = this, .key = key, .cost = cost, .charge = charge};
  store_->DecideAllAsync(std::span(&check, 1), now,
                         [done = std::move(done)](std::span<const Decision> out) { done(out[0]); });
}

// One request in flight: its checks, what each was planned to do, and what came back.
struct Pending {
  struct Item {
    LeasedLimiter* leased = nullptr;  // null: decided by the inner store
    Limiter* inner = nullptr;         // the inner store's limiter
    std::string key;
    LeaseStep step = LeaseStep::kTake;
  };
  Timestamp now;
  Store::DecideAllCallback done;
  std::vector<Item> items;
  std::vector<LimitCheck> checks;  // as asked (keys point into items)
  std::vector<Decision> out;
  std::vector<LimitCheck> inner_checks;  // those sent to the inner store together
  std::vector<size_t> inner_index;       // their index in `checks`
  bool inner_refused = false;            // the inner store already gave back its admissions
  std::atomic<int> outstanding{1};

  void Arrive() {
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
  }

  // All or nothing, as every store: a refused request keeps nothing but its charges. Possibly
  // on the inner store's I/O thread: nothing here may wait for that store.
  void Finish() {
    internal::GiveBackIfRefused(checks, out, [this](size_t i) {
      const Item& item = items[i];
      if (item.leased != nullptr) {
        item.leased->RefundAsync(item.key, now, now, checks[i].cost);
      } else if (!inner_refused) {
        item.inner->RefundAsync(item.key, now, now, checks[i].cost);
      } else {
        return false;  // given back, and reported so, by the inner store
      }
      return true;
    });
    done(out);
  }
};

void LeasedStoreImpl::DecideOneLeased(LeasedLimiter& l, const LimitCheck& c, Timestamp now,
                                      DecideAllCallback done) {
  Decision d;
  const LeasePlan plan = l.book().Plan(c.key, now, c.cost, c.charge, d);
  switch (plan.step) {
    case LeaseStep::kAdmitted:
      if (plan.prefetch_want > 0) l.Take(c.key, now, /*cost=*/0, plan.prefetch_want, nullptr);
      [[fallthrough]];
    case LeaseStep::kRefused:
      return done(std::span<const Decision>(&d, 1));
    case LeaseStep::kTake:
      return l.Take(c.key, now, c.cost, plan.want, [done = std::move(done)](const Decision& taken) {
        done(std::span<const Decision>(&taken, 1));
      });
    case LeaseStep::kCharge:
      return l.inner()->ChargeAsync(c.key, now, c.cost,
                                    [done = std::move(done)](const Decision& charged) {
                                      done(std::span<const Decision>(&charged, 1));
                                    });
  }
}

void LeasedStoreImpl::DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                                     DecideAllCallback done) {
  // The hot path: one check of a leased limit, which needs no all-or-nothing bookkeeping.
  if (checks.size() == 1) {
    if (LeasedLimiter* l = Own<LeasedLimiter>(checks[0])) {
      return DecideOneLeased(*l, checks[0], now, std::move(done));
    }
  }
  bool leased = false, quota = false, other = false;
  for (const LimitCheck& c : checks) {
    const internal::ForwardingLimiter* mine = Mine(c);
    if (mine == nullptr) continue;  // inner says: invalid
    (mine->served_by_layer() ? leased : other) = true;
    quota = quota || c.quota;
  }
  // Quota checks split between leases and the inner store would need the quota rule applied
  // across both before either keeps anything: such rare requests are decided exactly instead.
  if (!leased || (quota && other))
    return ForwardingStore::DecideAllAsync(checks, now, std::move(done));

  auto p = std::make_shared<Pending>();
  p->now = now;
  p->done = std::move(done);
  p->items.resize(checks.size());
  const internal::InnerRequest unwrapped = InnerChecks(checks);
  for (size_t i = 0; i < checks.size(); ++i) {
    Pending::Item& item = p->items[i];
    item.key = std::string(checks[i].key);
    item.inner = unwrapped.checks[i].limiter;
    item.leased = Own<LeasedLimiter>(checks[i]);
  }

  p->out.resize(checks.size());
  std::vector<size_t> takes;
  std::vector<LeasePlan> plans(checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    LimitCheck c = checks[i];
    c.key = p->items[i].key;
    p->checks.push_back(c);
    Pending::Item& item = p->items[i];
    if (item.leased == nullptr) {
      c.limiter = item.inner;
      p->inner_checks.push_back(c);
      p->inner_index.push_back(i);
      continue;
    }
    plans[i] = item.leased->book().Plan(item.key, now, c.cost, c.charge, p->out[i]);
    item.step = plans[i].step;
    switch (item.step) {
      case LeaseStep::kAdmitted:
        if (plans[i].prefetch_want > 0) {
          item.leased->Take(item.key, now, /*cost=*/0, plans[i].prefetch_want, nullptr);
        }
        break;
      case LeaseStep::kRefused:
        break;
      case LeaseStep::kTake:
        takes.push_back(i);
        break;
      case LeaseStep::kCharge:  // beyond the units held: into the shared quota at once
        c.limiter = item.inner;
        p->inner_checks.push_back(c);
        p->inner_index.push_back(i);
        break;
    }
  }
  p->outstanding.fetch_add(static_cast<int>(takes.size()) + (p->inner_checks.empty() ? 0 : 1));
  for (size_t i : takes) {
    p->items[i].leased->Take(p->items[i].key, now, p->checks[i].cost, plans[i].want,
                             [p, i](const Decision& d) {
                               p->out[i] = d;
                               p->Arrive();
                             });
  }
  if (!p->inner_checks.empty()) {
    inner_store().DecideAllAsync(p->inner_checks, now, [p](std::span<const Decision> decided) {
      for (size_t j = 0; j < decided.size() && j < p->inner_index.size(); ++j) {
        p->out[p->inner_index[j]] = decided[j];
      }
      p->inner_refused = RequestRefused(p->inner_checks, decided);
      p->Arrive();
    });
  }
  p->Arrive();
}

}  // namespace

Result<std::shared_ptr<LeasedStore>> OpenLeasedStore(std::shared_ptr<Store> inner,
                                                     LeasedStoreOptions options) {
  if (inner == nullptr) return MakeError("the leased store needs a store behind it");
  return std::shared_ptr<LeasedStore>(
      std::make_shared<LeasedStoreImpl>(std::move(inner), std::move(options)));
}

}  // namespace sluice
