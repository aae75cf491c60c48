// The batched store's limiters: one that passes everything to the inner store's limiter, counted
// (every sync mode but batched), and one per batchable algorithm that decides from local views kept
// in a ViewTable. Internal to the batched store (include/sluice/batched_store.h).
#ifndef SLUICE_STORE_BATCHED_BATCHED_LIMITER_H_
#define SLUICE_STORE_BATCHED_BATCHED_LIMITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/batched_store.h"
#include "sluice/limiter.h"
#include "store/forwarding.h"

namespace sluice::internal {

class BatchedStoreImpl;

// Every other sync mode: the inner store's limiter, unchanged; its decisions are counted as the
// inner store's (`forwarded`).
class CountingLimiter final : public ForwardingLimiter {
 public:
  CountingLimiter(const Store* owner, std::shared_ptr<Limiter> inner,
                  std::atomic<uint64_t>& forwarded)
      : ForwardingLimiter(owner, std::move(inner)), forwarded_(forwarded) {}
  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    Count(1);
    return ForwardingLimiter::Decide(key, now, cost);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    Count(1);
    return ForwardingLimiter::Charge(key, now, cost);
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    Count(1);
    ForwardingLimiter::DecideAsync(key, now, cost, std::move(done));
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    Count(1);
    ForwardingLimiter::ChargeAsync(key, now, cost, std::move(done));
  }
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    Count(requests.size());
    ForwardingLimiter::DecideBatch(requests, out);
  }
  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override {
    Count(1);  // one decision of the request's cost, with its units, in one step
    ForwardingLimiter::TakeAsync(key, now, request, std::move(done));
  }

 private:
  void Count(size_t n) { forwarded_.fetch_add(n, std::memory_order_relaxed); }
  std::atomic<uint64_t>& forwarded_;
};

// One key's unsent hits taken out of its view by a sync, and sent as one charge.
struct FlushItem {
  std::shared_ptr<class ViewTable> table;
  std::string key;
  int64_t hits = 0;      // charged (0: only a refresh of the view)
  int64_t admitted = 0;  // of them, admissions this node decided (the rest: charges)
};

// A request sent to the inner store, as its view tracks it (ViewTable::Track).
struct Tracked {
  bool tracked = false;
  int64_t riding = 0;           // the view's unsent hits sent with it, added to its cost
  int64_t riding_admitted = 0;  // of them, admissions (the rest: charges)
};

// The views of one batched limit, whatever its algorithm. Shared by its limiter, the syncs under
// way and, once the limiter has gone, its last send, so none of them waits for another.
class ViewTable {
 public:
  ViewTable(BatchedStoreImpl& store, std::shared_ptr<Limiter> inner, Duration interval)
      : store_(store), inner_(std::move(inner)), interval_(interval) {}
  virtual ~ViewTable() = default;

  Limiter* inner() const { return inner_.get(); }
  Duration interval() const { return interval_; }
  Timestamp next_due() const { return FromNanos(next_due_ns_.load(std::memory_order_relaxed)); }
  void set_next_due(Timestamp t) { next_due_ns_.store(ToNanos(t), std::memory_order_relaxed); }

