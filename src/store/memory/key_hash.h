// A fast seeded 64-bit hash for keys, built the way wyhash is: short keys are read with a few
// overlapping loads (no byte loop), and mixing is a 64x64->128-bit multiply folded to 64 bits.
// Not cryptographic: the per-store seed only stops an attacker precomputing colliding keys.
#ifndef SLUICE_STORE_MEMORY_KEY_HASH_H_
#define SLUICE_STORE_MEMORY_KEY_HASH_H_

#include <cstdint>
#include <cstring>
#include <string_view>

namespace sluice::internal {

inline uint64_t Fold(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint64_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t HashKey(std::string_view key, uint64_t seed) {
  constexpr uint64_t kP0 = 0xa0761d6478bd642fULL;
  constexpr uint64_t kP1 = 0xe7037ed1a0b428dbULL;
  constexpr uint64_t kP2 = 0x8ebc6af09c88c6e3ULL;
  const char* p = key.data();
  const size_t n = key.size();
  seed ^= kP0;
  uint64_t a = 0;
  uint64_t b = 0;
  if (n <= 16) {
    if (n >= 4) {
      // Two pairs of 4-byte loads cover every byte of a 4..16 byte key (they may overlap).
      const size_t step = (n >> 3) << 2;
      a = (Load32(p) << 32) | Load32(p + step);
      b = (Load32(p + n - 4) << 32) | Load32(p + n - 4 - step);
    } else if (n > 0) {
      const auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(p[i])); };
      a = (byte(0) << 16) | (byte(n >> 1) << 8) | byte(n - 1);
    }
  } else {
    size_t i = n;
    while (i > 16) {
      seed = Fold(Load64(p) ^ kP1, Load64(p + 8) ^ seed);
      p += 16;
      i -= 16;
    }
    // The last 16 bytes of the key (overlapping the loop's last block when n % 16 != 0).
    a = Load64(p + i - 16);
    b = Load64(p + i - 8);
  }
  return Fold(kP1 ^ n, Fold(a ^ kP1, b ^ seed) ^ kP2);
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_KEY_HASH_H_
