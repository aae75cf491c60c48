#include "store/lease/lease_book.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

namespace sluice::internal {
namespace {

using Seconds = std::chrono::duration<double>;

// How often a key's rate is re-measured, at least: short enough to follow a burst, long enough
// to count more than one request.
constexpr Duration kMinRatePeriod = std::chrono::milliseconds(10);

}  // namespace

LeaseBook::LeaseBook(const LimitSpec& spec, const QuotaSync& sync,
                     std::shared_ptr<std::atomic<int64_t>> byte_budget)
    : spec_(spec),
      sync_(sync),
      // A lease is sized to last a quarter of its life (so it is renewed well before it must be
      // given back), and never more than 250 ms of traffic (so a node's share follows its rate).
      horizon_(std::min<Duration>(sync.lease_ttl / 4, std::chrono::milliseconds(250))),
      bucket_(spec.algorithm != Algorithm::kFixedWindow),
      byte_budget_(std::move(byte_budget)) {}

LeaseBook::~LeaseBook() {
  for (Shard& shard : shards_) {
    for (const auto& [key, e] : shard.entries) byte_budget_->fetch_add(EntryBytes(key));
  }
}

size_t LeaseBook::EntryBytes(std::string_view key) {
  // The entry, the key's heap copy beyond the small-string buffer, and the map's node and bucket.
  return sizeof(Entry) + sizeof(std::string) + key.size() + 4 * sizeof(void*);
}

LeaseBook::Shard& LeaseBook::ShardOf(std::string_view key) {
  // The map's own hash spreads keys within a shard; this one picks the shard from other bits.
  return shards_[(std::hash<std::string_view>{}(key) >> 48) % shards_.size()];
}

int64_t LeaseBook::Target(const Entry& e) const {
  const double per_horizon = e.rate * Seconds(horizon_).count();
  // Less than one unit per horizon: a quiet key, decided by the shared store every time (exact).
  if (per_horizon < 1.0) return 0;
  const int64_t share = spec_.Capacity() / std::max<int64_t>(1, e.holders);
  return std::min<int64_t>(static_cast<int64_t>(std::ceil(per_horizon)), share);
}

Timestamp LeaseBook::FullWithUnits(const Entry& e) const {
  // The units held refill in units x period / limit (rounded up: sooner is the safe side), so
  // the bucket with them would be full that much before the shared one is.
  const __int128 refill_ns =
      (static_cast<__int128>(e.units) * spec_.period.count() + spec_.limit - 1) / spec_.limit;
  const int64_t full_ns = ToNanos(e.full_at);
  return refill_ns >= full_ns ? Timestamp{} : FromNanos(full_ns - static_cast<int64_t>(refill_ns));
}

Timestamp LeaseBook::UsableUntil(const Entry& e) const {
  if (!bucket_ || e.full_at == Timestamp::max()) return e.valid_until;
  // Redis rounds reset_after up to its microsecond: a microsecond earlier is never late.
  return std::min(e.valid_until, FullWithUnits(e) - std::chrono::microseconds(1));
}

bool LeaseBook::WorthLeasing(const Entry& e, Timestamp now, int64_t cost) const {
  if (now < e.no_lease_until) return false;
  if (!bucket_ || e.full_at == Timestamp::max()) return true;
  // Units are usable until the bucket with them would be full (FullWithUnits), which is ahead of
  // `now` by what it lacks after this request; spending pushes that back, by as much as this
  // node spends, so it comes closer at the refill rate minus this node's rate.
  const double unit_ns =
      static_cast<double>(spec_.period.count()) / static_cast<double>(spec_.limit);
  const double share = e.rate * unit_ns / 1e9;  // this node's rate over the refill rate
  if (share >= 1) return true;
  const double ahead = static_cast<double>((FullWithUnits(e) - now).count()) + cost * unit_ns;
  // A bucket that stays (nearly) full -- a key well below its limit -- would get leases that
  // end before they are spent, and cost a give-back each: such a key is decided exactly.
  return ahead / (1 - share) >= static_cast<double>(horizon_.count()) / 2;
}

GiveBackOrder LeaseBook::Empty(std::string_view key, Entry& e) {
  GiveBackOrder order{std::string(key), e.stamp_us, e.units};
  counters_.held.fetch_sub(e.units, std::memory_order_relaxed);
  counters_.returned.fetch_add(1, std::memory_order_relaxed);
  e.units = 0;
  return order;
}

int64_t LeaseBook::WindowOf(int64_t stamp_us) const {
  return stamp_us / std::chrono::duration_cast<std::chrono::microseconds>(spec_.period).count();
}

void LeaseBook::Spend(Entry& e, Timestamp now, int64_t cost) {
  // Refusals count too: over the limit a node's share of the quota follows what it is asked
  // for, not the little it got (which would shrink its leases to a script per unit). A cost
  // beyond the capacity, never admitted, counts as the capacity (and up to 2^63-1 it must not
  // overflow the sum).
  const int64_t counted = std::clamp<int64_t>(cost, 0, spec_.Capacity());
  e.spent = counted > std::numeric_limits<int64_t>::max() - e.spent
                ? std::numeric_limits<int64_t>::max()
                : e.spent + counted;
  if (e.rate_since == Timestamp{}) {
    e.rate_since = now;
    return;
  }
  const Duration period = now - e.rate_since;
  if (period < std::max(kMinRatePeriod, horizon_ / 4)) return;
  const double measured = static_cast<double>(e.spent) / Seconds(period).count();
  e.rate = e.rate == 0 ? measured : (e.rate + measured) / 2;
  e.spent = 0;
  e.rate_since = now;
}

Decision LeaseBook::LocalDecision(const Entry& e, Timestamp now, bool allowed,
                                  Duration retry) const {
  Decision d;
  d.allowed = allowed;
  d.reason = allowed ? DecisionReason::kAdmitted : DecisionReason::kOverLimit;
  d.limit = spec_.Capacity();
  d.retry_after = allowed ? Duration(0) : retry;
  if (bucket_ && e.full_at != Timestamp::max()) {
    // The limit as one node alone would have it: the shared bucket as of its last answer,
    // refilled since, plus the units held. In units of 1/period of a token (one refills per
    // nanosecond per unit of limit). The answer's reset_after is rounded up (to Redis's
    // microsecond), so the bucket it implies may lie just below a whole token it has: its
    // `remaining` (whole tokens, exact) says which.
    const __int128 period = spec_.period.count(), limit = spec_.limit, cap = d.limit;
    const __int128 reset = std::max<int64_t>(0, ToNanos(e.full_at) - ToNanos(e.shared_at));
    __int128 shared = cap * period - reset * limit;
    const __int128 whole = std::max<int64_t>(0, e.shared.remaining);
    shared = std::min(shared, (whole + 1) * period - 1);
    if (whole > 0) shared = std::max(shared, whole * period);
    const __int128 elapsed = std::max<int64_t>(0, ToNanos(now) - ToNanos(e.shared_at));
    shared = std::min(cap * period, shared + elapsed * limit);
    const __int128 mine = shared + static_cast<__int128>(e.units) * period;
    d.remaining = static_cast<int64_t>(std::clamp<__int128>(mine / period, 0, cap));
    d.reset_after = Duration(
        static_cast<int64_t>(std::max<__int128>(0, (cap * period - mine + limit - 1) / limit)));
    return d;
  }
  // A fixed window: what this node holds and what the shared count had left when it last
  // asked (other nodes may have taken some since).
  d.remaining = std::min(d.limit, e.units + std::max<int64_t>(0, e.shared.remaining));
  d.reset_after = std::max(Duration(0), e.shared.reset_after - (now - e.shared_at));
  return d;
}

LeasePlan LeaseBook::Plan(std::string_view key, Timestamp now, int64_t cost, bool charge,
                          Decision& out) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return {charge ? LeaseStep::kCharge : LeaseStep::kTake};
  Entry& e = it->second;
  e.last_used = now;
  // Units past their time are not spent: a fixed window's belong to a window that has ended, a
  // bucket's would admit beyond a bucket that is full again.
  const bool usable = now < UsableUntil(e);
  if (usable && cost <= e.units && e.units > 0) {
    e.units -= cost;
    counters_.held.fetch_sub(cost, std::memory_order_relaxed);
    counters_.local.fetch_add(1, std::memory_order_relaxed);
    Spend(e, now, cost);
    out = LocalDecision(e, now, /*allowed=*/true, Duration(0));
    LeasePlan plan{LeaseStep::kAdmitted};
    // Renew before running out: at half the target the next lease is asked for, so a steady
    // key never waits for the shared store -- unless the shared quota will not have a lease's
    // worth before blocked_until (at the limit), when a take would cost a script for little.
    const int64_t target = WorthLeasing(e, now, 0) ? Target(e) : 0;
    if (!e.fetching && target > 0 && e.units * 2 <= target && now >= e.blocked_until) {
      e.fetching = true;
      plan.prefetch_want = target - e.units;
    }
    return plan;
  }
  if (!charge && now < e.blocked_until && cost >= e.blocked_cost) {
    counters_.local.fetch_add(1, std::memory_order_relaxed);
    Spend(e, now, cost);
    out = LocalDecision(e, now, /*allowed=*/false, e.blocked_retry - now);
    return {LeaseStep::kRefused};
  }
  // The shared store decides; it must see the key as this node alone would leave it: after the
  // take in flight, and with every unit held given back (a bucket refills those into a cap
  // the units would have hit).
  if (e.fetching || e.returning > 0) return {LeaseStep::kWait};
  LeasePlan plan{charge ? LeaseStep::kCharge : LeaseStep::kTake};
  const bool worth = WorthLeasing(e, now, cost);  // with the units still counted
  if (e.units > 0) {
    if (!usable) counters_.expired.fetch_add(1, std::memory_order_relaxed);
    // Ended by a bucket full again, not by its time: the key spends about as fast as the
    // bucket refills, and a new lease would end as soon. Exact for a horizon.
    if (!usable && now < e.valid_until) e.no_lease_until = now + horizon_;
    plan.give_back = Empty(key, e);
  }
  if (!charge && now >= e.blocked_until) {
    plan.want = worth && now >= e.no_lease_until ? Target(e) : 0;
    e.fetching = plan.want > 0;
  }
  return plan;
}

