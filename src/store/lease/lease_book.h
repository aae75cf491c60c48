// LeaseBook: what one node holds of each key's quota for one leased limit, and the rules for
// spending it, sizing the next lease and giving units back. No I/O: the leased store asks it
// what to do and carries it out. Internal; thread-safe.
#ifndef SLUICE_STORE_LEASE_LEASE_BOOK_H_
#define SLUICE_STORE_LEASE_LEASE_BOOK_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/limiter.h"
#include "sluice/quota_sync.h"
#include "sluice/time.h"

namespace sluice::internal {

// How long a refusal of the shared store is repeated locally at most before the store is asked
// again: quota given back on another node (an admin credit or reset there) is seen within it.
inline constexpr Duration kBlockTrust = std::chrono::seconds(1);

// What a node should do with one check of a leased limit.
enum class LeaseStep : uint8_t {
  kAdmitted,  // spent from the units held: decided
  kRefused,   // the shared quota refused this cost until a time not yet reached: decided
  kTake,      // ask the shared store (TakeAsync with the given want)
  kCharge,    // a charge the units held cannot cover: charge the shared store at once
  // A take that wants units for the key, or a give-back of the sweep's, is in flight: ask again
  // once it has landed (Park), so that the shared store is asked about the key with nothing of
  // it still on the way.
  kWait,
};

// Units to give back to the shared store.
struct GiveBackOrder {
  std::string key;
  int64_t stamp_us;
  int64_t units;
};

struct LeasePlan {
  LeaseStep step = LeaseStep::kTake;
  int64_t want = 0;           // kTake: units to take beyond the cost
  int64_t prefetch_want = 0;  // after kAdmitted: take this many more now (cost 0), if > 0
  // kTake and kCharge: the units this node held for the key, to give back -- and to see
  // applied -- before the shared store is asked (units 0: none). The shared store then decides
  // on the whole of what is left of the quota, as the limit alone would.
  GiveBackOrder give_back{};
};

struct LeaseCounters {
  std::atomic<uint64_t> local{0};     // decisions answered from units held (or a local refusal)
  std::atomic<uint64_t> taken{0};     // takes that granted units
  std::atomic<uint64_t> expired{0};   // leases whose time ran out with units unspent
  std::atomic<uint64_t> returned{0};  // give-backs of unspent units (expiry, reset, shutdown)
  std::atomic<int64_t> held{0};       // units held now, over every key
};

class LeaseBook {
 public:
  // `byte_budget` is shared by every book of one store: a key is only kept while it fits.
  LeaseBook(const LimitSpec& spec, const QuotaSync& sync,
            std::shared_ptr<std::atomic<int64_t>> byte_budget);
  ~LeaseBook();

  // Spends from the units held when they cover `cost` and are still usable at `now` (in the
  // request's time: a lease ends at `now`, not when the sweep comes); otherwise says what to ask
  // the shared store, with every unit held taken out to be given back first. `out` is filled
  // for kAdmitted and kRefused.
  LeasePlan Plan(std::string_view key, Timestamp now, int64_t cost, bool charge, Decision& out);

  // What a TakeAsync of `cost` (wanting `want`) answered, asked at `now`. Updates the units,
  // the holder count, the key's rate and when the next take is worth a script (Pace); units of
  // an older fixed window that can no longer be spent are dropped. Units held that are no
  // longer usable at `now` are never merged into the new lease: they are returned, for the
  // caller to give back.
  struct Landed {
    // The decision as the request is answered: the shared store's, with `remaining` and
    // `reset_after` counting the units this node holds (as the limit alone has them).
    Decision decision;
    std::vector<GiveBackOrder> give_back;       // units no longer usable
    std::vector<std::function<void()>> parked;  // to run now (Park)
    // give_back's first order is the key's own units, counted in flight for the key like the
    // sweep's (TakeExpired): the shared store is not asked about the key again until the caller
    // has seen it applied and calls Returned.
    bool returning = false;
  };
  Landed Granted(std::string_view key, Timestamp now, int64_t cost, int64_t want,
                 const LeaseGrant& grant);
  // What a charge of `cost` (kCharge) answered at `now`: the shared state as of it.
  void Charged(std::string_view key, Timestamp now, int64_t cost, const Decision& d);
  // After kWait: runs `retry` when the take (or the sweep's give-back) in flight for the key
  // lands. False if none is in flight any more (the caller retries at once).
  bool Park(std::string_view key, std::function<void()> retry);

  // An admission of `cost` at `at` not used after all (its request was refused by another
  // limit, or refunded): back into the units held, if the key holds a lease still usable at
  // `now` with them (a fixed window's: units of the window `at` is in). False otherwise: the
  // caller gives it back to the shared store, a bucket's after the units TakeUnits returns.
  // Either way the key's local refusal ends (the quota grew).
  bool PutBack(std::string_view key, Timestamp at, Timestamp now, int64_t cost);
  // The key's units, emptied (none: units 0), for a give-back the caller sees applied.
  GiveBackOrder TakeUnits(std::string_view key);

