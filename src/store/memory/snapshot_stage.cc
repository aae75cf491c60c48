#include "store/memory/snapshot_stage.h"

#include <utility>

#include "store/memory/permit_snapshot.h"

namespace sluice::internal {

SnapshotLoaded SnapshotStage::Load(std::string bytes, Timestamp now, int64_t to_wall_ns,
                                   OverrideTable* overrides) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_ = std::move(bytes);
  sections_.clear();
  permits_.clear();
  now_ = now;
  to_wall_ns_ = to_wall_ns;
  SnapshotLoaded loaded;
  SnapshotVisitor visit;
  visit.limit = [&](const LimitSection& s) {
    loaded.counters += s.count;
    sections_.emplace(std::string(s.id), s);
  };
  visit.overrides = [&](uint64_t count, std::string_view counters) {
    if (overrides == nullptr) return;
    SnapshotRestored counts;
    overrides->RestoreSection(count, counters, now, to_wall_ns, counts);
    loaded.counters += counts.restored;
    loaded.expired += counts.expired;
    counts_.restored += counts.restored;
    counts_.expired += counts.expired;
    counts_.rule_changed += counts.rule_changed;
  };
  visit.permits = [&](const PermitSection& s) { permits_.emplace(std::string(s.id), s); };
  loaded.error = ReadSnapshot(bytes_, visit);
  return loaded;
}

void SnapshotStage::Restore(SnapshotLimiter& limiter) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [first, last] = sections_.equal_range(limiter.id());
  for (auto it = first; it != last; ++it) {
    if (SpecKeepsCounters(it->second.spec, limiter.spec())) {
      limiter.RestoreSection(it->second, now_, to_wall_ns_, counts_);
    } else {
      counts_.rule_changed += it->second.count;
    }
  }
  sections_.erase(first, last);
}

void SnapshotStage::RestorePermits(std::string_view id, PermitTable& table) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [first, last] = permits_.equal_range(id);
  for (auto it = first; it != last; ++it) {
    RestorePermitSection(it->second, table, now_, to_wall_ns_, counts_);
  }
  permits_.erase(first, last);
}

SnapshotRestored SnapshotStage::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, section] : sections_) counts_.unmatched += section.count;
  for (const auto& [id, section] : permits_) counts_.permits_dropped += section.count;
  sections_.clear();
  permits_.clear();
  bytes_.clear();
  bytes_.shrink_to_fit();
  return std::exchange(counts_, SnapshotRestored{});
}

}  // namespace sluice::internal
