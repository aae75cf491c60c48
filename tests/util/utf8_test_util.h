// Test helpers for text in UTF-8, written independently of src/util (an oracle must not share
// the code it checks).
#ifndef SLUICE_TESTS_UTIL_UTF8_TEST_UTIL_H_
#define SLUICE_TESTS_UTIL_UTF8_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::util::test_support {

// UTF-8 encoding of one code point (no validation; callers pass scalar values).
inline std::string Encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

// The bytes of `s` in hex, for failure messages.
inline std::string Hex(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out += ' ';
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

// Table 3-7 of the Unicode standard, "Well-Formed UTF-8 Byte Sequences": a row per kind of
// sequence, the range each of its bytes may take.
struct ByteRange {
  unsigned char lo;
  unsigned char hi;
};
inline const std::vector<std::vector<ByteRange>>& Table37() {
  static const std::vector<std::vector<ByteRange>> rows = {
      {{0x00, 0x7F}},
      {{0xC2, 0xDF}, {0x80, 0xBF}},
      {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
      {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
      {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
  };
  return rows;
}

// The length of the well-formed sequence at the start of `s` by Table 3-7, or 0.
inline size_t Table37Length(std::string_view s) {
  if (s.empty()) return 0;
  for (const auto& row : Table37()) {
    const auto b0 = static_cast<unsigned char>(s[0]);
    if (b0 < row[0].lo || b0 > row[0].hi) continue;
    if (s.size() < row.size()) return 0;
    for (size_t k = 1; k < row.size(); ++k) {
      const auto b = static_cast<unsigned char>(s[k]);
      if (b < row[k].lo || b > row[k].hi) return 0;
    }
    return row.size();
  }
  return 0;
}

// `s` with every byte that does not start a well-formed sequence replaced by U+FFFD.
inline std::string ReplaceEachInvalidByte(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    const size_t n = Table37Length(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    }
  }
  return out;
}

}  // namespace sluice::util::test_support

#endif  // SLUICE_TESTS_UTIL_UTF8_TEST_UTIL_H_