LeaseBook::Landed LeaseBook::Granted(std::string_view key, Timestamp now, int64_t cost,
                                     int64_t want, const LeaseGrant& grant) {
  Landed landed;
  landed.decision = grant.decision;
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) {
    // A grant with units always finds room for them: the units must be held or given back.
    if (grant.decision.degraded) return landed;
    const auto bytes = static_cast<int64_t>(EntryBytes(key));
    if (byte_budget_->fetch_sub(bytes) < bytes) {
      byte_budget_->fetch_add(bytes);  // no room: this key stays exact (and holds nothing)
      if (grant.units > 0)
        landed.give_back.push_back({std::string(key), grant.stamp_us, grant.units});
      return landed;
    }
    it = shard.entries.emplace(std::string(key), Entry{}).first;
  }
  Entry& e = it->second;
  e.last_used = now;
  const Decision& d = grant.decision;
  // Units no longer usable are not revived by the new lease: they go back, and the key waits
  // for them as for the sweep's (a take sent before they land would decide without them).
  if (!d.degraded && e.units > 0 && now >= UsableUntil(e)) {
    counters_.expired.fetch_add(1, std::memory_order_relaxed);
    landed.give_back.push_back(Empty(key, e));
    ++e.returning;
    landed.returning = true;
  }
  if (want > 0) {
    e.fetching = false;
    if (e.returning == 0) landed.parked = std::exchange(e.parked, {});
  }
  if (d.degraded) return landed;  // the shared store said nothing; what is held stays
  // When the shared bucket is full again, as of this answer.
  if (bucket_) e.full_at = now + d.reset_after;
  Spend(e, now, cost);
  if (grant.holders > 0) e.holders = grant.holders;
  e.shared = d;
  e.shared_at = now;
  if (spec_.algorithm == Algorithm::kFixedWindow) {
    if (WindowOf(e.stamp_us) != WindowOf(grant.stamp_us)) {
      // Units of a window that has ended can never be spent or given back.
      counters_.held.fetch_sub(e.units, std::memory_order_relaxed);
      e.units = 0;
      e.stamp_us = grant.stamp_us;
    }
  }
  if (grant.units > 0) {
    e.units += grant.units;
    e.stamp_us = grant.stamp_us;
    counters_.held.fetch_add(grant.units, std::memory_order_relaxed);
    counters_.taken.fetch_add(1, std::memory_order_relaxed);
    Duration life = sync_.lease_ttl;
    // Measured from when the take was sent, so it ends no later than the window does in the
    // shared store's clock.
    if (spec_.algorithm == Algorithm::kFixedWindow) life = std::min(life, d.reset_after);
    e.valid_until = now + life;
  }
  Pace(e, now, cost, want, grant.units, d);
  Decision& reported = landed.decision;
  reported.remaining = std::min(reported.limit, reported.remaining + e.units);
  if (bucket_) {
    const __int128 refill =
        (static_cast<__int128>(e.units) * spec_.period.count() + spec_.limit - 1) / spec_.limit;
    reported.reset_after = Duration(
        static_cast<int64_t>(std::max<__int128>(0, reported.reset_after.count() - refill)));
  }
  return landed;
}

