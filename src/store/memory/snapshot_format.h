// The memory store's snapshot file (docs/quotas.md, "Counters that survive a restart").
// Internal to the memory store.
//
//   header   "SLUICESN", format version (u32), CRC-32C of the header (u32), saved at (i64: the
//            wall-clock instant, ns since the epoch)
//   sections kind (u8), 3 zero bytes, CRC-32C of the section (u32: its first 16 bytes with this
//            field zero, then its body), body length (u64), body:
//     limit      id (varint length, bytes), spec (algorithm u8, limit i64, period ns i64, burst
//                i64, shaper u8, max_delay ns i64; from version 2, when the algorithm byte has
//                kCalendarFlag, then calendar unit u8, week starts Sunday u8, time zone
//                (varint length, bytes)), state tag (u8, state_codec.h), counters
//                (u64), then each: key (varint length, bytes), state (state_codec.h)
//     overrides  counters (u64), then each: the table's key (rate prefix and key), state tag,
//                state
//     permits    a concurrency limit's live permits: pool id (varint length, bytes), permits
//                (u64), then each: key (varint length, bytes), permit id (varint length,
//                bytes), expiry (i64: the wall-clock instant, ns since the epoch). No spec: a
//                permit is held until its expiry whatever the limit's numbers. Added after
//                version 2 without a new version: a reader skips a kind it does not know, so an
//                older sluiced reads such a file without its permits, and a file without them
//                is read as before.
//     end        the number of sections before it (u64); nothing may follow it
// Every section is checked on its own, so a damaged or truncated file still gives the sections
// before the damage. A reader refuses a version above its own (kFormatVersion).
#ifndef SLUICE_STORE_MEMORY_SNAPSHOT_FORMAT_H_
#define SLUICE_STORE_MEMORY_SNAPSHOT_FORMAT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "sluice/limit_spec.h"
#include "store/memory/snapshot_bytes.h"

namespace sluice::internal {

inline constexpr std::string_view kSnapshotMagic = "SLUICESN";
// Version 2 added calendar specs (kCalendarFlag), which version 1 files never have: both read.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint8_t kCalendarFlag = 0x80;

enum class SectionKind : uint8_t { kLimit = 1, kOverrides = 2, kPermits = 3, kEnd = 0xff };

// Writes a snapshot: the header at construction, then sections, then Finish.
class SnapshotWriter {
 public:
  SnapshotWriter(std::string& out, int64_t saved_wall_ns);
  // The body is written with writer() between Begin and End.
  void BeginSection(SectionKind kind);
  void EndSection();
  void Finish();
  ByteWriter& writer() { return w_; }

 private:
  std::string& out_;
  ByteWriter w_;
  size_t section_start_ = 0;
  uint64_t sections_ = 0;
};

void PutSpec(ByteWriter& w, const LimitSpec& spec);
bool GetSpec(ByteReader& r, LimitSpec& spec);

// A limit section, as read: its counters still encoded (`counters` holds `count` of them).
struct LimitSection {
  std::string_view id;
  LimitSpec spec;
  uint8_t tag = 0;
  uint64_t count = 0;
  std::string_view counters;
};

// A permits section, as read: `permits` holds `count` of them, still encoded.
struct PermitSection {
  std::string_view id;
  uint64_t count = 0;
  std::string_view permits;
};

struct SnapshotVisitor {
  std::function<void(const LimitSection&)> limit;
  std::function<void(uint64_t count, std::string_view counters)> overrides;
  std::function<void(const PermitSection&)> permits;
};

// Reads `bytes`, handing each sound section to `visit` in order. Returns an empty string when
// the file was read whole, else what was wrong (the sections before it were handed over).
// `saved_wall_ns` is set from the header when it is sound.
std::string ReadSnapshot(std::string_view bytes, const SnapshotVisitor& visit,
                         int64_t* saved_wall_ns = nullptr);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_SNAPSHOT_FORMAT_H_
