#include "sluice/leased_store.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <future>
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

using internal::GiveBackOrder;
using internal::LeaseBook;
using internal::LeasePlan;
using internal::LeaseStep;

// How often expired leases are looked for: a small part of the shortest lease_ttl (10 ms).
constexpr auto kSweepEvery = std::chrono::milliseconds(20);

class LeasedStoreImpl;
class LeasedLimiter;

// After a take for `key` landed: gives back what it returned (LeaseBook::Landed), then answers
// the request and runs what waited for the take -- once every give-back is answered, as
// DecideLeased waits for its own (GiveBackThen). Sent and not waited for, a give-back could
// reach Redis after the take of a request answered or retried here (the store's connections
// are used in turn): Redis would decide that take without the units, stricter than the limit.
void AnswerAfterGiveBacks(const std::shared_ptr<Limiter>& inner,
                          const std::shared_ptr<LeaseBook>& book, const std::string& key,
                          Timestamp now, LeaseBook::Landed landed,
                          const std::function<void(const Decision&)>& done) {
  struct Answer {
    std::atomic<size_t> left;
    Decision decision;
    std::function<void(const Decision&)> done;
    std::vector<std::function<void()>> parked;
    bool returning;  // the key waits for the first give-back (LeaseBook::Landed)
  };
  auto answer = std::make_shared<Answer>();
  answer->left = landed.give_back.size() + 1;
  answer->decision = landed.decision;
  answer->done = done;
  answer->parked = std::move(landed.parked);
  answer->returning = landed.returning;
  // Holds the inner limiter until the last answer: the limiter may go meanwhile (a reload).
  auto arrive = [answer, inner, book, key] {
    if (answer->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (answer->done) answer->done(answer->decision);
    for (auto& retry : answer->parked) retry();
    if (answer->returning) {
      for (auto& retry : book->Returned(key)) retry();
    }
  };
  // A give-back that failed leaves the units taken: the shared store decides on less, the safe
  // side.
  for (const GiveBackOrder& o : landed.give_back) {
    inner->GiveBackThen(o.key, o.stamp_us, now, o.units, [arrive](bool) { arrive(); });
  }
  arrive();
}

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
  // An admission goes back into the units held while they are usable with it (a fixed
  // window's: units of the window it was counted in), the same quota, nearer; otherwise to the
  // shared store -- a bucket's after the units held (RefundThen).
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    RefundThen(key, at, now, cost, [](bool) {});
  }
  void RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                  GivenBackCallback done) override;
  // TakeAsync and GiveBack (the leases' own traffic, from a layer above) pass through.
  // The shared counter is forgotten: what this node held of it goes with it.
  void Reset(std::string_view key) override;
  // As Reset, the node's entry for the key goes first (its local refusal with it); the units it
  // held stay taken in the shared counter (the strict side), which is then adjusted.
  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override;
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

  // One check of this limit: from the units held, refused locally, or asked of the shared
  // store -- after the take in flight for the key has landed and the units held are back.
  void DecideLeased(std::string key, Timestamp now, int64_t cost, bool charge,
                    DecisionCallback done);
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

  StoreStats Stats() const override {
    StoreStats s = ForwardingStore::Stats();
    std::lock_guard<std::mutex> lock(registry_mu_);
    s.leased_decisions += retired_.leased_decisions;
    s.leases_taken += retired_.leases_taken;
    s.leases_expired += retired_.leases_expired;
    s.lease_returns += retired_.lease_returns;
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
  // A limiter that goes leaves its counts in the store's (they are totals).
  void Unregister(LeasedLimiter* l) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    std::erase(limiters_, l);
    const StoreStats own = l->Stats();
    retired_.leased_decisions += own.leased_decisions;
    retired_.leases_taken += own.leases_taken;
    retired_.leases_expired += own.leases_expired;
    retired_.lease_returns += own.lease_returns;
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
  StoreStats retired_;                      // the counts of limiters gone
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
  // Shutdown, or a reload that changed the limit: the units go back for the other nodes. (The
  // sweep may still visit this limiter until it is unregistered: both only take units out.)
  book_->Close();
  const Timestamp now = store_->clock().Now();
  for (const GiveBackOrder& o : book_->TakeAll()) {
    inner()->GiveBack(o.key, o.stamp_us, now, o.units);
  }
  store_->Unregister(this);
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
                       LeaseBook::Landed landed = book->Granted(key, now, cost, want, grant);
                       if (book->closed()) {  // the limiter went while this was out
                         for (GiveBackOrder& o : book->TakeAll()) {
                           landed.give_back.push_back(std::move(o));
                         }
                       }
                       AnswerAfterGiveBacks(inner, book, key, now, std::move(landed), done);
                     });
}

