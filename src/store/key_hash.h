// A fast seeded 64-bit hash for short keys (8 bytes per multiply). Not cryptographic: the seed
// only has to stop an attacker from precomputing colliding keys offline.
#ifndef SLUICE_STORE_KEY_HASH_H_
#define SLUICE_STORE_KEY_HASH_H_

#include <cstdint>
#include <cstring>
#include <string_view>

namespace sluice::internal {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline uint64_t HashKey(std::string_view key, uint64_t seed) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  uint64_t h = seed ^ (key.size() * kMul);
  const char* p = key.data();
  size_t n = key.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ Mix64(w + kMul)) * kMul;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ Mix64(w + n)) * kMul;
  }
  return Mix64(h);
}

}  // namespace sluice::internal

#endif  // SLUICE_STORE_KEY_HASH_H_
