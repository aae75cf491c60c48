// HexDigit, AppendHexByte and HexValue over every input, against the C library's printf and
// strtol as the oracle.
#include "util/hex.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sluice::util {
namespace {

std::string Printf(const char* format, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

TEST(Hex, DigitsInEitherCase) {
  for (unsigned n = 0; n < 16; ++n) {
    EXPECT_EQ(std::string(1, HexDigit(n)), Printf("%x", n));
    EXPECT_EQ(std::string(1, HexDigit(n, HexCase::kLower)), Printf("%x", n));
    EXPECT_EQ(std::string(1, HexDigit(n, HexCase::kUpper)), Printf("%X", n));
  }
}

TEST(Hex, EveryByteAsTwoDigitsHighNibbleFirst) {
  for (unsigned b = 0; b < 256; ++b) {
    std::string lower = "%";
    AppendHexByte(lower, static_cast<unsigned char>(b));
    EXPECT_EQ(lower, "%" + Printf("%02x", b));
    std::string upper;
    AppendHexByte(upper, static_cast<unsigned char>(b), HexCase::kUpper);
    EXPECT_EQ(upper, Printf("%02X", b));
  }
}

TEST(Hex, ValueOfEveryByte) {
  for (int c = 0; c < 256; ++c) {
    const char s[2] = {static_cast<char>(c), '\0'};
    char* end = nullptr;
    const long v = std::strtol(s, &end, 16);
    const bool digit = end == s + 1;  // strtol read the byte as a number in base 16
    EXPECT_EQ(HexValue(static_cast<char>(c)), digit ? v : -1) << c;
  }
}

}  // namespace
}  // namespace sluice::util