void LeaseBook::Pace(Entry& e, Timestamp now, int64_t cost, int64_t want, int64_t units,
                     const Decision& d) const {
  if (d.allowed && want == 0) {
    e.blocked_until = Timestamp{};  // a decision, not a lease: the take in flight paces
    return;
  }
  if (!d.allowed && (d.reason != DecisionReason::kOverLimit || d.retry_after == kNever)) return;
  // The next take is worth a script once the shared quota has a lease's worth (the target)
  // free again, beyond a refused request's cost; until then this node refuses locally what its
  // units cannot cover. A node that was just granted units waits for a lease for every node
  // drawing on the key, so that the others, which got none, take theirs first: the nodes take
  // turns instead of the same one winning every race. A bucket's wait is a choice, bounded by
  // a horizon per turn: units another node gives back (or a slow refill's few) are found that
  // soon. A fixed window's is a fact: its count comes back at the window's end. A quiet key
  // (target 0), or a key only this node draws on, waits only for a refused cost, until Redis's
  // retry time: one node alone decides exactly as the limit, and no other node races it to the
  // refill (the races are what cost a script per refill per node).
  const int64_t refused = d.allowed ? 0 : cost;
  const int64_t turns = units > 0 ? e.holders : 1;
  const int64_t lease = e.holders > 1 ? turns * Target(e) : 0;
  Timestamp until = now;
  if (lease > 0) {
    until = FreeAt(d, now, refused + lease);
    if (spec_.algorithm != Algorithm::kFixedWindow) until = std::min(until, now + turns * horizon_);
  }
  if (!d.allowed) until = std::max(until, now + d.retry_after);
  e.blocked_retry = until;
  e.blocked_until = std::min(until, now + kBlockTrust);
  e.blocked_cost = d.allowed ? 1 : cost;  // a refused cost 0: a key in debt
}

