// Hexadecimal digits, written and read. The case is the caller's: percent-escapes in limit ids,
// counter keys and Redis keys are upper case (the keys already stored must stay the same), JSON's
// \u00XX escapes, digests and hashes lower case.
#ifndef SLUICE_UTIL_HEX_H_
#define SLUICE_UTIL_HEX_H_

#include <string>

namespace sluice::util {

enum class HexCase { kLower, kUpper };

// The digit for `nibble` (0..15).
constexpr char HexDigit(unsigned nibble, HexCase hex_case = HexCase::kLower) {
  return (hex_case == HexCase::kLower ? "0123456789abcdef" : "0123456789ABCDEF")[nibble & 0xF];
}

// Two digits for `byte`, the high nibble first.
inline void AppendHexByte(std::string& out, unsigned char byte,
                          HexCase hex_case = HexCase::kLower) {
  out += HexDigit(byte >> 4, hex_case);
  out += HexDigit(byte & 0xF, hex_case);
}

// The value of the hex digit `c` (either case), or -1 if it is not one.
constexpr int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace sluice::util

#endif  // SLUICE_UTIL_HEX_H_