  // The limiter's operations (batched_limiter.cc says what each does to the views).
  virtual Decision Take(std::string_view key, Timestamp now, int64_t cost, bool charge) = 0;
  virtual void TakeAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                         Limiter::DecisionCallback done) = 0;
  virtual void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) = 0;
  virtual void Reset(std::string_view key) = 0;
  // Forgets the key's view, its unsent hits with it (an admin adjustment: the next request is
  // decided by the inner store, which then seeds a new view).
  virtual void DropView(std::string_view key) = 0;
  // Whether a view (seeded) is held for `key` (DecideAll's choice).
  virtual bool HasView(std::string_view key) const = 0;
  // A request of `cost` for `key` is sent to the inner store (DecideAll sends a request there
  // whole, or the key had no view): the view counts it as taken until Observe, or a placeholder
  // is made for the answer to seed. Not tracked (no room, or the limiter has gone): Observe
  // must then not be called. With `ride`, the view's unsent hits go with the request, added to
  // its cost (Tracked::riding): the inner store then decides it on the shared state with this
  // node's hits in it, as the view would, and takes them with the cost or not at all.
  virtual Tracked Track(std::string_view key, Timestamp now, int64_t cost, bool ride) = 0;
  // The inner store's answer to a tracked request, and whether it kept the cost (`taken`): a
  // cost it did not keep is given back to the view, and a placeholder is seeded from the answer.
  // Hits that rode with it and were not kept are unsent again.
  virtual void Observe(std::string_view key, Timestamp now, int64_t cost, bool charge,
                       const Decision& answer, bool taken, const Tracked& tracked) = 0;
  // `answer`, to a request that did not keep the cost and the `riding` hits added to it,
  // reported as for its own cost on the shared state with those hits in it.
  virtual void Unride(Decision& answer, int64_t riding) const = 0;

  // Takes every view's unsent hits into `items` (a view used since the last sync with none: a
  // refresh of cost 0), and drops the views unused since the last sync. `last`: the limiter
  // has gone; only hits, and every view is dropped.
  virtual void Collect(Timestamp now, bool last, std::vector<FlushItem>& items,
                       BatchedFlush& result) = 0;
  // The inner store's answer to one item, received at `at`: the view is read back from it, and
  // the hits taken since are applied again; an answer that is not the store's (degraded) puts
  // the hits back.
  virtual void Apply(const FlushItem& item, const Decision& answer, Timestamp at,
                     BatchedFlush& result) = 0;
  virtual uint64_t views() const = 0;
  virtual uint64_t pending_hits() const = 0;
  uint64_t over_admitted() const { return over_admitted_.load(std::memory_order_relaxed); }

 protected:
  BatchedStoreImpl& store() const { return store_; }
  void CountOverAdmitted(int64_t hits) {
    if (hits > 0) over_admitted_.fetch_add(static_cast<uint64_t>(hits), std::memory_order_relaxed);
  }

 private:
  BatchedStoreImpl& store_;  // outlives every table (its destructor waits for the last sends)
  const std::shared_ptr<Limiter> inner_;
  const Duration interval_;
  std::atomic<int64_t> next_due_ns_{0};
  std::atomic<uint64_t> over_admitted_{0};
};

// A table for `spec` (CheckBatchable(spec) holds); null if the algorithm cannot be batched.
std::shared_ptr<ViewTable> MakeViewTable(BatchedStoreImpl& store, std::shared_ptr<Limiter> inner,
                                         const LimitSpec& spec, Duration interval);

// A batched limit's limiter: its table's operations; when it goes, the store sends what the
// table still holds.
class BatchedLimiter final : public ForwardingLimiter {
 public:
  BatchedLimiter(std::shared_ptr<BatchedStoreImpl> store, std::shared_ptr<Limiter> inner,
                 std::shared_ptr<ViewTable> table);
  ~BatchedLimiter() override;
  ViewTable* table() const { return table_.get(); }
  bool served_by_layer() const override { return true; }

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    return table_->Take(key, now, cost, /*charge=*/false);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    return table_->Take(key, now, cost, /*charge=*/true);
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    table_->TakeAsync(key, now, cost, /*charge=*/false, std::move(done));
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    table_->TakeAsync(key, now, cost, /*charge=*/true, std::move(done));
  }
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    table_->Refund(key, at, now, cost);
  }
  // A view's refund is in memory: it never waits for the inner store.
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    table_->Refund(key, at, now, cost);
  }
  // The rest from the views too, as Limiter's defaults do it over the calls above: a batch one
  // by one, a lease's units with a second take, units given back as a refund.
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    Limiter::DecideBatch(requests, out);
  }
  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override {
    Limiter::TakeAsync(key, now, request, std::move(done));
  }
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override {
    Limiter::GiveBack(key, stamp_us, now, units);
  }
  void Reset(std::string_view key) override { table_->Reset(key); }
  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override {
    table_->DropView(key);
    return ForwardingLimiter::Adjust(key, now, change);
  }
  StoreStats Stats() const override;
  // Its over-admitted hits (batched_stats.cc).
  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override;

 private:
  const std::shared_ptr<BatchedStoreImpl> store_;
  const std::shared_ptr<ViewTable> table_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_BATCHED_BATCHED_LIMITER_H_
