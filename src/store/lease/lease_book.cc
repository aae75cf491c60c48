#include "store/lease/lease_book.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
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

void LeaseBook::Spend(Entry& e, Timestamp now, int64_t cost) {
  // Refusals count too: over the limit a node's share of the quota follows what it is asked
  // for, not the little it got (which would shrink its leases to a script per unit).
  e.spent += cost;
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
  // What this node could still admit: its units and what the shared quota had left when it
  // last asked (other nodes may have taken some since).
  d.remaining = std::min(d.limit, e.units + std::max<int64_t>(0, e.shared.remaining));
  d.reset_after = std::max(Duration(0), e.shared.reset_after - (now - e.shared_at));
  d.retry_after = allowed ? Duration(0) : retry;
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
  // Units past their time are not spent: a fixed window's belong to a window that has ended.
  const int64_t usable = now < e.valid_until ? e.units : 0;
  if (cost <= usable && usable > 0) {
    e.units -= cost;
    counters_.held.fetch_sub(cost, std::memory_order_relaxed);
    counters_.local.fetch_add(1, std::memory_order_relaxed);
    Spend(e, now, cost);
    out = LocalDecision(e, now, /*allowed=*/true, Duration(0));
    LeasePlan plan{LeaseStep::kAdmitted};
    // Renew before running out: at half the target the next lease is asked for, so a steady
    // key never waits for the shared store -- unless the shared quota will not have a lease's
    // worth before blocked_until (at the limit), when a take would cost a script for little.
    const int64_t target = Target(e);
    if (!e.fetching && target > 0 && e.units * 2 <= target && now >= e.blocked_until) {
      e.fetching = true;
      plan.prefetch_want = target - e.units;
    }
    return plan;
  }
  if (charge) return {LeaseStep::kCharge};
  if (now < e.blocked_until && cost >= e.blocked_cost) {
    counters_.local.fetch_add(1, std::memory_order_relaxed);
    Spend(e, now, cost);
    out = LocalDecision(e, now, /*allowed=*/false, e.blocked_until - now);
    return {LeaseStep::kRefused};
  }
  LeasePlan plan{LeaseStep::kTake};
  // One take that wants units at a time; the others in the meantime ask only for their cost.
  if (!e.fetching && now >= e.blocked_until) {
    plan.want = std::max<int64_t>(0, Target(e) - usable);
    e.fetching = plan.want > 0;
  }
  return plan;
}

void LeaseBook::Granted(std::string_view key, Timestamp now, int64_t cost, int64_t want,
                        const LeaseGrant& grant) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) {
    if (grant.decision.degraded) return;
    const auto bytes = static_cast<int64_t>(EntryBytes(key));
    if (byte_budget_->fetch_sub(bytes) < bytes) {
      byte_budget_->fetch_add(bytes);  // no room: this key stays exact (and holds nothing)
      return;
    }
    it = shard.entries.emplace(std::string(key), Entry{}).first;
  }
  Entry& e = it->second;
  if (want > 0) e.fetching = false;
  e.last_used = now;
  const Decision& d = grant.decision;
  if (d.degraded) return;  // the shared store said nothing; what is held stays
  Spend(e, now, cost);
  if (grant.holders > 0) e.holders = grant.holders;
  e.shared = d;
  e.shared_at = now;
  if (spec_.algorithm == Algorithm::kFixedWindow) {
    const int64_t window_us =
        std::chrono::duration_cast<std::chrono::microseconds>(spec_.period).count();
    if (e.stamp_us / window_us != grant.stamp_us / window_us) {
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
  e.blocked_until = until;
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

bool LeaseBook::PutBack(std::string_view key, Timestamp now, int64_t cost) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end() || now >= it->second.valid_until) return false;
  it->second.units += cost;
  it->second.spent = std::max<int64_t>(0, it->second.spent - cost);
  counters_.held.fetch_add(cost, std::memory_order_relaxed);
  return true;
}

std::vector<GiveBackOrder> LeaseBook::TakeExpired(Timestamp now) {
  std::vector<GiveBackOrder> orders;
  const Duration idle = 2 * std::max<Duration>(sync_.lease_ttl, std::chrono::seconds(1));
  for (Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (auto it = shard.entries.begin(); it != shard.entries.end();) {
      Entry& e = it->second;
      if (e.units > 0 && now >= e.valid_until) {
        orders.push_back({it->first, e.stamp_us, e.units});
        counters_.held.fetch_sub(e.units, std::memory_order_relaxed);
        counters_.expired.fetch_add(1, std::memory_order_relaxed);
        e.units = 0;
      }
      if (e.units == 0 && !e.fetching && now >= e.blocked_until && now - e.last_used > idle) {
        byte_budget_->fetch_add(EntryBytes(it->first));
        it = shard.entries.erase(it);
      } else {
        ++it;
      }
    }
  }
  counters_.returned.fetch_add(orders.size(), std::memory_order_relaxed);
  return orders;
}

std::vector<GiveBackOrder> LeaseBook::TakeAll() {
  std::vector<GiveBackOrder> orders;
  for (Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (auto& [key, e] : shard.entries) {
      if (e.units == 0) continue;
      orders.push_back({key, e.stamp_us, e.units});
      counters_.held.fetch_sub(e.units, std::memory_order_relaxed);
      e.units = 0;
    }
  }
  counters_.returned.fetch_add(orders.size(), std::memory_order_relaxed);
  return orders;
}

void LeaseBook::Forget(std::string_view key) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return;
  counters_.held.fetch_sub(it->second.units, std::memory_order_relaxed);
  byte_budget_->fetch_add(EntryBytes(it->first));
  shard.entries.erase(it);
}

}  // namespace sluice::internal
