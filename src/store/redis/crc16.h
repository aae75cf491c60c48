// Redis Cluster key -> hash slot: CRC16 (XMODEM: polynomial 0x1021, initial 0) of the key, or
// of its hash tag (the bytes between the first '{' and the next '}', when that is not empty),
// modulo 16384. This is the rule in the Redis Cluster specification; a test checks it against
// CLUSTER KEYSLOT on a real server.
#ifndef SLUICE_STORE_REDIS_CRC16_H_
#define SLUICE_STORE_REDIS_CRC16_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace sluice::internal {

inline constexpr std::array<uint16_t, 256> kCrc16Table = [] {
  std::array<uint16_t, 256> table{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    auto crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[byte] = crc;
  }
  return table;
}();

constexpr uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ b) & 0xff]);
  }
  return crc;
}

constexpr int RedisHashSlot(std::string_view key) {
  if (const size_t open = key.find('{'); open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & 16383;
}

// The specification's own check value.
static_assert(Crc16("123456789") == 0x31C3);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_CRC16_H_
