// Space-Saving (Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and Top-k
// Elements in Data Streams", 2005): the heaviest identities of an unbounded stream in bounded
// memory. It keeps `capacity` counters; an identity not tracked takes over the counter with the
// smallest count and inherits that count as its possible overestimation (`error`).
//
// Guarantees, with N the total weight added and k the capacity:
//   - every identity whose true weight exceeds N/k is tracked;
//   - for a tracked identity, rejected + near_limit <= true weight <= count, where
//     count = rejected + near_limit + error, and error <= N/k.
// `rejected` and `near_limit` are exact counts since the identity last entered the sketch; the
// inherited part cannot be split between them, so it is reported separately as `error`.
//
// Add is O(log k) (a min-heap on count beside a hash index) and allocates only while the sketch
// fills up or when a new identity is longer than the counter's string it reuses. Not
// thread-safe: the caller locks.
#ifndef SLUICE_METRICS_TOP_K_H_
#define SLUICE_METRICS_TOP_K_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice::server {

class SpaceSaving {
 public:
  struct Item {
    std::string identity;
    uint64_t count = 0;  // the estimate: an upper bound on the true weight
    uint64_t error = 0;  // inherited from the evicted counter
    uint64_t rejected = 0;
    uint64_t near_limit = 0;
  };

  // capacity 0 tracks nothing.
  explicit SpaceSaving(size_t capacity);
  SpaceSaving(const SpaceSaving&) = delete;
  SpaceSaving& operator=(const SpaceSaving&) = delete;

  // Adds weight rejected + near_limit for `identity` (nothing if both are 0).
  void Add(std::string_view identity, uint64_t rejected, uint64_t near_limit);

  // The n tracked items with the largest count, largest first (ties by identity).
  std::vector<Item> Top(size_t n) const;

  size_t capacity() const { return capacity_; }
  size_t size() const { return items_.size(); }
  uint64_t total() const { return total_; }  // N

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void SiftUp(size_t pos);
  void SiftDown(size_t pos);
  void Swap(size_t a, size_t b);
  bool Less(size_t a, size_t b) const { return items_[heap_[a]].count < items_[heap_[b]].count; }

  size_t capacity_;
  uint64_t total_ = 0;
  // A deque so that items never move: the index keys are views of their identities.
  std::deque<Item> items_;
  std::vector<uint32_t> heap_;      // item indices, a min-heap on count
  std::vector<uint32_t> heap_pos_;  // item index -> position in heap_
  std::unordered_map<std::string_view, uint32_t, Hash, std::equal_to<>> index_;
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_TOP_K_H_