void LeasedLimiter::ReturnExpired(Timestamp now) {
  for (const GiveBackOrder& o : book_->TakeExpired(now)) {
    // A request for the key waits for it (LeaseBook::Returned), possibly past this limiter.
    inner()->GiveBackThen(o.key, o.stamp_us, now, o.units, [book = book_, key = o.key](bool) {
      for (auto& retry : book->Returned(key)) retry();
    });
  }
}

void LeasedLimiter::DecideLeased(std::string key, Timestamp now, int64_t cost, bool charge,
                                 DecisionCallback done) {
  Decision d;
  const LeasePlan plan = book_->Plan(key, now, cost, charge, d);
  switch (plan.step) {
    case LeaseStep::kAdmitted:
      if (plan.prefetch_want > 0) Take(key, now, /*cost=*/0, plan.prefetch_want, nullptr);
      [[fallthrough]];
    case LeaseStep::kRefused:
      return done(d);
    case LeaseStep::kWait: {
      const std::string parked_on = key;
      auto retry = [this, key = std::move(key), now, cost, charge,
                    done = std::move(done)]() mutable {
        DecideLeased(std::move(key), now, cost, charge, std::move(done));
      };
      // The take may have landed in between: then at once.
      auto shared_retry = std::make_shared<decltype(retry)>(std::move(retry));
      if (!book_->Park(parked_on, [shared_retry] { (*shared_retry)(); })) (*shared_retry)();
      return;
    }
    case LeaseStep::kTake:
    case LeaseStep::kCharge:
      break;
  }
  auto ask = [this, key, now, cost, charge, want = plan.want,
              done = std::move(done)](bool /*given_back*/) mutable {
    if (charge) {
      return inner()->ChargeAsync(
          key, now, cost,
          [book = book_, key, now, cost, done = std::move(done)](const Decision& charged) {
            book->Charged(key, now, cost, charged);
            done(charged);
          });
    }
    Take(key, now, cost, want, std::move(done));
  };
  // A give-back that failed leaves the units taken: the shared store decides on less, the safe
  // side.
  if (plan.give_back.units == 0) return ask(true);
  inner()->GiveBackThen(key, plan.give_back.stamp_us, now, plan.give_back.units, std::move(ask));
}

void LeasedLimiter::Reset(std::string_view key) {
  // A take (or give-back) in flight for the key lands first: had it run in the shared store
  // after the reset, the units it brought would be held against a counter that no longer
  // counts them.
  std::promise<void> landed;
  std::future<void> answered = landed.get_future();
  if (book_->Park(key, [&landed] { landed.set_value(); })) answered.wait();
  std::vector<std::function<void()>> parked = book_->Forget(key);
  inner()->Reset(key);
  for (auto& retry : parked) retry();
}

Result<Adjusted> LeasedLimiter::Adjust(std::string_view key, Timestamp now,
                                       const Adjustment& change) {
  std::promise<void> landed;
  std::future<void> answered = landed.get_future();
  if (book_->Park(key, [&landed] { landed.set_value(); })) answered.wait();
  std::vector<std::function<void()>> parked = book_->Forget(key);
  auto adjusted = inner()->Adjust(key, now, change);
  for (auto& retry : parked) retry();
  return adjusted;
}

void LeasedLimiter::Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
  std::promise<void> given_back;
  std::future<void> answered = given_back.get_future();
  RefundThen(key, at, now, cost, [&given_back](bool) { given_back.set_value(); });
  answered.wait();
}

void LeasedLimiter::RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                               GivenBackCallback done) {
  if (cost <= 0 || cost > spec().Capacity()) return done(false);
  if (book_->PutBack(key, at, now, cost)) return done(true);
  // The shared store gets the admission back with the units held (a bucket's: the units go back
  // first, or the bucket would cap their sum below what the limit alone has).
  const GiveBackOrder units = book_->bucket() ? book_->TakeUnits(key) : GiveBackOrder{};
  auto refund = [inner = shared_inner(), key = std::string(key), at, now, cost,
                 done = std::move(done)](bool) mutable {
    inner->RefundThen(key, at, now, cost, std::move(done));
  };
  if (units.units == 0) return refund(true);
  inner()->GiveBackThen(key, units.stamp_us, now, units.units, std::move(refund));
}

Decision LeasedLimiter::DecideOne(std::string_view key, Timestamp now, int64_t cost, bool charge) {
  const LimitCheck check{.limiter = this, .key = key, .cost = cost, .charge = charge};
  Decision out[1];
  store_->DecideAll(std::span(&check, 1), now, out);
  return out[0];
}

void LeasedLimiter::DecideOneAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                                   DecisionCallback done) {
  DecideLeased(std::string(key), now, cost, charge, std::move(done));
}