Timestamp LeaseBook::FreeAt(const Decision& d, Timestamp at, int64_t units) const {
  if (units <= 0) return at;
  if (spec_.algorithm == Algorithm::kFixedWindow) {
    // The window's count comes back all at once, at its end: waiting within it gains nothing.
    return d.remaining > 0 ? at : at + d.reset_after;
  }
  // A bucket (token bucket, GCRA, leaky-bucket meter) refills at limit per period and is full
  // again reset_after from `at`; `units` are free when it is that many short of full.
  const int64_t capacity = spec_.Capacity();
  const __int128 short_of_full = capacity - std::min(units, capacity);
  const __int128 refill_ns = short_of_full * spec_.period.count() / spec_.limit;
  const __int128 until_full_ns = d.reset_after.count();
  if (refill_ns >= until_full_ns) return at;
  return at + Duration(static_cast<int64_t>(until_full_ns - refill_ns));
}

void LeaseBook::Charged(std::string_view key, Timestamp now, int64_t cost, const Decision& d) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end() || d.degraded) return;
  Entry& e = it->second;
  e.shared = d;
  e.shared_at = now;
  if (bucket_) e.full_at = now + d.reset_after;
  // In debt: a decision of the charge's cost (or more) is refused until it is repaid that far.
  if (!d.allowed && d.reason == DecisionReason::kOverLimit && d.retry_after != kNever) {
    e.blocked_retry = now + d.retry_after;
    e.blocked_until = std::min(e.blocked_retry, now + kBlockTrust);
    e.blocked_cost = cost;
  }
}

