#include "store/memory/snapshot_format.h"

#include <string>

namespace sluice::internal {
namespace {

constexpr size_t kHeaderBytes = 24;
constexpr size_t kSectionHeaderBytes = 16;
constexpr size_t kCrcOffset = 4;  // of the CRC, in the section header
constexpr size_t kHeaderCrcOffset = 12;

// The CRC of a header or section: its bytes with the CRC field taken as zero.
uint32_t CrcWithHole(std::string_view bytes, size_t hole) {
  constexpr char kZero[4] = {};
  uint32_t crc = Crc32c(bytes.substr(0, hole));
  crc = Crc32c(std::string_view(kZero, 4), crc);
  return Crc32c(bytes.substr(hole + 4), crc);
}

}  // namespace

SnapshotWriter::SnapshotWriter(std::string& out, int64_t saved_wall_ns) : out_(out), w_(out) {
  const size_t start = out_.size();
  out_.append(kSnapshotMagic);
  w_.Put<uint32_t>(kFormatVersion);
  w_.Put<uint32_t>(0);
  w_.Put<int64_t>(saved_wall_ns);
  w_.PatchAt<uint32_t>(start + kHeaderCrcOffset,
                       CrcWithHole(std::string_view(out_).substr(start), kHeaderCrcOffset));
}

void SnapshotWriter::BeginSection(SectionKind kind) {
  section_start_ = out_.size();
  w_.Put<uint8_t>(static_cast<uint8_t>(kind));
  out_.append(3, '\0');
  w_.Put<uint32_t>(0);  // CRC
  w_.Put<uint64_t>(0);  // body length
}

void SnapshotWriter::EndSection() {
  const uint64_t body = out_.size() - section_start_ - kSectionHeaderBytes;
  w_.PatchAt<uint64_t>(section_start_ + 8, body);
  const uint32_t crc = CrcWithHole(std::string_view(out_).substr(section_start_), kCrcOffset);
  w_.PatchAt<uint32_t>(section_start_ + kCrcOffset, crc);
  ++sections_;
}

void SnapshotWriter::Finish() {
  const uint64_t sections = sections_;
  BeginSection(SectionKind::kEnd);
  w_.Put<uint64_t>(sections);
  EndSection();
}

void PutSpec(ByteWriter& w, const LimitSpec& spec) {
  w.Put<uint8_t>(static_cast<uint8_t>(spec.algorithm) | (spec.IsCalendar() ? kCalendarFlag : 0));
  w.Put<int64_t>(spec.limit);
  w.Put<int64_t>(spec.period.count());
  w.Put<int64_t>(spec.burst);
  w.Put<uint8_t>(spec.shaper ? 1 : 0);
  w.Put<int64_t>(spec.max_delay.count());
  if (spec.IsCalendar()) {
    w.Put<uint8_t>(static_cast<uint8_t>(spec.calendar.unit));
    w.Put<uint8_t>(spec.calendar.week_starts_sunday ? 1 : 0);
    w.PutBytes(spec.calendar.timezone);
  }
}

bool GetSpec(ByteReader& r, LimitSpec& spec) {
  uint8_t algorithm = 0, shaper = 0;
  int64_t limit = 0, period = 0, burst = 0, max_delay = 0;
  if (!r.Get(algorithm) || !r.Get(limit) || !r.Get(period) || !r.Get(burst) || !r.Get(shaper) ||
      !r.Get(max_delay)) {
    return false;
  }
  if ((algorithm & kCalendarFlag) != 0) {
    uint8_t unit = 0, sunday = 0;
    std::string_view zone;
    if (!r.Get(unit) || !r.Get(sunday) || !r.GetBytes(zone)) return false;
    if (unit == 0 || unit > static_cast<uint8_t>(CalendarUnit::kYear)) return false;
    spec.calendar = {static_cast<CalendarUnit>(unit), std::string(zone), sunday != 0};
    algorithm &= static_cast<uint8_t>(~kCalendarFlag);
  }
  spec.algorithm = static_cast<Algorithm>(algorithm);
  spec.limit = limit;
  spec.period = Duration(period);
  spec.burst = burst;
  spec.shaper = shaper != 0;
  spec.max_delay = Duration(max_delay);
  return ValidateLimitSpec(spec).has_value();  // also refuses an unknown algorithm
}

namespace {

std::string ReadHeader(ByteReader& r, std::string_view bytes, int64_t* saved_wall_ns) {
  std::string_view magic;
  uint32_t version = 0, crc = 0;
  int64_t wall = 0;
  if (!r.Take(kSnapshotMagic.size(), magic) || magic != kSnapshotMagic) {
    return "not a sluice snapshot (no SLUICESN header)";
  }
  if (!r.Get(version) || !r.Get(crc) || !r.Get(wall)) return "truncated in its header";
  if (CrcWithHole(bytes.substr(0, kHeaderBytes), kHeaderCrcOffset) != crc) {
    return "its header's checksum does not match";
  }
  if (version > kFormatVersion || version == 0) {
    return "format version " + std::to_string(version) + ", this sluiced reads version " +
           std::to_string(kFormatVersion) + " (written by a newer sluice?)";
  }
  if (saved_wall_ns != nullptr) *saved_wall_ns = wall;
  return "";
}

bool ReadLimitSection(std::string_view body, const SnapshotVisitor& visit) {
  ByteReader r(body);
  LimitSection s;
  if (!r.GetBytes(s.id) || !GetSpec(r, s.spec) || !r.Get(s.tag) || !r.Get(s.count)) return false;
  s.counters = body.substr(r.pos());
  if (visit.limit) visit.limit(s);
  return true;
}

bool ReadOverrideSection(std::string_view body, const SnapshotVisitor& visit) {
  ByteReader r(body);
  uint64_t count = 0;
  if (!r.Get(count)) return false;
  if (visit.overrides) visit.overrides(count, body.substr(r.pos()));
  return true;
}

bool ReadPermitSection(std::string_view body, const SnapshotVisitor& visit) {
  ByteReader r(body);
  PermitSection s;
  if (!r.GetBytes(s.id) || !r.Get(s.count)) return false;
  s.permits = body.substr(r.pos());
  if (visit.permits) visit.permits(s);
  return true;
}

}  // namespace

std::string ReadSnapshot(std::string_view bytes, const SnapshotVisitor& visit,
                         int64_t* saved_wall_ns) {
  ByteReader r(bytes);
  if (std::string error = ReadHeader(r, bytes, saved_wall_ns); !error.empty()) return error;
  for (uint64_t sections = 0;; ++sections) {
    const size_t start = r.pos();
    uint8_t kind = 0;
    std::string_view pad, body;
    uint32_t crc = 0;
    uint64_t length = 0;
    if (!r.Get(kind) || !r.Take(3, pad) || !r.Get(crc) || !r.Get(length) || !r.Take(length, body)) {
      return "truncated after " + std::to_string(sections) + " sections";
    }
    const std::string_view whole = bytes.substr(start, kSectionHeaderBytes + length);
    if (CrcWithHole(whole, kCrcOffset) != crc) {
      return "section " + std::to_string(sections + 1) + "'s checksum does not match";
    }
    bool sound = true;
    switch (static_cast<SectionKind>(kind)) {
      case SectionKind::kLimit:
        sound = ReadLimitSection(body, visit);
        break;
      case SectionKind::kOverrides:
        sound = ReadOverrideSection(body, visit);
        break;
      case SectionKind::kPermits:
        sound = ReadPermitSection(body, visit);
        break;
      case SectionKind::kEnd: {
        ByteReader end(body);
        uint64_t count = 0;
        if (!end.Get(count) || count != sections || !r.done()) {
          return "its end does not match its sections";
        }
        return "";
      }
      default:
        break;  // a kind this version does not know: skipped (the version says it may be)
    }
    if (!sound) return "section " + std::to_string(sections + 1) + " is malformed";
  }
}

}  // namespace sluice::internal
