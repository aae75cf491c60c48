#include "config/key_escape.h"

#include "util/hex.h"

namespace sluice::server {
namespace {

bool NeedsEscape(unsigned char c) {
  return c <= 0x20 || c == 0x7f || c == '%' || c == '|' || c == '=' || c == '#' || c == '@' ||
         c == '*';
}

}  // namespace

void AppendEscaped(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (NeedsEscape(c)) {
      out += '%';
      util::AppendHexByte(out, c, util::HexCase::kUpper);
    } else {
      out += ch;
    }
  }
}

void AppendEscapedPattern(std::string& out, std::string_view pattern) {
  size_t start = 0;
  for (;;) {
    const size_t star = pattern.find('*', start);
    AppendEscaped(out, pattern.substr(start, star - start));
    if (star == std::string_view::npos) return;
    out += '*';
    start = star + 1;
  }
}

}  // namespace sluice::server