bool LeaseBook::Park(std::string_view key, std::function<void()> retry) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end() || (!it->second.fetching && it->second.returning == 0)) {
    return false;
  }
  it->second.parked.push_back(std::move(retry));
  return true;
}

bool LeaseBook::PutBack(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return false;
  Entry& e = it->second;
  e.blocked_until = Timestamp{};  // the quota grew: a refusal remembered may no longer hold
  // A fixed window's admission goes back to the window it was counted in: into the units only
  // if they are of that window.
  if (!bucket_ && WindowOf(ToNanos(at) / 1000) != WindowOf(e.stamp_us)) {
    return false;
  }
  e.units += cost;
  if (now >= UsableUntil(e)) {
    e.units -= cost;
    return false;
  }
  e.spent = std::max<int64_t>(0, e.spent - cost);
  counters_.held.fetch_add(cost, std::memory_order_relaxed);
  return true;
}

GiveBackOrder LeaseBook::TakeUnits(std::string_view key) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.units == 0) return {};
  return Empty(key, it->second);
}

std::vector<GiveBackOrder> LeaseBook::TakeExpired(Timestamp now) {
  std::vector<GiveBackOrder> orders;
  const Duration idle = 2 * std::max<Duration>(sync_.lease_ttl, std::chrono::seconds(1));
  for (Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (auto it = shard.entries.begin(); it != shard.entries.end();) {
      Entry& e = it->second;
      if (e.units > 0 && now >= UsableUntil(e)) {
        counters_.expired.fetch_add(1, std::memory_order_relaxed);
        orders.push_back(Empty(it->first, e));
        ++e.returning;  // until Returned: the key's next take waits for it
      }
      if (e.units == 0 && !e.fetching && e.returning == 0 && now >= e.blocked_until &&
          now - e.last_used > idle) {
        byte_budget_->fetch_add(EntryBytes(it->first));
        it = shard.entries.erase(it);
      } else {
        ++it;
      }
    }
  }
  return orders;
}

std::vector<std::function<void()>> LeaseBook::Returned(std::string_view key) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.returning == 0) return {};
  Entry& e = it->second;
  if (--e.returning > 0 || e.fetching) return {};
  return std::exchange(e.parked, {});
}

std::vector<GiveBackOrder> LeaseBook::TakeAll() {
  std::vector<GiveBackOrder> orders;
  for (Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (auto& [key, e] : shard.entries) {
      if (e.units > 0) orders.push_back(Empty(key, e));
    }
  }
  return orders;
}

std::vector<std::function<void()>> LeaseBook::Forget(std::string_view key) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return {};
  counters_.held.fetch_sub(it->second.units, std::memory_order_relaxed);
  byte_budget_->fetch_add(EntryBytes(it->first));
  std::vector<std::function<void()>> parked = std::move(it->second.parked);
  shard.entries.erase(it);
  return parked;
}

}  // namespace sluice::internal
