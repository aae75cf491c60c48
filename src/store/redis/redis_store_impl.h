// RedisStoreImpl: the Redis store (include/sluice/redis_store.h) -- its transport, monitor and
// events, and its DecideAll over slot groups (redis_slots.cc) with the refunds of a refused
// request (redis_refunds.cc). Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_STORE_IMPL_H_
#define SLUICE_STORE_REDIS_REDIS_STORE_IMPL_H_

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/redis_store.h"
#include "store/redis/redis_events.h"
#include "store/redis/redis_limiter.h"
#include "store/redis/redis_reply.h"
#include "store/redis/redis_slots.h"
#include "store/redis/redis_transport.h"
#include "store/redis/sentinel_transport.h"

namespace sluice::internal {

class RedisStoreImpl final : public RedisStore,
                             public std::enable_shared_from_this<RedisStoreImpl> {
 public:
  RedisStoreImpl(RedisStoreOptions options, const RedisEndpoint& endpoint,
                 std::vector<RedisEndpoint> seeds)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr       ? options_.clock
               : options_.scheduler != nullptr ? &options_.scheduler->clock()
                                               : &own_clock_),
        scheduler_(options_.scheduler != nullptr ? options_.scheduler
                                                 : std::make_shared<ThreadScheduler>(*clock_)),
        server_(!options_.sentinels.empty() ? "sentinel:" + options_.sentinel_master
                : seeds.empty()             ? endpoint.Name()
                                            : seeds.front().Name()),
        throttle_(options_.on_event, *clock_, options_.event_interval),
        events_([this](RedisEvent e) { throttle_.Emit(std::move(e)); }) {
    const NodeSettings settings{
        {options_.breaker_failures, options_.breaker_open_for}, clock_, &events_};
    if (!options_.sentinels.empty()) {
      transport_ =
          MakeSentinelTransport(SentinelFor(options_, endpoint), options_.connections, settings);
    } else {
      transport_ = seeds.empty()
                       ? MakeStandaloneTransport(endpoint, options_.connections, settings)
                       : MakeClusterTransport(std::move(seeds), options_.connections, settings);
    }
    // A round at once (a wrong password is reported at start, not at the first request), then
    // one every monitor_interval until the store closes.
    if (options_.monitor_interval.count() > 0) {
      monitor_ = scheduler_->Every(
          options_.monitor_interval, [this](Timestamp) { MonitorOnce(); }, Duration(0));
    }
  }

  // OpenRedisStore's deleter, for the store's last reference.
  //
  // Invariant: a store is never destroyed on one of its own connections' I/O threads, since
  // destroying it stops and joins them. Yet the last reference can go there: a callback that
  // holds a limiter or the store (a refund given back in the background when a leased limiter
  // goes) is destroyed on the thread that answered it. The deletion is then handed to a thread of
  // its own, which destroys the store as any other owner would (joining the I/O threads, which
  // answer what is still queued while the store is alive) and ends with it; the I/O thread
  // returns to its loop at once. (Letting an I/O thread outlive its connection instead would run
  // the callbacks still queued after the node and scripts they point into are gone.)
  static void Delete(RedisStoreImpl* store);

  // The monitor goes before anything else: it uses the transport and the events.
  ~RedisStoreImpl() override { monitor_.reset(); }

  void MonitorOnce() override {
    std::lock_guard<std::mutex> lock(monitor_round_mu_);
    transport_->Monitor();
    throttle_.Flush();
  }

  // A script call Redis answered with an error (OOM, WRONGTYPE, NOAUTH, a script bug).
  void CommandError(const Error& error) {
    events_(RedisEvent{
        IsAuthFailure(error) ? RedisEventKind::kAuthFailed : RedisEventKind::kCommandError, server_,
        "redis " + server_ + ": script call failed: " + error.message, false, 0});
  }

  using RedisStore::MakeLimiter;
  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override;

