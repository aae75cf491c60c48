// The batched store (include/sluice/batched_store.h): routing of requests between the views and
// the inner store, the flush, its timers.
#include "sluice/batched_store.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sluice/algorithm.h"
#include "sluice/decide_all.h"
#include "store/batched/batched_store_impl.h"
#include "store/owned_checks.h"

namespace sluice {

Result<void> CheckBatchable(const LimitSpec& spec) {
  if (SharedSyncCanServe(spec)) return {};
  if (spec.shaper) {
    return MakeError(
        "sync mode batched: a leaky-bucket shaper delays each request by the queue ahead of it, "
        "which only the shared store knows; use the meter (shaper: false) or sync: exact");
  }
  return MakeError(
      "sync mode batched serves token_bucket, gcra, fixed_window and leaky_bucket "
      "(meter); " +
      std::string(AlgorithmName(spec.algorithm)) +
      "'s state cannot be read back from the shared store's answer; use sync: exact");
}

Result<std::shared_ptr<BatchedStore>> OpenBatchedStore(std::shared_ptr<Store> inner,
                                                       const BatchedStoreOptions& options) {
  if (inner == nullptr) return MakeError("batched store: no store to wrap");
  return std::make_shared<internal::BatchedStoreImpl>(std::move(inner), options);
}

namespace internal {

namespace {

// The options' clock (not owned), else the scheduler's, else one of the store's own.
std::shared_ptr<const Clock> ClockOf(const BatchedStoreOptions& options) {
  if (options.clock != nullptr) return options.clock;
  if (options.scheduler != nullptr) {
    return std::shared_ptr<const Clock>(options.scheduler, &options.scheduler->clock());
  }
  return std::make_shared<MonotonicClock>();
}

}  // namespace

BatchedStoreImpl::BatchedStoreImpl(std::shared_ptr<Store> inner, const BatchedStoreOptions& options)
    : ForwardingStore(std::move(inner)),
      max_bytes_(options.max_bytes),
      clock_(ClockOf(options)),
      scheduler_(options.scheduler != nullptr ? options.scheduler
                                              : std::make_shared<ThreadScheduler>(*clock_)) {}

BatchedStoreImpl::~BatchedStoreImpl() {
  // The timers go first (outside the registry's lock, which a sync in progress takes).
  std::map<Duration, std::unique_ptr<Scheduler::Task>> timers;
  {
    std::lock_guard lock(registry_mu_);
    timers.swap(timers_);
  }
  timers.clear();
  // Every batched limiter sent its hits when it went (it holds this store alive until then);
  // the answers may still be on their way, and are not waited for: what they touch (the items,
  // the inner limiters, `retiring_`) they hold themselves, never this store. Waiting here would
  // deadlock when this destructor runs on the inner store's I/O thread -- an answered
  // DecideAllAsync callback holding the last reference -- where those answers must come from.
  // (The Redis store, if this lets go of its last reference there, hands its own destruction to
  // another thread: redis_store_impl.h.)
}

void BatchedStoreImpl::SyncEvery(Duration interval, Timestamp now) {
  std::unique_ptr<Scheduler::Task> unused;  // this timer, if no limiter needs it any more
  std::lock_guard flush(flush_mu_);
  std::vector<std::shared_ptr<ViewTable>> due;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& t : tables_) {
      if (t->interval() != interval) continue;
      due.push_back(t);
      t->set_next_due(now + interval);
    }
    if (auto it = timers_.find(interval); due.empty() && it != timers_.end()) {
      unused = std::move(it->second);  // cancelled from its own run, when this returns
      timers_.erase(it);
    }
  }
  FlushTables(due, now);
}

Result<std::unique_ptr<Limiter>> BatchedStoreImpl::MakeLimiter(const LimitSpec& spec,
                                                               const LimiterOptions& options) {
  if (options.sync.mode == SyncMode::kBatched) {
    if (auto ok = CheckBatchable(spec); !ok) return std::unexpected(ok.error());
    if (options.sync.interval <= Duration(0)) {
      return MakeError("sync mode batched: interval must be positive");
    }
  }
  auto inner = inner_store().MakeLimiter(spec, options);
  if (!inner) return std::unexpected(inner.error());
  if (options.sync.mode != SyncMode::kBatched) {
    return std::make_unique<CountingLimiter>(this, std::move(*inner), forwarded_);
  }
  std::shared_ptr<Limiter> shared_inner = std::move(*inner);
  auto table = MakeViewTable(*this, shared_inner, spec, options.sync.interval);
  if (table == nullptr) return MakeError("sync mode batched: cannot decide this limit locally");
  const Duration interval = options.sync.interval;
  table->set_next_due(clock_->Now() + interval);
  {
    std::lock_guard lock(registry_mu_);
    tables_.push_back(table);
    // The first sync comes at the interval's next tick: within one interval.
    auto& timer = timers_[interval];
    if (timer == nullptr) {
      timer = scheduler_->Every(interval,
                                [this, interval](Timestamp now) { SyncEvery(interval, now); });
    }
  }
  return std::make_unique<BatchedLimiter>(shared_from_this(), std::move(shared_inner),
                                          std::move(table));
}

