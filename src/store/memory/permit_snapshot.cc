#include "store/memory/permit_snapshot.h"

namespace sluice::internal {

uint64_t SavePermitSection(const std::string& id, const PermitTable& table, Timestamp now,
                           int64_t to_wall_ns, SnapshotWriter& out) {
  // Encoded apart first: a table with no live permit (one a newer table took them from) writes
  // no section.
  std::string permits;
  ByteWriter pw(permits);
  const uint64_t count = table.ForEachLivePermit(
      now, [&](std::string_view key, std::string_view permit, Timestamp expiry) {
        pw.PutBytes(key);
        pw.PutBytes(permit);
        pw.Put<int64_t>(ToNanos(expiry) + to_wall_ns);
      });
  if (count == 0) return 0;
  out.BeginSection(SectionKind::kPermits);
  ByteWriter& w = out.writer();
  w.PutBytes(id);
  w.Put<uint64_t>(count);
  w.PutRaw(permits);
  out.EndSection();
  return count;
}

void RestorePermitSection(const PermitSection& section, PermitTable& table, Timestamp now,
                          int64_t to_wall_ns, SnapshotRestored& counts) {
  ByteReader r(section.permits);
  for (uint64_t i = 0; i < section.count; ++i) {
    std::string_view key, permit;
    int64_t wall_ns = 0;
    if (!r.GetBytes(key) || !r.GetBytes(permit) || !r.Get(wall_ns)) {
      counts.permits_dropped += section.count - i;
      return;
    }
    if (table.RestorePermit(key, permit, FromNanos(wall_ns - to_wall_ns), now)) {
      ++counts.permits;
    } else {
      ++counts.permits_dropped;
    }
  }
}

}  // namespace sluice::internal