  // Every key's lease that expired by `now`, emptied; forgets idle keys. The shared store is
  // not asked about those keys again until each order is Returned.
  std::vector<GiveBackOrder> TakeExpired(Timestamp now);
  // A give-back of TakeExpired's for the key has been applied (or failed); returns what was
  // parked on it, to run, once nothing is in flight for the key any more.
  std::vector<std::function<void()>> Returned(std::string_view key);
  // Every key's units, emptied (destruction, reset of everything).
  std::vector<GiveBackOrder> TakeAll();
  // The key's units, emptied and its entry forgotten (an administrative reset). Returns what
  // was parked on it, to run.
  std::vector<std::function<void()>> Forget(std::string_view key);

  // Token bucket, GCRA, leaky bucket (not a fixed window).
  bool bucket() const { return bucket_; }

  const LeaseCounters& counters() const { return counters_; }

  // The limiter is gone: a take still in flight gives back what it is granted at once.
  void Close() { closed_.store(true, std::memory_order_release); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // How long before a lease's end a prefetch is due, and the horizon a lease is sized for.
  Duration horizon() const { return horizon_; }

 private:
  struct Entry {
    int64_t units = 0;        // held, not yet spent
    int64_t stamp_us = 0;     // the take they came from, in the shared store's clock
    Timestamp valid_until{};  // given back then (a fixed window's: no later than its end)
    // Buckets: when the shared bucket, without the units held, is full again (from the last
    // answer of the shared store). The units are usable only until the bucket with them would
    // be full (UsableUntil): past that the pure bucket stops refilling while the shared one
    // goes on, and spending them would admit beyond the limit.
    Timestamp full_at = Timestamp::max();
    Timestamp no_lease_until{};  // decided exactly until then (WorthLeasing)
    // Costs >= blocked_cost the units held cannot cover are refused locally until blocked_until:
    // the shared quota refused them, or will not have a lease's worth of units before then.
    // blocked_until is at most a second ahead (kBlockTrust); blocked_retry is the shared
    // store's retry time the local refusals report.
    Timestamp blocked_until{};
    Timestamp blocked_retry{};
    int64_t blocked_cost = 0;
    bool fetching = false;  // a take that wants units is in flight
    int returning = 0;      // the sweep's give-backs in flight (TakeExpired, Returned)
    int64_t holders = 1;
    double rate = 0;  // units per second this node is asked for on the key (admitted or not)
    Timestamp rate_since{};
    int64_t spent = 0;  // since rate_since
    Decision shared;    // the shared store's answer at the last take
    Timestamp shared_at{};
    Timestamp last_used{};
    std::vector<std::function<void()>> parked;  // requests waiting for the take in flight
  };
  struct KeyHash {
    using is_transparent = void;  // found by string_view: no copy of the key per decision
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry, KeyHash, std::equal_to<>> entries;
  };

  Shard& ShardOf(std::string_view key);
  // Units this node should hold for the key: its rate over the horizon, at most its share.
  int64_t Target(const Entry& e) const;
  // A fixed window's number, for a time in microseconds.
  int64_t WindowOf(int64_t stamp_us) const;
  // Whether a lease taken now, with a request of `cost`, would last long enough to be spent.
  bool WorthLeasing(const Entry& e, Timestamp now, int64_t cost) const;
  // Buckets: when the bucket with the units held would be full again.
  Timestamp FullWithUnits(const Entry& e) const;
  // Until when (in the requests' time) the units held may be spent.
  Timestamp UsableUntil(const Entry& e) const;
  // The entry's units, emptied into a give-back order.
  GiveBackOrder Empty(std::string_view key, Entry& e);
  // Counts `cost` asked of the node for the key (admitted or refused) into its rate.
  void Spend(Entry& e, Timestamp now, int64_t cost);
  // After the shared store's answer `d` to a take of `cost` and `want` at `now`, which granted
  // `units`: until when a take is not worth a script (the key is at its limit), into
  // blocked_until and blocked_cost.
  void Pace(Entry& e, Timestamp now, int64_t cost, int64_t want, int64_t units,
            const Decision& d) const;
  // When the shared quota, as `d` (answered at `at`) showed it, has `units` free again.
  Timestamp FreeAt(const Decision& d, Timestamp at, int64_t units) const;
  Decision LocalDecision(const Entry& e, Timestamp now, bool allowed, Duration retry) const;
  static size_t EntryBytes(std::string_view key);

  const LimitSpec spec_;
  const QuotaSync sync_;
  const Duration horizon_;
  const bool bucket_;  // token bucket, GCRA, leaky bucket: a lease's life ends with a full bucket
  const std::shared_ptr<std::atomic<int64_t>> byte_budget_;
  std::atomic<bool> closed_{false};
  std::array<Shard, 16> shards_;
  LeaseCounters counters_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_LEASE_LEASE_BOOK_H_
