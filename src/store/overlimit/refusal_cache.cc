#include "store/overlimit/refusal_cache.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace sluice::internal {

RefusalCache::RefusalCache(size_t max_bytes)
    : shard_max_bytes_(std::max(max_bytes, kLeastBytes) / kShards) {}

std::string RefusalCache::MapKey(uint64_t limiter, std::string_view key) {
  std::string out(sizeof(limiter) + key.size(), '\0');
  std::memcpy(out.data(), &limiter, sizeof(limiter));
  std::memcpy(out.data() + sizeof(limiter), key.data(), key.size());
  return out;
}

// What an entry takes: the map's node (key string, entry, next pointer, cached hash), a bucket
// pointer, and the key's own allocation when it does not fit the string's inline buffer.
size_t RefusalCache::EntryBytes(const std::string& map_key) {
  constexpr size_t kNode = sizeof(std::pair<const std::string, Entry>) + 2 * sizeof(void*);
  constexpr size_t kInline = 15;  // libstdc++'s short-string buffer
  return kNode + sizeof(void*) + (map_key.size() > kInline ? map_key.size() + 1 : 0);
}

RefusalCache::Shard& RefusalCache::ShardFor(const std::string& map_key) {
  return shards_[std::hash<std::string>{}(map_key) % kShards];
}

std::optional<Decision> RefusalCache::Find(uint64_t limiter, std::string_view key, int64_t cost,
                                           Timestamp now, bool fixed_window, int64_t capacity) {
  const std::string map_key = MapKey(limiter, key);
  Shard& shard = ShardFor(map_key);
  std::lock_guard lock(shard.mu);
  auto it = shard.map.find(map_key);
  if (it == shard.map.end()) return std::nullopt;
  Entry& e = it->second;
  for (size_t i = 0; i < e.count; ++i) {
    const Refusal& f = e.facts[i];
    if (f.expires <= now) continue;
    // A fixed window's count, and so its remaining, stays until the window ends, when every
    // cost up to the limit may pass again: one refusal answers every larger cost.
    const bool applies = f.cost == cost || (fixed_window && f.cost < cost && cost <= capacity);
    if (!applies) continue;
    e.used = ++shard.tick;
    Decision d;
    d.allowed = false;
    d.reason = DecisionReason::kOverLimit;
    d.limit = f.limit;
    d.remaining = f.remaining;
    d.retry_after = f.until - now;
    d.reset_after = std::max(Duration(0), f.replenished - now);
    return d;
  }
  return std::nullopt;
}

void RefusalCache::Add(uint64_t limiter, std::string_view key, const Refusal& fact, Timestamp now) {
  std::string map_key = MapKey(limiter, key);
  Shard& shard = ShardFor(map_key);
  std::lock_guard lock(shard.mu);
  auto it = shard.map.find(map_key);
  if (it == shard.map.end()) {
    const size_t need = EntryBytes(map_key);
    if (need > shard_max_bytes_) return;  // a key too long to remember: asked every time
    MakeRoom(shard, need, now);
    it = shard.map.emplace(std::move(map_key), Entry{}).first;
    shard.bytes += need;
  }
  Entry& e = it->second;
  e.used = ++shard.tick;
  // Drop the facts that no longer hold, then replace the same cost's, or add, or (full)
  // replace the one that ends first.
  size_t kept = 0;
  for (size_t i = 0; i < e.count; ++i) {
    if (e.facts[i].expires > now && e.facts[i].cost != fact.cost) e.facts[kept++] = e.facts[i];
  }
  if (kept == kFactsPerKey) {
    auto first =
        std::min_element(e.facts.begin(), e.facts.end(),
                         [](const Refusal& a, const Refusal& b) { return a.expires < b.expires; });
    *first = fact;
  } else {
    e.facts[kept++] = fact;
  }
  e.count = static_cast<uint8_t>(kept);
}

void RefusalCache::Drop(uint64_t limiter, std::string_view key) {
  const std::string map_key = MapKey(limiter, key);
  Shard& shard = ShardFor(map_key);
  std::lock_guard lock(shard.mu);
  auto it = shard.map.find(map_key);
  if (it == shard.map.end()) return;
  shard.bytes -= EntryBytes(it->first);
  shard.map.erase(it);
}

void RefusalCache::MakeRoom(Shard& shard, size_t need, Timestamp now) {
  while (!shard.map.empty() && shard.bytes + need > shard_max_bytes_) {
    // Sample a few entries from random buckets; drop the least recently used, and before any
    // of them one whose facts have all ended (it can answer nothing).
    auto victim = shard.map.end();
    uint64_t victim_used = UINT64_MAX;
    const size_t buckets = shard.map.bucket_count();
    for (size_t s = 0; s < kSampled; ++s) {
      shard.rng ^= shard.rng << 13;
      shard.rng ^= shard.rng >> 7;
      shard.rng ^= shard.rng << 17;
      size_t b = shard.rng % buckets;
      while (shard.map.bucket_size(b) == 0) b = (b + 1) % buckets;
      const auto& [k, e] = *shard.map.begin(b);
      const bool ended = std::none_of(e.facts.begin(), e.facts.begin() + e.count,
                                      [now](const Refusal& f) { return f.expires > now; });
      const uint64_t used = ended ? 0 : e.used;
      if (victim == shard.map.end() || used < victim_used) {
        victim_used = used;
        victim = shard.map.find(k);
      }
    }
    shard.bytes -= EntryBytes(victim->first);
    shard.map.erase(victim);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

size_t RefusalCache::bytes() const {
  size_t total = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    total += s.bytes;
  }
  return total;
}

size_t RefusalCache::entries() const {
  size_t total = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    total += s.map.size();
  }
  return total;
}

}  // namespace sluice::internal
