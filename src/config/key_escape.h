// Escaping for limit ids and counter keys. Both are built from text a client or an operator
// chose (descriptor keys and values), so every separator they use is escaped in that text:
// two different descriptors can never produce the same counter key.
//
// Percent-encoding (uppercase hex) of '%', the separators '|', '=', '#', '@', the wildcard
// '*', and every byte from 0x00 to 0x20 and 0x7F. Other bytes, UTF-8 included, pass through.
#ifndef SLUICE_CONFIG_KEY_ESCAPE_H_
#define SLUICE_CONFIG_KEY_ESCAPE_H_

#include <string>
#include <string_view>

namespace sluice::server {

void AppendEscaped(std::string& out, std::string_view text);

// A value pattern: escaped as above except its '*' wildcards, which stay raw, so that a value
// that is literally "a*" and the pattern "a*" never produce the same id or key.
void AppendEscapedPattern(std::string& out, std::string_view pattern);

inline std::string Escaped(std::string_view text) {
  std::string out;
  AppendEscaped(out, text);
  return out;
}

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_KEY_ESCAPE_H_
