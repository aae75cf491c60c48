// ASCII-only case folding. HTTP header names, the Bearer scheme, YAML number prefixes and config
// unit names are ASCII and case-insensitive by their specifications; std::tolower would depend on
// the process's locale and fold bytes of UTF-8 text too.
#ifndef SLUICE_UTIL_ASCII_H_
#define SLUICE_UTIL_ASCII_H_

#include <string_view>

namespace sluice::util {

// 'A'..'Z' to 'a'..'z'; every other byte as it is.
constexpr char ToLowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Whether `a` and `b` are equal but for the case of ASCII letters.
constexpr bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ToLowerAscii(a[i]) != ToLowerAscii(b[i])) return false;
  }
  return true;
}

}  // namespace sluice::util

#endif  // SLUICE_UTIL_ASCII_H_