bool BatchedStoreImpl::AllLocal(std::span<const LimitCheck> checks) const {
  if (checks.empty()) return false;
  return std::all_of(checks.begin(), checks.end(), [this](const LimitCheck& c) {
    const BatchedLimiter* mine = Own<BatchedLimiter>(c);
    return mine != nullptr && mine->table()->HasView(c.key);
  });
}

namespace {

// Whether checks[i]'s limiter and key are checked again elsewhere in the request.
bool CheckedTwice(std::span<const LimitCheck> checks, size_t i) {
  for (size_t j = 0; j < checks.size(); ++j) {
    if (j != i && checks[j].limiter == checks[i].limiter && checks[j].key == checks[i].key) {
      return true;
    }
  }
  return false;
}

// Whether an earlier check of the request is for checks[i]'s limiter and key.
bool CheckedBefore(std::span<const LimitCheck> checks, size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (checks[j].limiter == checks[i].limiter && checks[j].key == checks[i].key) return true;
  }
  return false;
}

}  // namespace

std::vector<Tracked> BatchedStoreImpl::TrackAll(std::span<const LimitCheck> checks, Timestamp now,
                                                std::span<LimitCheck> inner) {
  std::vector<Tracked> tracked(checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    BatchedLimiter* mine = Own<BatchedLimiter>(checks[i]);
    if (mine == nullptr) continue;
    // The shared state does not have this node's unsent hits: they go with the key's first
    // check, so that the inner store decides the request as the view would (one node never
    // over-admits), and takes them with it or not at all.
    tracked[i] = mine->table()->Track(checks[i].key, now, checks[i].cost,
                                      /*ride=*/!CheckedBefore(checks, i));
    inner[i].cost += tracked[i].riding;
  }
  return tracked;
}

void BatchedStoreImpl::ObserveAll(std::span<const LimitCheck> checks, Timestamp now,
                                  std::span<Decision> out, const std::vector<Tracked>& tracked) {
  const bool refused = RequestRefused(checks, out);
  for (size_t i = 0; i < checks.size(); ++i) {
    if (!tracked[i].tracked) continue;
    ViewTable* table = Own<BatchedLimiter>(checks[i])->table();
    // A check's cost was kept when it was a charge, or an admission of a request that was not
    // refused (a refused one gives its admissions back); never when the store could not answer.
    const Decision& d = out[i];
    const bool answered = !d.degraded && d.reason != DecisionReason::kInvalidRequest;
    const bool taken = answered && (checks[i].charge || (d.allowed && !refused));
    // A refused request's answer for a key it checked twice was decided after the other check's
    // take, which the refusal then gave back: it does not describe the shared state, so it seeds
    // no view (marked as saying nothing; what was taken is still counted).
    Decision seen = d;
    if (refused && CheckedTwice(checks, i)) seen.degraded = true;
    table->Observe(checks[i].key, now, checks[i].cost, checks[i].charge, seen, taken, tracked[i]);
    // Reported for the check's own cost, on the shared state with the hits that rode in it.
    if (!taken && tracked[i].riding > 0) table->Unride(out[i], tracked[i].riding);
  }
}

// A request whose every check has a view is decided here, all or nothing as decide_all.h does
// it (local refunds). Anything else -- an exact limit among them, a key seen for the first time
// -- goes to the inner store whole, which keeps all-or-nothing its job, with this node's unsent
// hits on the request's keys added to their checks' costs (TrackAll), and its answers seed the
// views.
void BatchedStoreImpl::DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                                      DecideAllCallback done) {
  if (AllLocal(checks)) {
    std::vector<Decision> out(checks.size());
    sluice::DecideAll(checks, now, out);
    done(out);
    return;
  }
  // What the answer's handler reads: the checks with keys of their own.
  auto pending = std::make_shared<internal::OwnedChecks>(checks);
  std::vector<LimitCheck> inner = InnerChecks(checks).checks;
  std::vector<Tracked> tracked = TrackAll(checks, now, inner);
  auto self = shared_from_this();
  inner_store().DecideAllAsync(inner, now,
                               [self, pending, now, tracked = std::move(tracked),
                                done = std::move(done)](std::span<const Decision> answers) {
                                 self->CountForwarded(pending->checks.size());
                                 std::vector<Decision> out(answers.begin(), answers.end());
                                 self->ObserveAll(pending->checks, now, out, tracked);
                                 done(out);
                               });
}

StoreStats BatchedStoreImpl::Stats() const {
  StoreStats s = ForwardingStore::Stats();
  s.batched = true;
  s.bytes += bytes_.load(std::memory_order_relaxed);
  s.max_bytes += max_bytes_;
  // As the over-limit cache counts them: everything passed on, local decisions included (the
  // metrics take those out of Redis's share).
  s.local_decisions = local_.load(std::memory_order_relaxed);
  s.forwarded_decisions = s.local_decisions + forwarded_.load(std::memory_order_relaxed);
  std::lock_guard lock(registry_mu_);
  for (const auto& t : tables_) {
    s.keys += t->views();
    s.batched_pending_hits += t->pending_hits();
    s.batched_over_admitted_hits += t->over_admitted();
  }
  s.batched_over_admitted_hits += retired_over_admitted_.load(std::memory_order_relaxed);
  return s;
}

