// One shard of the memory store: an open-addressing index over chunked entries, a CLOCK hand
// for eviction and a cursor for opportunistic expiry. Internal; callers hold no reference into
// a shard across calls. Thread-safe: every public method takes the shard's mutex.
#ifndef SLUICE_STORE_MEMORY_SHARD_H_
#define SLUICE_STORE_MEMORY_SHARD_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "sluice/decision.h"
#include "sluice/limiter.h"

namespace sluice::internal {

template <typename Alg>
class alignas(64) MemoryShard {
 public:
  using State = typename Alg::State;

  explicit MemoryShard(size_t budget_bytes) : budget_bytes_(budget_bytes) {}
  ~MemoryShard() {
    for (uint32_t id = 0; id < next_unused_; ++id) {
      Entry& e = at(id);
      if ((e.len_flags & kUsed) != 0) FreeKey(e);
    }
  }
  MemoryShard(const MemoryShard&) = delete;
  MemoryShard& operator=(const MemoryShard&) = delete;

  Decision Decide(const Alg& alg, std::string_view key, uint32_t hash, Timestamp now,
                  int64_t cost) {
    std::lock_guard<std::mutex> lock(mu_);
    if (const uint32_t id = Find(key, hash); id != kNone) {
      Entry& e = at(id);
      e.len_flags |= kReferenced;
      const size_t heap_before = Alg::HeapBytes(e.state);
      Decision d = alg.Decide(e.state, now, cost);
      const size_t heap_after = Alg::HeapBytes(e.state);
      if (heap_after != heap_before) {
        heap_bytes_ += heap_after - heap_before;  // wraps correctly when it shrinks
        while (UsedBytes() > budget_bytes_ && count_ > 1 && EvictOne(alg, now, id)) {
        }
      }
      return d;
    }
    State state = alg.Initial(now);
    Decision d = alg.Decide(state, now, cost);
    // A state that is already replenished is the same as no state: keep nothing.
    if (alg.ReplenishedAt(state) > now) Insert(alg, key, hash, std::move(state), now);
    return d;
  }

  size_t Sweep(const Alg& alg, Timestamp now) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t dropped = 0;
    for (uint32_t id = 0; id < next_unused_; ++id) {
      Entry& e = at(id);
      if ((e.len_flags & kUsed) != 0 && alg.ReplenishedAt(e.state) <= now) {
        Remove(id);
        ++expirations_;
        ++dropped;
      }
    }
    return dropped;
  }

  void AddStats(StoreStats& s) const {
    std::lock_guard<std::mutex> lock(mu_);
    s.keys += count_;
    s.bytes += UsedBytes();
    s.max_bytes += budget_bytes_;
    s.evictions += evictions_;
    s.expirations += expirations_;
  }

 private:
  static constexpr uint32_t kNone = 0xffffffffu;
  static constexpr uint32_t kUsed = 1u << 31;
  static constexpr uint32_t kReferenced = 1u << 30;
  static constexpr uint32_t kLenMask = kReferenced - 1;
  static constexpr size_t kInlineKey = 16;
  static constexpr uint32_t kChunkShift = 8;
  static constexpr uint32_t kChunkSize = 1u << kChunkShift;
  static constexpr uint32_t kMaxEntries = (1u << 24) - 2;  // ids must fit the slot encoding
  // An entry's share of the index: it grows at 70% load, so right after doubling it holds up to
  // 2.86 four-byte slots per entry.
  static constexpr size_t kIndexBytesPerEntry = 12;
  static constexpr uint32_t kExpiryStepsPerInsert = 2;

  struct Entry {
    char key[kInlineKey];  // the key, or a pointer to a heap copy when longer than kInlineKey
    uint32_t len_flags = 0;
    uint32_t hash = 0;  // the free-list link while unused
    State state{};
  };
  static constexpr size_t kEntryCost = sizeof(Entry) + kIndexBytesPerEntry;

  Entry& at(uint32_t id) { return chunks_[id >> kChunkShift][id & (kChunkSize - 1)]; }
  const Entry& at(uint32_t id) const { return chunks_[id >> kChunkShift][id & (kChunkSize - 1)]; }

  static uint32_t Len(const Entry& e) { return e.len_flags & kLenMask; }
  static const char* KeyPtr(const Entry& e) {
    if (Len(e) <= kInlineKey) return e.key;
    const char* p;
    std::memcpy(&p, e.key, sizeof(p));
    return p;
  }
  static size_t KeyHeapBytes(size_t len) { return len > kInlineKey ? len : 0; }
  static uint32_t Slot(uint32_t hash, uint32_t id) { return (hash & 0xff000000u) | (id + 1); }
  static uint32_t SlotId(uint32_t slot) { return (slot & 0x00ffffffu) - 1; }

  size_t UsedBytes() const { return count_ * kEntryCost + heap_bytes_; }

  uint32_t Find(std::string_view key, uint32_t hash) const {
    if (slots_ == nullptr) return kNone;
    const uint32_t fingerprint = hash & 0xff000000u;
    for (uint32_t pos = hash & slot_mask_;; pos = (pos + 1) & slot_mask_) {
      const uint32_t s = slots_[pos];
      if (s == 0) return kNone;
      if ((s & 0xff000000u) != fingerprint) continue;
      const uint32_t id = SlotId(s);
      const Entry& e = at(id);
      if (e.hash == hash && Len(e) == key.size() &&
          std::memcmp(KeyPtr(e), key.data(), key.size()) == 0) {
        return id;
      }
    }
  }

