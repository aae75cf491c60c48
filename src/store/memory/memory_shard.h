// One shard of the memory store: a Robin Hood open-addressing table whose slots hold the
// counters themselves (one cache miss per lookup, no per-key allocation for keys of up to 16
// bytes), sampled-LRU eviction near the arriving key, and opportunistic expiry. Internal.
// Thread-safe: every public method takes the shard's lock.
#ifndef SLUICE_STORE_MEMORY_MEMORY_SHARD_H_
#define SLUICE_STORE_MEMORY_MEMORY_SHARD_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sluice/decision.h"
#include "sluice/limiter.h"
#include "store/memory/adjust_state.h"
#include "store/memory/spin_lock.h"

namespace sluice::internal {

// The answer to a request a memory limiter cannot take (a negative cost, a key over the bound):
// invalid, never retried. One for the store's limiters and the override table's views.
inline Decision InvalidRequest(int64_t capacity) {
  Decision d;
  d.reason = DecisionReason::kInvalidRequest;
  d.limit = capacity;
  d.retry_after = kNever;
  return d;
}

template <typename Alg>
class alignas(64) MemoryShard {
 public:
  using State = typename Alg::State;

  explicit MemoryShard(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // The smallest useful budget: a minimal table plus four counters at their largest. Below it a
  // shard would keep (almost) nothing and every key would look fresh: silently unlimited.
  static size_t MinBudget(const Alg& alg) {
    size_t heap = 0;
    if constexpr (requires { alg.MaxHeapBytes(); }) heap = Allocated(alg.MaxHeapBytes());
    return 32 * sizeof(Entry) + 4 * (sizeof(Entry) + heap);
  }
  ~MemoryShard() { Release(); }
  MemoryShard(const MemoryShard&) = delete;
  MemoryShard& operator=(const MemoryShard&) = delete;

  // Decides, or with kCharge charges (Alg::Charge), the request for `key`. A template argument,
  // not a flag: a runtime choice here cost the hot-key decision 15 -> 17 ns (BENCHMARKS.md).
  // `reserve`: LimitCheck::reserve, decided with the cost under the shard's lock (a charge
  // ignores it).
  template <bool kCharge = false>
  Decision Decide(const Alg& alg, std::string_view key, uint32_t hash, Timestamp now, int64_t cost,
                  int64_t reserve = 0) {
    const auto apply = [&](State& state) {
      if constexpr (kCharge) {
        return alg.Charge(state, now, cost);
      } else {
        return alg.Decide(state, now, cost, reserve);
      }
    };
    std::lock_guard<SpinLock> lock(mu_);
    Tick();
    if (const size_t pos = Find(key, hash); pos != kNone) {
      Entry& e = slots_[pos];
      Touch(e);
      if constexpr (kHasHeapState) {
        const size_t before = StateHeapBytes(e.state);
        Decision d = apply(e.state);
        heap_bytes_ += StateHeapBytes(e.state) - before;  // modular: also right when it shrinks
        EnforceBudgetAfterGrowth(alg, key, hash, now);
        return d;
      } else {
        return apply(e.state);
      }
    }
    State state = alg.Initial(now);
    Decision d = apply(state);
    // A state that is already replenished is the same as no state: keep nothing.
    if (alg.ReplenishedAt(state) > now) Insert(alg, key, hash, std::move(state), now);
    return d;
  }

  // Gives back an admission (Limiter::Refund). An absent key is already replenished: nothing to
  // give back. Not a use of the key for LRU: a refund does not make a counter worth keeping.
  void Refund(const Alg& alg, std::string_view key, uint32_t hash, Timestamp at, Timestamp now,
              int64_t cost) {
    std::lock_guard<SpinLock> lock(mu_);
    const size_t pos = Find(key, hash);
    if (pos == kNone) return;
    Entry& e = slots_[pos];
    if constexpr (kHasHeapState) {
      const size_t before = StateHeapBytes(e.state);
      alg.Refund(e.state, at, now, cost);
      heap_bytes_ += StateHeapBytes(e.state) - before;  // modular: it only shrinks here
    } else {
      alg.Refund(e.state, at, now, cost);
    }
    // Given back to full, the counter is a fresh one: keep nothing, as Decide would.
    if (alg.ReplenishedAt(e.state) <= now) {
      RemoveAt(pos);
      ++expirations_;
    }
  }

  // Reads the key's counter, applies `steps` (adjust_state.h) and reads it again, under the
  // lock: one atomic step (Limiter::Adjust). A use of the key for LRU.
  Adjusted Adjust(const Alg& alg, std::string_view key, uint32_t hash, Timestamp now,
                  const AdjustSteps& steps, bool allow_over_limit) {
    std::lock_guard<SpinLock> lock(mu_);
    Tick();
    Adjusted r;
    const size_t pos = Find(key, hash);
    if (pos == kNone) {
      State state = alg.Initial(now);
      r.before = alg.Decide(state, now, 0);
      AdjustState(alg, state, now, steps, allow_over_limit);
      r.after = alg.Decide(state, now, 0);
      if (alg.ReplenishedAt(state) > now) Insert(alg, key, hash, std::move(state), now);
      return r;
    }
    Entry& e = slots_[pos];
    Touch(e);
    const size_t before = StateHeapBytes(e.state);
    r.before = alg.Decide(e.state, now, 0);
    AdjustState(alg, e.state, now, steps, allow_over_limit);
    r.after = alg.Decide(e.state, now, 0);
    heap_bytes_ += StateHeapBytes(e.state) - before;  // modular: also right when it shrinks
    if (alg.ReplenishedAt(e.state) <= now) {
      RemoveAt(pos);
      ++expirations_;
    } else if constexpr (kHasHeapState) {
      EnforceBudgetAfterGrowth(alg, key, hash, now);
    }
    return r;
  }

  // Calls f(key, state) for every counter held, under the shard's lock (a reload's carry-over:
  // f copies, it must not call into this shard).
  template <typename F>
  void ForEachCounter(F&& f) const {
    std::lock_guard<SpinLock> lock(mu_);
    for (size_t i = 0; i < capacity_; ++i) {
      const Entry& e = slots_[i];
      if (Used(e)) f(std::string_view(KeyPtr(e), Len(e)), e.state);
    }
  }

  // Takes in a counter carried over from a limiter this one replaces, unless the key has one
  // already (decided here since: that is the newer state) or the state is replenished.
  void Adopt(const Alg& alg, std::string_view key, uint32_t hash, State&& state, Timestamp now) {
    std::lock_guard<SpinLock> lock(mu_);
    if (Find(key, hash) != kNone || alg.ReplenishedAt(state) <= now) return;
    Insert(alg, key, hash, std::move(state), now);
  }

  // Forgets the key's counter (Limiter::Reset).
  void Reset(std::string_view key, uint32_t hash) {
    std::lock_guard<SpinLock> lock(mu_);
    if (const size_t pos = Find(key, hash); pos != kNone) RemoveAt(pos);
  }

  // Starts loading the slot `hash` most likely lives in, before the lock is taken, so the cache
  // miss overlaps with hashing and locking. Reads only the published table hint (relaxed
  // atomics); a stale hint costs a useless prefetch, never a wrong answer.
  void Prefetch(uint32_t hash) const {
    const Entry* table = table_hint_.load(std::memory_order_relaxed);
    const size_t capacity = capacity_hint_.load(std::memory_order_relaxed);
    if (table == nullptr) return;
    // The home slot and the following lines: at 68-85% load the mean probe distance is about
    // two slots, so the walk usually crosses 2-3 cache lines; asking for them together turns
    // serial misses into parallel ones.
    // Integer arithmetic: the hint may pair a freed table with a newer capacity, and forming
    // such a pointer by pointer arithmetic would be undefined; a prefetch itself never faults.
    const uintptr_t home =
        reinterpret_cast<uintptr_t>(table) + ((uint64_t{hash} * capacity) >> 32) * sizeof(Entry);
    for (int line = 0; line < kPrefetchLines; ++line) {
      __builtin_prefetch(reinterpret_cast<const void*>(home + 64 * line));
    }
  }

  size_t Sweep(const Alg& alg, Timestamp now) {
    std::lock_guard<SpinLock> lock(mu_);
    size_t dropped = 0;
    for (size_t pos = 0; pos < capacity_;) {
      Entry& e = slots_[pos];
      if (Used(e) && alg.ReplenishedAt(e.state) <= now) {
        RemoveAt(pos);  // shifts the next entry into pos: look at pos again
        ++expirations_;
        ++dropped;
      } else {
        ++pos;
      }
    }
    return dropped;
  }

  // Calls f(key, state) for every counter not replenished at `now`, under the shard's lock (a
  // snapshot copies them out; f must be quick and must not block). Returns how many.
  template <typename F>
  size_t ForEachLive(const Alg& alg, Timestamp now, F&& f) const {
    std::lock_guard<SpinLock> lock(mu_);
    size_t n = 0;
    for (size_t pos = 0; pos < capacity_; ++pos) {
      const Entry& e = slots_[pos];
      if (!Used(e) || alg.ReplenishedAt(e.state) <= now) continue;
      f(std::string_view(KeyPtr(e), Len(e)), e.state);
      ++n;
    }
    return n;
  }

  // Puts a restored counter for `key`, replacing the key's own if it has one; like a new key,
  // within the budget (evicting if need be). A replenished state is not kept.
  void Restore(const Alg& alg, std::string_view key, uint32_t hash, State&& state, Timestamp now) {
    if (alg.ReplenishedAt(state) <= now) return;
    std::lock_guard<SpinLock> lock(mu_);
    if (const size_t pos = Find(key, hash); pos != kNone) RemoveAt(pos);
    Insert(alg, key, hash, std::move(state), now);
  }

  void AddStats(StoreStats& s) const {
    std::lock_guard<SpinLock> lock(mu_);
    s.keys += count_;
    s.bytes += UsedBytes();
    s.max_bytes += budget_bytes_;
    s.evictions += evictions_;
    s.expirations += expirations_;
    s.evicted_replenished += evicted_replenished_;
  }

 private:
  static constexpr size_t kNone = ~size_t{0};
  static constexpr bool kHasHeapState = !std::is_trivially_destructible_v<State>;
  // meta: key length (bits 0-15), probe distance from the home slot (16-22), used (23), and the
  // shard epoch of the last use (24-31) for approximate LRU.
  static constexpr uint32_t kLenMask = 0xffffu;
  static constexpr uint32_t kDistShift = 16;
  static constexpr uint32_t kMaxDist = (1u << 7) - 1;
  static constexpr uint32_t kUsed = 1u << 23;
  static constexpr uint32_t kEpochShift = 24;
  static constexpr size_t kInlineKey = 16;
  static constexpr uint32_t kMaxLoadPercent = 85;
  static constexpr uint32_t kExpiryStepsPerInsert = 2;
  static constexpr int kPrefetchLines = 3;
  static constexpr uint32_t kReclaimScan = 16;
  static constexpr uint32_t kEvictScan = 16;

  struct Entry {
    char key[kInlineKey];  // the key, or a pointer to a heap copy when longer than kInlineKey
    uint32_t meta = 0;
    uint32_t hash = 0;
    State state{};
  };

  static bool Used(const Entry& e) { return (e.meta & kUsed) != 0; }
  static uint32_t Len(const Entry& e) { return e.meta & kLenMask; }
  static uint32_t Dist(const Entry& e) { return (e.meta >> kDistShift) & kMaxDist; }
  // The LRU clock: it advances every capacity/64 decisions, so ages are in fractions of the
  // time it takes to use every counter once.
  void Tick() {
    if (++decisions_this_epoch_ >= std::max<size_t>(1, capacity_ / 64)) {
      ++epoch_;
      decisions_this_epoch_ = 0;
    }
  }
  void Touch(Entry& e) const {
    e.meta = (e.meta & ~(0xffu << kEpochShift)) | (uint32_t{epoch_} << kEpochShift);
  }
  // Epochs since the last use, modulo 256 (a counter idle for 256 epochs looks young again).
  uint8_t Age(const Entry& e) const {
    return static_cast<uint8_t>(epoch_ - (e.meta >> kEpochShift));
  }
  static void SetDist(Entry& e, uint32_t d) {
    e.meta = (e.meta & ~(kMaxDist << kDistShift)) | (d << kDistShift);
  }
  static const char* KeyPtr(const Entry& e) {
    if (Len(e) <= kInlineKey) return e.key;
    const char* p;
    std::memcpy(&p, e.key, sizeof(p));
    return p;
  }
  // What malloc takes for an n-byte block, an upper bound for glibc's (an 8-byte header, 16-byte
  // alignment, 32 bytes at least), so that the bound is kept in the heap's own terms: a 20-byte
  // key takes 32, not 20.
  static constexpr size_t Allocated(size_t n) {
    return n == 0 ? 0 : std::max<size_t>(32, (n + 8 + 15) & ~size_t{15});
  }
  static size_t KeyHeapBytes(size_t len) { return len > kInlineKey ? Allocated(len) : 0; }
  static size_t StateHeapBytes(const State& state) { return Allocated(Alg::HeapBytes(state)); }

  // Table sizes are not powers of two (growth is by 1.25x to keep memory per key tight), so the
  // home slot is the hash scaled into [0, capacity).
  size_t Home(uint32_t hash) const { return (uint64_t{hash} * capacity_) >> 32; }
  size_t Next(size_t pos) const { return pos + 1 == capacity_ ? 0 : pos + 1; }
  size_t UsedBytes() const { return capacity_ * sizeof(Entry) + heap_bytes_; }

  size_t Find(std::string_view key, uint32_t hash) const {
    if (count_ == 0) return kNone;
    size_t pos = Home(hash);
    for (uint32_t d = 0;; ++d, pos = Next(pos)) {
      const Entry& e = slots_[pos];
      if (!Used(e) || Dist(e) < d) return kNone;  // Robin Hood: it would have been placed here
      if (e.hash == hash && Len(e) == key.size() &&
          std::memcmp(KeyPtr(e), key.data(), key.size()) == 0) {
        return pos;
      }
    }
  }

  // Moves `incoming` into the table. Robin Hood displaces residents along the way, so if a probe
  // sequence grows too long the entry left homeless -- returned in `incoming` -- may be another.
  bool Place(Entry& incoming) {
    Entry carry = std::move(incoming);
    size_t pos = Home(carry.hash);
    for (uint32_t d = 0;; ++d, pos = Next(pos)) {
      if (d > kMaxDist) {
        incoming = std::move(carry);
        return false;
      }
      Entry& e = slots_[pos];
      if (!Used(e)) {
        SetDist(carry, d);
        e = std::move(carry);
        return true;
      }
      if (Dist(e) < d) {  // take from the rich: the resident is nearer its home than we are
        SetDist(carry, d);
        std::swap(carry, e);
        d = Dist(carry);
      }
    }
  }

  // Backward-shift deletion: no tombstones, probe sequences stay short.
  void RemoveAt(size_t pos) {
    Entry& gone = slots_[pos];
    heap_bytes_ -= KeyHeapBytes(Len(gone)) + StateHeapBytes(gone.state);
    FreeKey(gone);
    for (size_t next = Next(pos);; pos = next, next = Next(next)) {
      Entry& n = slots_[next];
      if (!Used(n) || Dist(n) == 0) break;
      slots_[pos] = std::move(n);
      SetDist(slots_[pos], Dist(slots_[pos]) - 1);
    }
    slots_[pos] = Entry{};
    --count_;
  }

  static void FreeKey(Entry& e) {
    if (Len(e) > kInlineKey) delete[] KeyPtr(e);
  }

  void Release() {
    for (size_t i = 0; i < capacity_; ++i) {
      if (Used(slots_[i])) FreeKey(slots_[i]);
    }
  }

  // Home() scales a 32-bit hash, so a table has at most 2^31 slots.
  static constexpr size_t kMaxCapacity = size_t{1} << 31;
  size_t GrownCapacity() const {
    return std::min(kMaxCapacity, capacity_ < 16 ? size_t{16} : capacity_ + capacity_ / 4);
  }

  // Rebuilds the table at a new capacity (the hand and cursor restart at 0).
  void Rehash(size_t new_capacity) {
    auto old = std::move(slots_);
    const size_t old_capacity = capacity_;
    slots_ = std::make_unique<Entry[]>(new_capacity);
    capacity_ = new_capacity;
    // A prefetch never faults, so a reader mixing old and new hints only wastes one.
    table_hint_.store(slots_.get(), std::memory_order_relaxed);
    capacity_hint_.store(new_capacity, std::memory_order_relaxed);
    hand_ = expiry_cursor_ = 0;
    for (size_t i = 0; i < old_capacity; ++i) {
      if (Used(old[i]) && !Place(old[i])) DropUnplaced(old[i]);
    }
  }

  // A Robin Hood probe longer than kMaxDist (127) at 85% load takes a run of seeded-hash
  // collisions no realistic key set produces. Should it happen, the homeless counter is evicted
  // rather than corrupting the table.
  void DropUnplaced(Entry& e) {
    heap_bytes_ -= KeyHeapBytes(Len(e)) + StateHeapBytes(e.state);
    FreeKey(e);
    e = Entry{};
    --count_;
    ++evictions_;
  }

  // Picks a victim among up to kEvictScan used slots from `pos` on (sampled LRU, as Redis does):
  // a replenished counter is dropped at once (free: no decision changes); otherwise the one
  // unused for the most epochs is evicted. Returns the slot after the last one looked at, or
  // kNone if the window held no counter.
  size_t EvictFrom(const Alg& alg, size_t pos, Timestamp now, size_t keep = kNone) {
    size_t victim = kNone;
    uint32_t seen = 0;
    for (size_t steps = 0; seen < kEvictScan && steps < capacity_; ++steps, pos = Next(pos)) {
      Entry& e = slots_[pos];
      if (!Used(e) || pos == keep) continue;
      ++seen;
      if (alg.ReplenishedAt(e.state) <= now) {
        RemoveAt(pos);
        ++expirations_;
        ++evicted_replenished_;
        return pos;
      }
      if (victim == kNone || Age(e) > Age(slots_[victim])) victim = pos;
    }
    if (victim == kNone) return kNone;
    RemoveAt(victim);
    ++evictions_;
    return pos;
  }

  // Evicting where the new key will live keeps the table's load even: evicting in table order
  // (a global CLOCK hand) leaves a near-full band ahead of the hand, where Robin Hood probes and
  // shifts grow without bound.
  bool EvictNear(const Alg& alg, uint32_t hash, Timestamp now) {
    return EvictFrom(alg, Home(hash), now) != kNone;
  }

  // For memory freed anywhere (a sliding log grew): a hand walks the table window by window,
  // never taking the counter at `keep`.
  bool EvictOne(const Alg& alg, Timestamp now, size_t keep = kNone) {
    const size_t next = EvictFrom(alg, hand_, now, keep);
    if (next == kNone) return false;
    hand_ = next;
    return true;
  }

  // After a counter's heap state grew (sliding log), evict others until the budget holds.
  void EnforceBudgetAfterGrowth(const Alg& alg, std::string_view key, uint32_t hash,
                                Timestamp now) {
    while (UsedBytes() > budget_bytes_ && count_ > 1) {
      if (!EvictOne(alg, now, Find(key, hash))) return;
    }
  }

  // Each new key pays for examining a couple of old ones, so replenished state is reclaimed at
  // the rate keys arrive, without a background thread.
  void ExpireSome(const Alg& alg, Timestamp now) {
    for (uint32_t i = 0; i < kExpiryStepsPerInsert && count_ > 0; ++i) {
      const size_t pos = expiry_cursor_;
      Entry& e = slots_[pos];
      if (Used(e) && alg.ReplenishedAt(e.state) <= now) {
        RemoveAt(pos);  // the next entry shifts into pos; look at it next time
        ++expirations_;
      } else {
        expiry_cursor_ = Next(expiry_cursor_);
      }
    }
  }

  // Drops replenished counters in the run of slots the new key will probe. The cursor alone
  // would leave a dense band of stale counters ahead of it (inserts land everywhere, the cursor
  // cleans one place), and Robin Hood probe and shift lengths explode in such a band.
  void ReclaimAround(const Alg& alg, uint32_t hash, Timestamp now) {
    size_t pos = Home(hash);
    for (uint32_t scanned = 0; scanned < kReclaimScan; ++scanned) {
      Entry& e = slots_[pos];
      if (!Used(e)) return;
      if (alg.ReplenishedAt(e.state) <= now) {
        RemoveAt(pos);  // the next entry shifts into pos
        ++expirations_;
      } else {
        pos = Next(pos);
      }
    }
  }

  void Insert(const Alg& alg, std::string_view key, uint32_t hash, State&& state, Timestamp now) {
    if (capacity_ > 0) {
      ReclaimAround(alg, hash, now);
      ExpireSome(alg, now);
    }
    const size_t extra = KeyHeapBytes(key.size()) + StateHeapBytes(state);
    // Make room: grow the table while the budget allows it, evict otherwise.
    while (true) {
      const bool fits_load = (count_ + 1) * 100 <= capacity_ * kMaxLoadPercent;
      if (fits_load && UsedBytes() + extra <= budget_bytes_) break;
      if (!fits_load) {
        // Grow by 1.25x, or as far as the budget allows.
        const size_t room = budget_bytes_ > heap_bytes_ + extra
                                ? (budget_bytes_ - heap_bytes_ - extra) / sizeof(Entry)
                                : 0;
        const size_t grown = std::min(GrownCapacity(), room);
        if (grown > capacity_ && (count_ + 1) * 100 <= grown * kMaxLoadPercent) {
          Rehash(grown);
          continue;
        }
      }
      if (count_ == 0 || !EvictNear(alg, hash, now)) return;  // too small even for this counter
    }
    Entry e;
    if (key.size() <= kInlineKey) {
      std::memcpy(e.key, key.data(), key.size());
    } else {
      char* copy = new char[key.size()];
      std::memcpy(copy, key.data(), key.size());
      std::memcpy(e.key, &copy, sizeof(copy));
    }
    e.meta = static_cast<uint32_t>(key.size()) | kUsed;
    Touch(e);
    e.hash = hash;
    e.state = std::move(state);
    heap_bytes_ += extra;
    ++count_;
    if (!Place(e)) DropUnplaced(e);  // e: whichever counter found no slot
  }

  mutable SpinLock mu_;
  std::atomic<const Entry*> table_hint_{nullptr};
  std::atomic<size_t> capacity_hint_{0};
  std::unique_ptr<Entry[]> slots_;
  size_t capacity_ = 0;
  size_t count_ = 0;
  size_t hand_ = 0;
  size_t expiry_cursor_ = 0;
  size_t heap_bytes_ = 0;  // long keys and algorithm heap state
  size_t budget_bytes_;
  uint64_t evictions_ = 0;
  uint64_t expirations_ = 0;
  uint64_t evicted_replenished_ = 0;  // of expirations_: dropped to make room (EvictFrom)
  size_t decisions_this_epoch_ = 0;
  uint8_t epoch_ = 0;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_MEMORY_SHARD_H_
