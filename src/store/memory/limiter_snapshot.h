// A memory limiter's part of a snapshot: its section written from its shards, and a saved
// section's counters put back into them. Internal to the memory store.
#ifndef SLUICE_STORE_MEMORY_LIMITER_SNAPSHOT_H_
#define SLUICE_STORE_MEMORY_LIMITER_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sluice/memory_store.h"
#include "store/memory/reserving_limiter.h"
#include "store/memory/snapshot_format.h"
#include "store/memory/state_codec.h"

namespace sluice::internal {

// A limiter of a memory store, as its snapshots see it.
class SnapshotLimiter : public ReservingLimiter {
 public:
  virtual const std::string& id() const = 0;
  // Writes this limiter's section: its id, its spec and every counter live at `now`. Returns
  // how many counters it wrote.
  virtual uint64_t SaveSection(Timestamp now, int64_t to_wall_ns, SnapshotWriter& out) const = 0;
  // Puts the counters of a section saved under a spec that keeps its meaning here
  // (SpecKeepsCounters) back into this limiter's shards.
  virtual void RestoreSection(const LimitSection& section, Timestamp now, int64_t to_wall_ns,
                              SnapshotRestored& counts) = 0;

 protected:
  using ReservingLimiter::ReservingLimiter;
};

// Whether counters kept under `saved` mean the same under `now` (docs/quotas.md): the same spec;
// or, for the window algorithms, the same algorithm and window with another limit -- a window's
// counter is the use so far, which a new limit is then applied to. A bucket's state is scaled by
// its rate, so any change to a bucket (and a change of algorithm or window) drops its counters.
inline bool SpecKeepsCounters(const LimitSpec& saved, const LimitSpec& now) {
  if (saved == now) return true;
  const bool window = now.algorithm == Algorithm::kFixedWindow ||
                      now.algorithm == Algorithm::kSlidingWindowCounter ||
                      now.algorithm == Algorithm::kSlidingWindowLog;
  // A calendar window keeps its counters only in the same calendar and zone.
  return window && saved.algorithm == now.algorithm && saved.period == now.period &&
         saved.calendar == now.calendar;
}

// Writes a section for a limiter of `Alg` whose shards are shard(0) .. shard(shards - 1).
template <typename Alg, typename ShardAt>
uint64_t SaveLimitSection(const std::string& id, const LimitSpec& spec, const Alg& alg,
                          size_t shards, ShardAt&& shard, Timestamp now, int64_t to_wall_ns,
                          SnapshotWriter& out) {
  const TimeFrame frame{spec.period.count(), to_wall_ns};
  ByteWriter& w = out.writer();
  out.BeginSection(SectionKind::kLimit);
  w.PutBytes(id);
  PutSpec(w, spec);
  w.Put<uint8_t>(StateCodec<Alg>::kTag);
  const size_t count_at = w.size();
  w.Put<uint64_t>(0);
  uint64_t count = 0;
  // Each shard's counters are copied into `chunk` under its lock, which is kept only that
  // long; the section takes them after.
  std::string chunk;
  for (size_t i = 0; i < shards; ++i) {
    chunk.clear();
    ByteWriter cw(chunk);
    count += shard(i).ForEachLive(alg, now, [&](std::string_view key, const auto& state) {
      cw.PutBytes(key);
      EncodeState<Alg>(state, frame, cw);
    });
    w.PutRaw(chunk);
  }
  w.PatchAt<uint64_t>(count_at, count);
  out.EndSection();
  return count;
}

// Decodes a section's counters (saved for `Alg`) and hands each live one to put(key, state).
template <typename Alg, typename Put>
void RestoreLimitSection(const LimitSection& section, const Alg& alg, Timestamp now,
                         int64_t to_wall_ns, SnapshotRestored& counts, Put&& put) {
  bool before_zones = false;
  if constexpr (std::is_same_v<Alg, CalendarWindow>) {
    before_zones = section.tag == StateCodec<CalendarWindowBeforeZones>::kTag;
  }
  if (section.tag != StateCodec<Alg>::kTag && !before_zones) {
    counts.rule_changed += section.count;
    return;
  }
  const TimeFrame frame{section.spec.period.count(), to_wall_ns};
  ByteReader r(section.counters);
  const auto decode = [&](typename Alg::State& state) {
    if constexpr (std::is_same_v<Alg, CalendarWindow>) {
      if (before_zones) {
        return DecodeFields(r, StateCodec<CalendarWindowBeforeZones>::Layout{}, frame, state);
      }
    }
    return DecodeState<Alg>(r, frame, section.spec, state);
  };
  for (uint64_t i = 0; i < section.count; ++i) {
    std::string_view key;
    typename Alg::State state{};
    if (!r.GetBytes(key) || !decode(state)) return;
    if (alg.ReplenishedAt(state) <= now) {
      ++counts.expired;
      continue;
    }
    put(key, std::move(state));
    ++counts.restored;
  }
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_LIMITER_SNAPSHOT_H_
