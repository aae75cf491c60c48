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

// What a node should do with one check of a leased limit.
enum class LeaseStep : uint8_t {
  kAdmitted,  // spent from the units held: decided
  kRefused,   // the shared quota refused this cost until a time not yet reached: decided
  kTake,      // ask the shared store (TakeAsync with the given want)
  kCharge,    // a charge the units held cannot cover: charge the shared store at once
};

struct LeasePlan {
  LeaseStep step = LeaseStep::kTake;
  int64_t want = 0;           // kTake: units to take beyond the cost
  int64_t prefetch_want = 0;  // after kAdmitted: take this many more now (cost 0), if > 0
};

// Units to give back to the shared store.
struct GiveBackOrder {
  std::string key;
  int64_t stamp_us;
  int64_t units;
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

  // Spends from the units held when they cover `cost`; otherwise says what to ask the shared
  // store. `out` is filled for kAdmitted and kRefused.
  LeasePlan Plan(std::string_view key, Timestamp now, int64_t cost, bool charge, Decision& out);

  // What a TakeAsync of `cost` (wanting `want`) answered, asked at `now`. Updates the units,
  // the holder count, the key's rate and when the next take is worth a script (Pace); units of
  // an older fixed window that can no longer be spent are dropped.
  void Granted(std::string_view key, Timestamp now, int64_t cost, int64_t want,
               const LeaseGrant& grant);

  // An admission of `cost` not used after all (its request was refused by another limit, or
  // refunded): back into the units held, if the key holds a lease still valid at `now`. False
  // otherwise: the caller gives it back to the shared store.
  bool PutBack(std::string_view key, Timestamp now, int64_t cost);

  // Every key's lease that expired by `now`, emptied; forgets idle keys.
  std::vector<GiveBackOrder> TakeExpired(Timestamp now);
  // Every key's units, emptied (destruction, reset of everything).
  std::vector<GiveBackOrder> TakeAll();
  // The key's units, emptied and its entry forgotten (an administrative reset).
  void Forget(std::string_view key);

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
    // Costs >= blocked_cost the units held cannot cover are refused locally until blocked_until:
    // the shared quota refused them, or will not have a lease's worth of units before then.
    Timestamp blocked_until{};
    int64_t blocked_cost = 0;
    bool fetching = false;  // a take that wants units is in flight
    int64_t holders = 1;
    double rate = 0;  // units per second this node is asked for on the key (admitted or not)
    Timestamp rate_since{};
    int64_t spent = 0;  // since rate_since
    Decision shared;    // the shared store's answer at the last take
    Timestamp shared_at{};
    Timestamp last_used{};
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
  const std::shared_ptr<std::atomic<int64_t>> byte_budget_;
  std::atomic<bool> closed_{false};
  std::array<Shard, 16> shards_;
  LeaseCounters counters_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_LEASE_LEASE_BOOK_H_
