#include "metrics/top_k.h"

#include <algorithm>
#include <utility>

namespace sluice::server {

SpaceSaving::SpaceSaving(size_t capacity) : capacity_(capacity) {}

void SpaceSaving::Add(std::string_view identity, uint64_t rejected, uint64_t near_limit) {
  const uint64_t weight = rejected + near_limit;
  if (weight == 0 || capacity_ == 0) return;
  total_ += weight;

  if (auto it = index_.find(identity); it != index_.end()) {
    Item& item = items_[it->second];
    item.count += weight;
    item.rejected += rejected;
    item.near_limit += near_limit;
    SiftDown(heap_pos_[it->second]);
    return;
  }

  if (items_.size() < capacity_) {
    const auto index = static_cast<uint32_t>(items_.size());
    items_.push_back(Item{std::string(identity), weight, 0, rejected, near_limit});
    heap_.push_back(index);
    heap_pos_.push_back(static_cast<uint32_t>(heap_.size() - 1));
    index_.emplace(items_.back().identity, index);
    SiftUp(heap_.size() - 1);
    return;
  }

  // Take over the smallest counter. Its index entry is re-keyed in place (extract/insert of
  // the same node) so that a full sketch allocates nothing here.
  const uint32_t victim = heap_[0];
  Item& item = items_[victim];
  auto node = index_.extract(item.identity);
  item.identity.assign(identity);
  item.error = item.count;
  item.count += weight;
  item.rejected = rejected;
  item.near_limit = near_limit;
  node.key() = item.identity;
  index_.insert(std::move(node));
  SiftDown(0);
}

std::vector<SpaceSaving::Item> SpaceSaving::Top(size_t n) const {
  std::vector<const Item*> sorted;
  sorted.reserve(items_.size());
  for (const Item& item : items_) sorted.push_back(&item);
  n = std::min(n, sorted.size());
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n), sorted.end(),
                    [](const Item* a, const Item* b) {
                      if (a->count != b->count) return a->count > b->count;
                      return a->identity < b->identity;
                    });
  std::vector<Item> top;
  top.reserve(n);
  for (size_t i = 0; i < n; ++i) top.push_back(*sorted[i]);
  return top;
}

void SpaceSaving::Swap(size_t a, size_t b) {
  std::swap(heap_[a], heap_[b]);
  heap_pos_[heap_[a]] = static_cast<uint32_t>(a);
  heap_pos_[heap_[b]] = static_cast<uint32_t>(b);
}

void SpaceSaving::SiftUp(size_t pos) {
  while (pos > 0) {
    const size_t parent = (pos - 1) / 2;
    if (!Less(pos, parent)) break;
    Swap(pos, parent);
    pos = parent;
  }
}

void SpaceSaving::SiftDown(size_t pos) {
  for (;;) {
    const size_t left = 2 * pos + 1;
    if (left >= heap_.size()) break;
    size_t smallest = left;
    if (left + 1 < heap_.size() && Less(left + 1, left)) smallest = left + 1;
    if (!Less(smallest, pos)) break;
    Swap(pos, smallest);
    pos = smallest;
  }
}

}  // namespace sluice::server
