// The batched store itself: which requests are decided from views and which go to the inner
// store whole, the flush that sends the views' hits, its timers, and the memory the views share.
// Internal to the batched store (include/sluice/batched_store.h).
#ifndef SLUICE_STORE_BATCHED_BATCHED_STORE_IMPL_H_
#define SLUICE_STORE_BATCHED_BATCHED_STORE_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "sluice/batched_store.h"
#include "store/batched/batched_limiter.h"

namespace sluice::internal {

class BatchedStoreImpl final : public ForwardingStore<BatchedStore>,
                               public std::enable_shared_from_this<BatchedStoreImpl> {
 public:
  static constexpr size_t kChecksPerCall = 128;  // charges per inner DecideAll of a flush

  BatchedStoreImpl(std::shared_ptr<Store> inner, const BatchedStoreOptions& options);
  ~BatchedStoreImpl() override;

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override;
  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override;
  StoreStats Stats() const override;
  // Where its decisions were taken, the hits not yet sent, over-admission (batched_stats.cc).
  void ReportStats(StatsSink& sink) const override;
  BatchedFlush FlushDue(Timestamp now) override;
  BatchedFlush Flush(Timestamp now) override;

  // For the limiters.
  bool Reserve(size_t bytes);  // false: the views' bound is reached
  void Release(size_t bytes) { bytes_.fetch_sub(bytes, std::memory_order_relaxed); }
  void CountLocal(size_t n) { local_.fetch_add(n, std::memory_order_relaxed); }
  void CountForwarded(size_t n) { forwarded_.fetch_add(n, std::memory_order_relaxed); }
  // When an answer is received: the clock's now, never before `sent`.
  Timestamp AnswerTime(Timestamp sent) const;
  // A batched limiter has gone: its table is synced no more, and what it holds is sent without
  // waiting for the answer (the store's destructor waits for such sends, for a while).
  void Retire(const std::shared_ptr<ViewTable>& table);

 private:
  // Syncs `tables` (flush_mu_ held): sends their hits, waits for the answers, applies them.
  BatchedFlush FlushTables(std::span<const std::shared_ptr<ViewTable>> tables, Timestamp now);
  // Sends `items` in calls of kChecksPerCall checks; `answered` gets each call's first item's
  // index and its decisions.
  void Send(const std::vector<FlushItem>& items, Timestamp now,
            const std::function<void(size_t, std::span<const Decision>)>& answered);
  // Every check is a batched limiter's, on a key it holds a view of: decided here.
  bool AllLocal(std::span<const LimitCheck> checks) const;
  // The whole request goes to the inner store: each batched check's view counts its cost as
  // taken until the answer, and its unsent hits go with it, added to the cost of the key's first
  // check in `inner` (ViewTable::Track).
  std::vector<Tracked> TrackAll(std::span<const LimitCheck> checks, Timestamp now,
                                std::span<LimitCheck> inner);
  // The inner store decided the whole request: its answers settle and seed the views, and are
  // reported as for the checks' own costs.
  void ObserveAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out,
                  const std::vector<Tracked>& tracked);
  // The timer of the limiters synced every `interval`: syncs them all at `now`; when none is
  // left, the timer cancels itself.
  void SyncEvery(Duration interval, Timestamp now);

  const size_t max_bytes_;
  const std::shared_ptr<const Clock> clock_;
  const std::shared_ptr<Scheduler> scheduler_;  // the options', or a ThreadScheduler on clock_

  std::mutex flush_mu_;             // held by a sync throughout: syncs never overlap
  mutable std::mutex registry_mu_;  // the tables synced
  std::vector<std::shared_ptr<ViewTable>> tables_;
  // One timer per interval in use (registry_mu_): the limiters of one interval sync together,
  // their charges sharing round trips, and a thread of a ThreadScheduler serves each interval.
  std::map<Duration, std::unique_ptr<Scheduler::Task>> timers_;
  // The last sends of limiters that went, not yet answered.
  struct Retiring {
    std::mutex mu;
    std::condition_variable cv;
    size_t calls = 0;
  };
  const std::shared_ptr<Retiring> retiring_ = std::make_shared<Retiring>();

  std::atomic<size_t> bytes_{0};
  std::atomic<uint64_t> views_refused_{0};
  std::atomic<uint64_t> local_{0};
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> retired_over_admitted_{0};  // counted by limiters that went
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_BATCHED_BATCHED_STORE_IMPL_H_