bool BatchedStoreImpl::Reserve(size_t bytes) {
  size_t now = bytes_.load(std::memory_order_relaxed);
  do {
    if (now + bytes > max_bytes_) {
      views_refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!bytes_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  return true;
}

Timestamp BatchedStoreImpl::AnswerTime(Timestamp sent) const {
  return std::max(sent, clock_->Now());
}

void BatchedStoreImpl::Retire(const std::shared_ptr<ViewTable>& table) {
  {
    std::lock_guard lock(registry_mu_);
    std::erase(tables_, table);
  }
  retired_over_admitted_.fetch_add(table->over_admitted(), std::memory_order_relaxed);
  const Timestamp now = clock_->Now();
  BatchedFlush result;
  // The items (and through them the table and its inner limiter) live until the last answer,
  // and go before the store learns it is the last: the inner store must not be left to go on
  // its own I/O thread.
  struct Send {
    std::mutex mu;
    std::vector<FlushItem> items;
    size_t calls = 0;
  };
  auto send = std::make_shared<Send>();
  table->Collect(now, /*last=*/true, send->items, result);
  if (send->items.empty()) return;
  send->calls = (send->items.size() + kChecksPerCall - 1) / kChecksPerCall;
  {
    std::lock_guard lock(retiring_->mu);
    retiring_->calls += send->calls;
  }
  const std::vector<FlushItem> items = send->items;  // the calls' keys, read before Send returns
  this->Send(items, now, [send, retiring = retiring_](size_t, std::span<const Decision>) {
    {
      std::lock_guard lock(send->mu);
      if (--send->calls == 0) send->items.clear();
    }
    std::lock_guard lock(retiring->mu);
    if (--retiring->calls == 0) retiring->cv.notify_all();
  });
}

BatchedFlush BatchedStoreImpl::FlushDue(Timestamp now) {
  std::lock_guard flush(flush_mu_);
  std::vector<std::shared_ptr<ViewTable>> due;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& t : tables_) {
      if (t->next_due() > now) continue;
      due.push_back(t);
      t->set_next_due(now + t->interval());
    }
  }
  return FlushTables(due, now);
}

// Also waits for the last sends of limiters that went: what a test reads from Redis afterwards
// includes them.
BatchedFlush BatchedStoreImpl::Flush(Timestamp now) {
  std::lock_guard flush(flush_mu_);
  std::vector<std::shared_ptr<ViewTable>> all;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& t : tables_) t->set_next_due(now + t->interval());
    all = tables_;
  }
  BatchedFlush result = FlushTables(all, now);
  std::unique_lock lock(retiring_->mu);
  retiring_->cv.wait(lock, [this] { return retiring_->calls == 0; });
  return result;
}

void BatchedStoreImpl::Send(
    const std::vector<FlushItem>& items, Timestamp now,
    const std::function<void(size_t, std::span<const Decision>)>& answered) {
  for (size_t begin = 0; begin < items.size(); begin += kChecksPerCall) {
    const size_t end = std::min(items.size(), begin + kChecksPerCall);
    std::vector<LimitCheck> checks;
    checks.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      const FlushItem& item = items[i];
      // A refresh asks at cost 0 (takes nothing); hits are charged, never refused.
      checks.push_back(
          LimitCheck{item.table->inner(), item.key, item.hits, /*charge=*/item.hits > 0});
    }
    inner_store().DecideAllAsync(
        checks, now, [answered, begin](std::span<const Decision> out) { answered(begin, out); });
  }
}

// Every item is one charge; they go to the inner store in calls of kChecksPerCall checks (on
// Redis: one script per call and hash slot), all sent before any answer is awaited, so they
// share round trips.
BatchedFlush BatchedStoreImpl::FlushTables(std::span<const std::shared_ptr<ViewTable>> tables,
                                           Timestamp now) {
  BatchedFlush result;
  std::vector<FlushItem> items;
  for (const auto& t : tables) t->Collect(now, /*last=*/false, items, result);
  if (items.empty()) return result;

  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    size_t calls_left = 0;
    std::vector<Decision> out;
  };
  auto wait = std::make_shared<Wait>();
  wait->out.resize(items.size());
  wait->calls_left = (items.size() + kChecksPerCall - 1) / kChecksPerCall;
  Send(items, now, [wait](size_t begin, std::span<const Decision> out) {
    std::lock_guard lock(wait->mu);
    std::copy(out.begin(), out.end(), wait->out.begin() + static_cast<ptrdiff_t>(begin));
    if (--wait->calls_left == 0) wait->cv.notify_all();
  });
  {
    // Every call answers exactly once, within the inner store's own timeout.
    std::unique_lock lock(wait->mu);
    wait->cv.wait(lock, [&] { return wait->calls_left == 0; });
  }
  const Timestamp at = AnswerTime(now);
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].table->Apply(items[i], wait->out[i], at, result);
  }
  return result;
}

}  // namespace internal
}  // namespace sluice
