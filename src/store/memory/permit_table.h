// The memory store's permits (sluice/permits.h): per key, the live permits (id -> expiry on the
// node's clock), in shards that each hold a part of the pool's memory bound.
//
// Every call on a shard first drops the shard's expired permits (counting them in `expired`),
// found through an index of each key's earliest expiry, so an expired permit costs its removal
// once and memory is never held by expired permits past the shard's next call. A key exists only
// while it holds live permits, so there is nothing to evict: when a new permit would exceed the
// shard's bytes, the acquire is refused (`full`) and no live permit is ever dropped.
//
// The permits of one pool id outlive a pool: a new pool of the same id (a reload that changed
// the concurrency block) takes the live permits of the one before (TakePermitsOf), which then
// hands every call on to it, as a shared store's new pool reads the same keys. They count
// against the new max_in_flight; each keeps its expiry. A snapshot saves them
// (ForEachLivePermit) and a new process puts them back (RestorePermit).
#ifndef SLUICE_STORE_MEMORY_PERMIT_TABLE_H_
#define SLUICE_STORE_MEMORY_PERMIT_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/permits.h"
#include "sluice/status.h"

namespace sluice::internal {

class PermitTable {
 public:
  // A table within `max_bytes` (everything it accounts: keys, permits, indexes) with up to
  // `shards` shards (a power of two), as many as leave each shard room for one key of
  // max_key_bytes holding max_in_flight permits of kMaxPermitIdBytes; an error when one shard
  // cannot.
  static Result<std::unique_ptr<PermitTable>> Make(const PermitSpec& spec, size_t max_bytes,
                                                   size_t shards, size_t max_key_bytes,
                                                   uint64_t seed);

  PermitAnswer Acquire(std::string_view key, Timestamp now, const PermitAcquire& request);
  PermitAnswer Release(std::string_view key, Timestamp now, std::string_view permit);
  PermitAnswer Renew(std::string_view key, Timestamp now, std::string_view permit);

  // Calls f(key, permit, expiry) for every permit live at `now`, one shard at a time (each
  // shard's permits are copied under its lock, then handed over outside it). Returns how many.
  using PermitVisitor =
      std::function<void(std::string_view key, std::string_view permit, Timestamp expiry)>;
  uint64_t ForEachLivePermit(Timestamp now, const PermitVisitor& f) const;
  // Holds `permit` of `key` until `expiry` again (a snapshot's): false, and nothing held, when
  // it has expired at `now`, is malformed, is held already or the shard's bytes leave no room.
  // Over max_in_flight it is held all the same (the key then refuses until it is below).
  bool RestorePermit(std::string_view key, std::string_view permit, Timestamp expiry,
                     Timestamp now);

  // Drops the permits expired by `now` first, as a call would.
  PermitStats Stats(Timestamp now) const;
  // Adds keys holding permits, accounted bytes and the bound to `s` (the store's Stats()).
  void AddStats(StoreStats& s) const;

  const PermitSpec& spec() const { return spec_; }

  // What a key and a permit are accounted (an upper bound of their heap: strings, hash and tree
  // nodes with an allocator header each, bucket pointers).
  static size_t KeyBytes(size_t key_size);
  static size_t PermitBytes(size_t id_size);

  // Public for the shard's definition in permit_table.cc only.
  // Trees, not hash maps: a key's few permits would each cost a bucket array.
  struct KeyPermits {
    std::map<std::string, Timestamp, std::less<>> by_id;
    std::set<std::pair<Timestamp, std::string_view>> by_expiry;  // views of by_id's ids
  };
  // Found by string_view: no copy of the key per acquire, release or renew.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  using KeyMap = std::unordered_map<std::string, KeyPermits, KeyHash, std::equal_to<>>;
  struct Shard {
    mutable std::mutex mu;
    KeyMap keys;                                                  // only keys with live permits
    std::set<std::pair<Timestamp, const std::string*>> earliest;  // each key's earliest expiry
    size_t bytes = 0;
    size_t budget = 0;
    int64_t in_flight = 0;
    uint64_t expired = 0;
    // The latest time a call on the shard was decided at: the shard's clock never goes back (a
    // call may reach the lock after one that read the clock later).
    Timestamp clock{};
  };

 private:
  friend void TakePermitsOf(const std::shared_ptr<PermitTable>& table, PermitTable& old);

  PermitTable(const PermitSpec& spec, size_t max_bytes, size_t shards, size_t max_key_bytes,
              uint64_t seed, size_t budget);
  bool Valid(std::string_view key, std::string_view permit) const;
  // Every call's frame: a malformed one is invalid; otherwise `decide(table, shard, now)` runs
  // under the lock of `key`'s shard, at the shard's time (never before a call it decided), after
  // the shard's expired permits are dropped, in the table that holds the permits now: this one,
  // or the newer one that took them (TakePermitsOf), whose spec is then the one that applies.
  template <typename Decide>
  PermitAnswer OnShard(std::string_view key, std::string_view permit, Timestamp now,
                       const Decide& decide);
  // An acquire inside OnShard.
  PermitAnswer AcquireIn(Shard& shard, std::string_view key, Timestamp now,
                         const PermitAcquire& request);
  Shard& ShardFor(std::string_view key) const;

  const PermitSpec spec_;
  const size_t max_bytes_;
  const size_t max_key_bytes_;
  const uint64_t seed_;
  const size_t shard_mask_;
  std::unique_ptr<Shard[]> shards_;
  // Set (under every shard's lock) when a newer table took this one's permits: every call is
  // then its. Read under any one shard's lock.
  std::shared_ptr<PermitTable> successor_;
};

// Moves every permit `old` holds (live or not yet dropped) into `table`, with their expiries and
// the count of expired ones, and makes `old` hand every later call on to `table`. A permit moved
// is never dropped, even past `table`'s bytes (a reload that shrank the pool's part): the shard
// then refuses acquires as `full` until it is back within them. `table` must not be in use yet.
void TakePermitsOf(const std::shared_ptr<PermitTable>& table, PermitTable& old);

// The permit tables of one memory store that are alive, by pool id (LimiterOptions::id), for
// its Stats(), its snapshots and the pools that replace others of their id.
class LivePermitTables {
 public:
  // Lists `table` under `id`, first taking the permits of the newest table listed under it (none
  // for an empty id: a pool with no name shares nothing).
  void Add(std::string_view id, const std::shared_ptr<PermitTable>& table);
  void Remove(const PermitTable* table);
  void AddStats(StoreStats& s) const;
  // Calls f(id, table) for each table listed, under the list's lock (a pool being destroyed
  // meanwhile waits).
  void ForEach(const std::function<void(const std::string& id, const PermitTable&)>& f) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, PermitTable*>> tables_;  // oldest first
};

// A PermitPool over a table, answering on the caller's thread before each call returns.
// `restore` (may be empty) is given the table before any other use (a snapshot's permits);
// then the table takes the permits of the newest table `live` lists under `id`, and is listed
// there while the pool lives.
Result<std::unique_ptr<PermitPool>> MakeMemoryPermitPool(
    const PermitSpec& spec, size_t max_bytes, size_t shards, size_t max_key_bytes,
    std::string_view id, std::shared_ptr<LivePermitTables> live,
    const std::function<void(PermitTable&)>& restore);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_PERMIT_TABLE_H_
