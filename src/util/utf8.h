// UTF-8 as the Unicode standard defines it (Table 3-7, "Well-Formed UTF-8 Byte Sequences";
// RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
// Prometheus (Go's utf8.ValidString), JSON parsers (nlohmann::json) and sluice's own readers all
// draw the line there, so one definition serves the metrics, the HTTP API and the CLI.
#ifndef SLUICE_UTIL_UTF8_H_
#define SLUICE_UTIL_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::util {

// U+FFFD REPLACEMENT CHARACTER, what writers put in place of a byte that is not UTF-8.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at s[i], 1 for ASCII, or 0
// when the bytes there are not one (a stray continuation byte, C0, C1, F5..FF, an overlong, a
// surrogate, above U+10FFFF, or cut short by the end of `s`). Requires i < s.size(); reads
// nothing past the end of `s`. Inline: the HTTP request parser calls it per non-ASCII byte.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  // Only the second byte's range depends on the first (Table 3-7); the others are 80..BF.
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 < 0xC2) {
    return 0;  // a continuation byte, or C0/C1 (always overlong)
  } else if (b0 <= 0xDF) {
    n = 2;
  } else if (b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong below
    if (b0 == 0xED) hi = 0x9F;  // surrogates above
  } else if (b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong below
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < 0x80 || b > 0xBF) return 0;
  }
  return n;
}

// Whether all of `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// Appends the UTF-8 encoding of `cp`, which must be a Unicode scalar value (at most U+10FFFF,
// not a surrogate): nothing is checked.
inline void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace sluice::util

#endif  // SLUICE_UTIL_UTF8_H_