  void PlaceSlot(uint32_t slot, uint32_t hash) {
    uint32_t pos = hash & slot_mask_;
    while (slots_[pos] != 0) pos = (pos + 1) & slot_mask_;
    slots_[pos] = slot;
  }

  void GrowIndexIfNeeded() {
    const size_t slots = slots_ == nullptr ? 0 : size_t{slot_mask_} + 1;
    if ((count_ + 1) * 10 <= slots * 7) return;
    const size_t new_slots = slots == 0 ? 16 : slots * 2;
    auto old = std::move(slots_);
    slots_ = std::make_unique<uint32_t[]>(new_slots);  // zeroed: all empty
    slot_mask_ = static_cast<uint32_t>(new_slots - 1);
    for (size_t i = 0; i < slots; ++i) {
      if (old[i] != 0) PlaceSlot(old[i], at(SlotId(old[i])).hash);
    }
  }

  // Backward-shift deletion keeps linear probing free of tombstones.
  void EraseSlot(uint32_t id) {
    const uint32_t hash = at(id).hash;
    uint32_t i = hash & slot_mask_;
    while (SlotId(slots_[i]) != id) i = (i + 1) & slot_mask_;
    for (uint32_t j = i;;) {
      j = (j + 1) & slot_mask_;
      if (slots_[j] == 0) break;
      const uint32_t home = at(SlotId(slots_[j])).hash & slot_mask_;
      const bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = 0;
  }

  uint32_t AllocateEntry() {
    if (free_head_ != kNone) {
      const uint32_t id = free_head_;
      free_head_ = at(id).hash;
      return id;
    }
    if ((next_unused_ & (kChunkSize - 1)) == 0) chunks_.push_back(std::make_unique<Entry[]>(kChunkSize));
    return next_unused_++;
  }

  void FreeKey(Entry& e) {
    if (Len(e) > kInlineKey) delete[] KeyPtr(e);
  }

  void Remove(uint32_t id) {
    Entry& e = at(id);
    EraseSlot(id);
    heap_bytes_ -= KeyHeapBytes(Len(e)) + Alg::HeapBytes(e.state);
    FreeKey(e);
    e.state = State{};
    e.len_flags = 0;
    e.hash = free_head_;
    free_head_ = id;
    --count_;
  }

  // Advances the CLOCK hand: a replenished counter is dropped for free; a referenced one loses its
  // reference bit and is passed; the first unreferenced one is evicted. `keep` is never touched.
  bool EvictOne(const Alg& alg, Timestamp now, uint32_t keep) {
    for (uint64_t steps = 0; steps < 2ull * next_unused_ + 1; ++steps) {
      const uint32_t id = hand_;
      hand_ = hand_ + 1 >= next_unused_ ? 0 : hand_ + 1;
      Entry& e = at(id);
      if ((e.len_flags & kUsed) == 0 || id == keep) continue;
      if (alg.ReplenishedAt(e.state) <= now) {
        Remove(id);
        ++expirations_;
        return true;
      }
      if ((e.len_flags & kReferenced) != 0) {
        e.len_flags &= ~kReferenced;
        continue;
      }
      Remove(id);
      ++evictions_;
      return true;
    }
    return false;
  }

  // Each new key pays for examining a couple of old ones, so replenished state is reclaimed at
  // the rate keys arrive, without a background thread.
  void ExpireSome(const Alg& alg, Timestamp now) {
    for (uint32_t i = 0; i < kExpiryStepsPerInsert && next_unused_ > 0; ++i) {
      const uint32_t id = expiry_cursor_;
      expiry_cursor_ = expiry_cursor_ + 1 >= next_unused_ ? 0 : expiry_cursor_ + 1;
      Entry& e = at(id);
      if ((e.len_flags & kUsed) != 0 && alg.ReplenishedAt(e.state) <= now) {
        Remove(id);
        ++expirations_;
      }
    }
  }

  void Insert(const Alg& alg, std::string_view key, uint32_t hash, State&& state, Timestamp now) {
    ExpireSome(alg, now);
    const size_t cost = kEntryCost + KeyHeapBytes(key.size()) + Alg::HeapBytes(state);
    while (count_ > 0 && (UsedBytes() + cost > budget_bytes_ || count_ >= kMaxEntries)) {
      if (!EvictOne(alg, now, kNone)) break;
    }
    // A budget too small for even this one counter: decide as if every request were fresh.
    if (UsedBytes() + cost > budget_bytes_ || count_ >= kMaxEntries) return;
    GrowIndexIfNeeded();
    const uint32_t id = AllocateEntry();
    Entry& e = at(id);
    if (key.size() <= kInlineKey) {
      std::memcpy(e.key, key.data(), key.size());
    } else {
      char* copy = new char[key.size()];
      std::memcpy(copy, key.data(), key.size());
      std::memcpy(e.key, &copy, sizeof(copy));
    }
    e.len_flags = static_cast<uint32_t>(key.size()) | kUsed;
    e.hash = hash;
    e.state = std::move(state);
    PlaceSlot(Slot(hash, id), hash);
    heap_bytes_ += cost - kEntryCost;
    ++count_;
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry[]>> chunks_;
  std::unique_ptr<uint32_t[]> slots_;
  uint32_t slot_mask_ = 0;
  uint32_t next_unused_ = 0;
  uint32_t free_head_ = kNone;
  uint32_t hand_ = 0;
  uint32_t expiry_cursor_ = 0;
  size_t count_ = 0;
  size_t heap_bytes_ = 0;  // long keys and algorithm heap state
  size_t budget_bytes_;
  uint64_t evictions_ = 0;
  uint64_t expirations_ = 0;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_SHARD_H_
