// The byte level of the memory store's snapshot file (docs/quotas.md, "Counters that survive a
// restart"): a little-endian writer and a bounds-checked reader, and the CRC-32C every part of
// the file is checked with. Internal to the memory store.
#ifndef SLUICE_STORE_MEMORY_SNAPSHOT_BYTES_H_
#define SLUICE_STORE_MEMORY_SNAPSHOT_BYTES_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace sluice::internal {

// The file is written in the machine's byte order and read only where it is the same: the
// integers are copied as they lie in memory, 128-bit ones included.
static_assert(std::endian::native == std::endian::little, "snapshots assume little endian");

// CRC-32C (Castagnoli), as iSCSI and ext4 use: `crc` is the value so far (0 to start).
uint32_t Crc32c(std::string_view bytes, uint32_t crc = 0);

class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void Put(const T& v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  void PutBytes(std::string_view s) {
    PutVarint(s.size());
    out_.append(s);
  }
  void PutRaw(std::string_view s) { out_.append(s); }
  // Overwrites a value Put earlier at `offset` (a count known only at the end).
  template <typename T>
  void PatchAt(size_t offset, const T& v) {
    std::memcpy(out_.data() + offset, &v, sizeof(T));
  }
  size_t size() const { return out_.size(); }

 private:
  std::string& out_;
};

// Every Get fails (false, and every later one too) past the end: a truncated or corrupt part
// is refused, never read beyond.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  bool Get(T& v) {
    if (!ok_ || in_.size() - pos_ < sizeof(T)) return ok_ = false;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetVarint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = 0;
      if (!Get(b)) return false;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return ok_ = false;
  }
  bool GetBytes(std::string_view& s) {
    uint64_t n = 0;
    if (!GetVarint(n)) return false;
    return Take(n, s);
  }
  bool Take(uint64_t n, std::string_view& s) {
    if (!ok_ || in_.size() - pos_ < n) return ok_ = false;
    s = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }
  size_t pos() const { return pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_SNAPSHOT_BYTES_H_
