// RedisLimiter: one limit's counters in Redis, each decision one script call; what the store's
// multi-limit scripts need of it (its script id, arguments, how to read an answer). Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_LIMITER_H_
#define SLUICE_STORE_REDIS_REDIS_LIMITER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/calendar_window.h"
#include "sluice/limiter.h"
#include "sluice/redis_store.h"
#include "store/calendar_stats.h"
#include "store/redis/redis_reply.h"
#include "store/redis/redis_scripts.h"

namespace sluice::internal {

constexpr int64_t kNanosPerUs = 1000;

// A script's `now` argument: empty under Redis's clock, else microseconds.
std::string NowArg(const RedisStoreOptions& options, Timestamp now);

class RedisStoreImpl;

class RedisLimiter final : public Limiter {
 public:
  RedisLimiter(std::shared_ptr<RedisStoreImpl> store, const LimitSpec& spec, std::string limit_id,
               bool fail_open, std::vector<std::string> params, const LuaScript& script,
               int script_id);

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    return Run(key, now, cost, /*charge=*/false);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    return Run(key, now, cost, /*charge=*/true);
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    RunAsync(key, now, cost, /*charge=*/false, std::move(done));
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    RunAsync(key, now, cost, /*charge=*/true, std::move(done));
  }

  // The checks before any I/O: false with `d` filled when the request is decided without Redis
  // (invalid, too costly, or refused by an open breaker); true with the key to use otherwise.
  // A charge is never too costly: it is taken up to the debt cap.
  bool Prepare(std::string_view key, int64_t cost, bool charge, Decision& d,
               std::string& redis_key);
  // A single-limit script's ARGV: now (empty under Redis's clock), the spec's, the cost, charge.
  std::vector<std::string> ScriptArgs(Timestamp now, int64_t cost, bool charge) const;
  // The script arguments after now: the spec's (for a calendar window, also the bounds of the
  // windows before, holding and after `now`), the cost (a charge's clamped to twice the
  // capacity, which is all a key can hold), then the flags (charge, quota, and a decision's
  // reserve: LimitCheck::reserve, as ReserveFor sends it). A calendar window's bounds are
  // `zone`'s (LimitCheck::zone) when it is set.
  void AppendArgs(Timestamp now, int64_t cost, bool charge, std::vector<std::string>& args,
                  bool quota = false, int64_t reserve = 0,
                  const CalendarZone* zone = nullptr) const {
    args.insert(args.end(), params_.begin(), params_.end());
    if (calendar_) AppendCalendarBounds(now, args, zone);
    args.push_back(std::to_string(std::min(cost, 2 * spec_.Capacity())));
    // redis_scripts.h: charge + 2 x quota + 4 x reserve.
    args.push_back(std::to_string((charge ? 1 : 0) + (quota ? 2 : 0) + 4 * reserve));
  }
  // LimitCheck::reserve as the scripts take it, for a check Prepare passed: none for a charge
  // (which may cost more than the capacity) or below 0, and at most what puts cost + reserve
  // one above the capacity, which never fits already: the scripts' sums stay within the bounds
  // a charge's do.
  int64_t ReserveFor(const LimitCheck& check) const {
    if (check.charge) return 0;
    return std::clamp<int64_t>(check.reserve, 0, spec_.Capacity() - check.cost + 1);
  }
  // A script's answer into `d`; false when it is not one. A charge above the capacity can
  // never pass as a request: kCostExceedsCapacity, retry never; nor can a decision whose cost
  // and reserve (ReserveFor's) together pass it, which the script refused: retry never.
  bool Read(const RedisReply& reply, int64_t cost, bool charge, Decision& d,
            int64_t reserve = 0) const {
    if (!ReadDecision(reply, d)) return false;
    if (charge && cost > spec_.Capacity()) {
      d.reason = DecisionReason::kCostExceedsCapacity;
      d.retry_after = kNever;
    } else if (cost + reserve > spec_.Capacity()) {
      d.retry_after = kNever;
    }
    return true;
  }
  // Counts a decision of a store DecideAll (a request, not an admin read) that the calendar
  // script says was taken in a window another zone opened (its reply's sixth field).
  void CountZoneMismatch(const RedisReply& reply) const {
    if (reply.elements.size() == 6 && reply.elements[5].integer == 1) {
      zone_mismatches_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // `d` after Redis failed to answer: the failure policy, marked degraded.
  Decision Failed(const Decision& d, const Error& error);
  // Counted for this limiter and for its store.
  void CountFailure(bool short_circuit);
  // Gives back an admission (see Limiter::Refund). Under Redis's clock the admission time is
  // taken as Redis's now: the caller's clock may be skewed from it.
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override;
  // Forgets the key's counter.
  void Reset(std::string_view key) override;
  // One kAdjustScript call (redis_script_adjust.h), waited for; an error when Redis did not
  // answer (nothing changed, or the change is unknown if the answer was lost).
  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override;
  // Both in one script (redis_script_lease.h), under the store's clock; the nodes drawing on
  // the key are counted in a hash next to it.
  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override;
  // kRefundScript at the lease's own time in Redis's clock, whichever clock decides; queued,
  // not waited for (it may come from an I/O thread or a destructor).
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override;
  // The same two, answered when Redis has applied them (or failed to).
  void RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                  GivenBackCallback done) override;
  void GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units,
                    GivenBackCallback done) override;

  int script_id() const { return script_id_; }

  StoreStats Stats() const override {
    StoreStats s;
    s.store_errors = errors_.load(std::memory_order_relaxed);
    s.short_circuited = short_circuited_.load(std::memory_order_relaxed);
    return s;
  }
  const LimitSpec& spec() const override { return spec_; }

  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override {
    if (!calendar_) return;
    sink.Add(kCalendarZoneMismatches, limit_labels,
             static_cast<double>(zone_mismatches_.load(std::memory_order_relaxed)));
  }

 private:
  Decision Degraded(Decision d) const {
    d.reason = DecisionReason::kStoreUnavailable;
    d.allowed = fail_open_;
    d.degraded = true;
    return d;
  }
  // kRefundScript for an admission at `at_arg` (microseconds, '' for now), queued; `done`, if
  // any, hears when Redis answered.
  void RefundInBackground(std::string_view key, std::string at_arg, Timestamp now, int64_t cost,
                          GivenBackCallback done = nullptr);
  // The bounds (us) of the calendar windows before, holding and after `now`: b0 < b1 < b2 < b3.
  void AppendCalendarBounds(Timestamp now, std::vector<std::string>& args,
                            const CalendarZone* zone = nullptr) const;
  // Decide (charge false) or Charge, waiting for Redis.
  Decision Run(std::string_view key, Timestamp now, int64_t cost, bool charge);
  void RunAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                DecisionCallback done);

  const std::shared_ptr<RedisStoreImpl> store_;
  const int script_id_;  // its body in the multi-limit scripts (ScriptCall::id)
  const LimitSpec spec_;
  const std::string limit_id_;
  const bool fail_open_;
  const std::vector<std::string> params_;  // the script's spec arguments, between now and cost
  const LuaScript& script_;
  // A calendar spec's windows, which sluiced works out and sends with each call.
  std::optional<CalendarWindow> calendar_;
  std::atomic<uint64_t> errors_{0};
  mutable std::atomic<uint64_t> zone_mismatches_{0};  // calendar windows: Read counts them
  std::atomic<uint64_t> short_circuited_{0};
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_LIMITER_H_
