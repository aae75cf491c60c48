#include "config/key_escape.h"

namespace sluice::server {
namespace {

bool NeedsEscape(unsigned char c) {
  return c <= 0x20 || c == 0x7f || c == '%' || c == '|' || c == '=' || c == '#' || c == '@' ||
         c == '*';
}

}  // namespace

void AppendEscaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out.reserve(out.size() + text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (NeedsEscape(c)) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
}

}  // namespace sluice::server