// One request in flight: its checks, and what came back. The leased checks are decided one
// after the other (a limit checked twice sees its first check's units), beside the inner
// store's checks, sent together.
struct Pending {
  struct Item {
    LeasedLimiter* leased = nullptr;  // null: decided by the inner store
    Limiter* inner = nullptr;         // the inner store's limiter
    std::string key;
  };
  Timestamp now;
  Store::DecideAllCallback done;
  std::vector<Item> items;
  std::vector<LimitCheck> checks;  // as asked (keys point into items)
  std::vector<Decision> out;
  std::vector<LimitCheck> inner_checks;  // those sent to the inner store together
  std::vector<size_t> inner_index;       // their index in `checks`
  bool inner_refused = false;            // the inner store already gave back its admissions
  std::vector<size_t> give_back;         // a refused request's, newest first
  size_t given_back = 0;
  std::atomic<int> outstanding{1};

  void Arrive(const std::shared_ptr<Pending>& self) {
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(self);
  }

  // The leased checks from `i` on, one at a time; then arrives.
  static void DecideLeasedFrom(const std::shared_ptr<Pending>& p, size_t i) {
    while (i < p->items.size() && p->items[i].leased == nullptr) ++i;
    if (i == p->items.size()) return p->Arrive(p);
    const LimitCheck& c = p->checks[i];
    p->items[i].leased->DecideLeased(p->items[i].key, p->now, c.cost, c.charge,
                                     [p, i](const Decision& d) {
                                       p->out[i] = d;
                                       DecideLeasedFrom(p, i + 1);
                                     });
  }

  // All or nothing, as every store: a refused request keeps nothing but its charges, and is
  // answered once what it gives back counts -- so that the next decision for its keys sees it
  // (the inner store may run that decision on another connection). Possibly on the inner
  // store's I/O thread: nothing here waits.
  static void Finish(const std::shared_ptr<Pending>& p) {
    internal::GiveBackIfRefused(p->checks, p->out, [&p](size_t i) {
      // Given back, and reported so, by the inner store already.
      if (p->items[i].leased != nullptr || !p->inner_refused) p->give_back.push_back(i);
      return false;  // reported when its give-back is answered (GiveBackNext)
    });
    GiveBackNext(p);
  }

  // One at a time, newest first, as the inner store unwinds its own (store/give_back.h).
  static void GiveBackNext(const std::shared_ptr<Pending>& p) {
    if (p->given_back == p->give_back.size()) return p->done(p->out);
    const size_t i = p->give_back[p->given_back++];
    const Item& item = p->items[i];
    Limiter* limiter = item.leased != nullptr ? item.leased : item.inner;
    limiter->RefundThen(item.key, p->now, p->now, p->checks[i].cost, [p, i](bool given_back) {
      if (given_back) internal::ReportGivenBack(p->out[i], p->checks[i].cost);
      GiveBackNext(p);
    });
  }
};

void LeasedStoreImpl::DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                                     DecideAllCallback done) {
  // The hot path: one check of a leased limit, which needs no all-or-nothing bookkeeping.
  if (checks.size() == 1) {
    if (LeasedLimiter* l = Own<LeasedLimiter>(checks[0])) {
      return l->DecideLeased(
          std::string(checks[0].key), now, checks[0].cost, checks[0].charge,
          [done = std::move(done)](const Decision& d) { done(std::span<const Decision>(&d, 1)); });
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
  p->out.resize(checks.size());
  const internal::InnerRequest unwrapped = InnerChecks(checks);
  for (size_t i = 0; i < checks.size(); ++i) {
    Pending::Item& item = p->items[i];
    item.key = std::string(checks[i].key);
    item.inner = unwrapped.checks[i].limiter;
    item.leased = Own<LeasedLimiter>(checks[i]);
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    LimitCheck c = checks[i];
    c.key = p->items[i].key;
    p->checks.push_back(c);
    if (p->items[i].leased != nullptr) continue;
    c.limiter = p->items[i].inner;
    p->inner_checks.push_back(c);
    p->inner_index.push_back(i);
  }
  if (!p->inner_checks.empty()) {
    p->outstanding.fetch_add(1);
    inner_store().DecideAllAsync(p->inner_checks, now, [p](std::span<const Decision> decided) {
      for (size_t j = 0; j < decided.size() && j < p->inner_index.size(); ++j) {
        p->out[p->inner_index[j]] = decided[j];
      }
      p->inner_refused = RequestRefused(p->inner_checks, decided);
      p->Arrive(p);
    });
  }
  Pending::DecideLeasedFrom(p, 0);
}

}  // namespace

Result<std::shared_ptr<LeasedStore>> OpenLeasedStore(std::shared_ptr<Store> inner,
                                                     LeasedStoreOptions options) {
  if (inner == nullptr) return MakeError("the leased store needs a store behind it");
  return std::shared_ptr<LeasedStore>(
      std::make_shared<LeasedStoreImpl>(std::move(inner), std::move(options)));
}

}  // namespace sluice
