// A map from a pair of names (domain, limit) to a value that lives as long as the table, built
// for the metrics hot path: lookups take no lock and allocate nothing; only the first use of a
// pair inserts, under a mutex. Entries are never removed and the slot array never grows, so a
// lookup is a linear probe over atomic pointers that is safe against concurrent inserts (a
// pointer is published with release after its entry is fully built).
//
// The table holds at most `max_entries`; each insert names its own cap (<= max_entries) so a
// caller can keep room in reserve, e.g. for overflow series.
#ifndef SLUICE_METRICS_LABEL_TABLE_H_
#define SLUICE_METRICS_LABEL_TABLE_H_

#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::server {

template <typename Value>
class LabelTable {
 public:
  struct Entry {
    template <typename... Args>
    Entry(uint64_t h, std::string_view a, std::string_view b, Args&&... args)
        : hash(h), first(a), second(b), value(std::forward<Args>(args)...) {}
    const uint64_t hash;
    const std::string first;
    const std::string second;
    Value value;
  };

  explicit LabelTable(size_t max_entries)
      : max_entries_(max_entries),
        // At most half full, so probes stay short and always end at an empty slot.
        mask_(std::bit_ceil(std::max<size_t>(2 * max_entries, 2)) - 1),
        slots_(std::make_unique<std::atomic<Entry*>[]>(mask_ + 1)) {}
  LabelTable(const LabelTable&) = delete;
  LabelTable& operator=(const LabelTable&) = delete;

  // Lock-free: the value for (a, b), or nullptr.
  Value* Find(std::string_view a, std::string_view b) const { return Find(a, b, Hash(a, b)); }

  // The value for (a, b), inserted (constructed from args) if the table holds fewer than `cap`
  // entries; nullptr if it is absent and the table is at the cap. A full table answers without
  // taking the lock.
  template <typename... Args>
  Value* FindOrInsert(std::string_view a, std::string_view b, size_t cap, Args&&... args) {
    const uint64_t h = Hash(a, b);
    if (Value* v = Find(a, b, h)) return v;
    cap = std::min(cap, max_entries_);
    if (size_.load(std::memory_order_relaxed) >= cap) return nullptr;
    std::lock_guard lock(mu_);
    if (Value* v = Find(a, b, h)) return v;  // another thread inserted it meanwhile
    if (entries_.size() >= cap) return nullptr;
    auto entry = std::make_unique<Entry>(h, a, b, std::forward<Args>(args)...);
    Entry* raw = entry.get();
    entries_.push_back(std::move(entry));
    size_t i = h & mask_;
    while (slots_[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask_;
    slots_[i].store(raw, std::memory_order_release);
    size_.store(entries_.size(), std::memory_order_relaxed);
    return &raw->value;
  }

  // Every entry so far, in insertion order. The pointers stay valid for the table's lifetime.
  std::vector<const Entry*> Snapshot() const {
    std::lock_guard lock(mu_);
    std::vector<const Entry*> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.get());
    return out;
  }

  size_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  static uint64_t Hash(std::string_view a, std::string_view b) {
    const uint64_t ha = std::hash<std::string_view>{}(a);
    const uint64_t hb = std::hash<std::string_view>{}(b);
    // Asymmetric mix, so (x, y) and (y, x) differ; the multiply spreads hb's bits into the
    // low bits the mask keeps.
    return ha ^ ((hb + 0x9e3779b97f4a7c15ULL) * 0xff51afd7ed558ccdULL);
  }

  Value* Find(std::string_view a, std::string_view b, uint64_t h) const {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Entry* e = slots_[i].load(std::memory_order_acquire);
      if (e == nullptr) return nullptr;
      if (e->hash == h && e->first == a && e->second == b) return &e->value;
    }
  }

  const size_t max_entries_;
  const size_t mask_;
  const std::unique_ptr<std::atomic<Entry*>[]> slots_;
  std::atomic<size_t> size_{0};
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;  // owns the entries; guarded by mu_
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_LABEL_TABLE_H_