  void DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                 std::span<Decision> out) override;
  // Concurrency permits: keys <prefix>:permits:{<id>:<identity>} (redis_permits.cc).
  Result<std::unique_ptr<PermitPool>> MakePermitPool(const PermitSpec& spec,
                                                     const LimiterOptions& options) override;
  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override;

  bool Ping() override {
    const std::array<std::string_view, 1> ping = {"PING"};
    auto reply = transport_->Command("", ping);
    return reply.has_value() && reply->str == "PONG";
  }

  StoreStats Stats() const override {
    StoreStats s;
    s.store_errors = errors_.load(std::memory_order_relaxed);
    s.short_circuited = short_circuited_.load(std::memory_order_relaxed);
    const EvictionState e = transport_->Eviction();
    s.server_eviction_watched = e.watched;
    s.server_eviction_unsafe = e.unsafe;
    s.server_evicted_keys = e.evicted;
    return s;
  }
  // Its servers' eviction, when it watches it (redis_stats.cc).
  void ReportStats(StatsSink& sink) const override;

  void CountFailure(bool short_circuit) {
    (short_circuit ? short_circuited_ : errors_).fetch_add(1, std::memory_order_relaxed);
  }

  RedisStoreStats RedisStats() const override {
    const TransportStats t = transport_->Stats();
    RedisStoreStats s{t.requests,      t.batches,         t.redirects,        t.retries,
                      t.map_refreshes, t.short_circuited, t.connection_errors};
    s.refunds = refunds_.load(std::memory_order_relaxed);
    s.refund_failures = refund_failures_.load(std::memory_order_relaxed);
    return s;
  }

  const RedisStoreOptions& options() const { return options_; }
  RedisTransport& transport() { return *transport_; }

 private:
  struct AsyncAll;

  // The pieces DecideAll and DecideAllAsync share, so that both decide alike.
  std::vector<SlotGroup> Group(std::span<const LimitCheck> checks, std::span<Decision> out) const;
  void MultiCall(const SlotGroup& group, Timestamp now, size_t quota_total,
                 std::vector<std::string>& keys, std::vector<std::string>& args) const;
  GroupOutcome ReadGroup(const SlotGroup& group, const Result<RedisReply>& reply,
                         std::span<Decision> out) const;
  std::vector<std::string> RefundArgs(const SlotCheck& c, Timestamp now, int64_t at_us) const;
  // Counts a refund's outcome; returns it.
  bool CountRefund(bool given_back);
  // Per check, its group's script now if the group's admissions stood (null otherwise: a group
  // the script rolled back gave its admissions back itself).
  static std::vector<std::pair<const SlotCheck*, int64_t>> AdmittedByIndex(
      size_t checks, std::span<const std::pair<const SlotGroup*, int64_t>> admitted);
  static void RefundAsync(const std::shared_ptr<AsyncAll>& state);
  static void RefundNext(const std::shared_ptr<AsyncAll>& state);

  const RedisStoreOptions options_;
  MonotonicClock own_clock_;
  const Clock* clock_;
  const std::shared_ptr<Scheduler> scheduler_;
  const std::string server_;  // host:port (a cluster: its first seed), for events
  EventThrottle throttle_;
  std::function<void(RedisEvent)> events_;  // into throttle_
  std::atomic<uint64_t> refunds_{0};
  std::atomic<uint64_t> refund_failures_{0};
  std::atomic<uint64_t> errors_{0};  // failed calls of every limiter (Stats)
  std::atomic<uint64_t> short_circuited_{0};
  // After the clock and the events: its connections' threads stop before those go away.
  std::unique_ptr<RedisTransport> transport_;
  std::mutex monitor_round_mu_;               // one round at a time (the scheduler's, a test's)
  std::unique_ptr<Scheduler::Task> monitor_;  // cancelled by the destructor, before anything goes
};

// The state of one DecideAllAsync: its groups' replies may come on different connections'
// threads, so it is shared and locked; the last reply (or refund) completes it.
struct RedisStoreImpl::AsyncAll {
  std::shared_ptr<RedisStoreImpl> store;
  Timestamp now;
  std::vector<Decision> out;
  std::vector<SlotGroup> groups;
  DecideAllCallback done;
  std::mutex mu;
  size_t pending = 0;             // group replies still to come
  std::vector<LimitCheck> kinds;  // the checks without their keys: what RequestRefused reads
  std::vector<std::pair<const SlotGroup*, int64_t>> admitted;
  // The admissions to give back, newest first, with their script's now; the next to send.
  std::vector<std::pair<const SlotCheck*, int64_t>> refunds;
  size_t refunded = 0;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_STORE_IMPL_H_
