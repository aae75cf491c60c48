// JSON values written straight into a string, for output paths where nlohmann::json would build
// and allocate a tree first (an HTTP check response per request, a CLI replay line per trace
// line, a JSON log line).
//
// Two string writers, because their callers were written to different rules and each one's
// output must stay byte for byte what it was (clients and tests compare it):
//   - AppendJsonStringOfUtf8: the text is known to be valid UTF-8 (the CLI's trace reader checks
//     keys), and the output is exactly nlohmann::json's dump().
//   - AppendJsonStringOfBytes: the text may hold any bytes (counter keys and descriptor values
//     from clients, log messages quoting files), and the output must be valid JSON anyway.
// Both are one implementation (json_string.cc); they differ only where said below.
#ifndef SLUICE_UTIL_JSON_STRING_H_
#define SLUICE_UTIL_JSON_STRING_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::util {

// Appends `s` as a JSON string literal, quotes included (RFC 8259): '"' and '\' escaped, control
// characters as \b \f \n \r \t or \u00xx (lower-case hex), everything else, 0x7F and bytes from
// 0x80 up included, copied as it is. `s` must be valid UTF-8, or the output is not JSON.
void AppendJsonStringOfUtf8(std::string& out, std::string_view s);

// Appends `s` as a JSON string literal, quotes included (RFC 8259), whatever bytes `s` holds:
// each byte that does not start a well-formed UTF-8 sequence (util/utf8.h) becomes U+FFFD, one
// U+FFFD per byte. Escapes as above except that backspace and form feed are written \u0008 and
// \u000c (this writer has always spelled them so).
void AppendJsonStringOfBytes(std::string& out, std::string_view s);

// Appends `"name":"value"`, both written by AppendJsonStringOfBytes: one member of an object.
inline void AppendJsonStringMember(std::string& out, std::string_view name,
                                   std::string_view value) {
  AppendJsonStringOfBytes(out, name);
  out += ':';
  AppendJsonStringOfBytes(out, value);
}

// Appends `v` as a JSON number (decimal, '-' when negative).
inline void AppendJsonInt(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Appends a non-negative count of microseconds as seconds, exactly: 300000000 -> 300,
// 1500000 -> 1.5 (a `period` is whole microseconds).
inline void AppendJsonSecondsOfMicros(std::string& out, int64_t micros) {
  AppendJsonInt(out, micros / 1'000'000);
  int64_t fraction = micros % 1'000'000;
  if (fraction == 0) return;
  int digits = 6;
  while (fraction % 10 == 0) {
    fraction /= 10;
    --digits;
  }
  char buf[8];
  const auto r = std::to_chars(buf, buf + sizeof(buf), fraction);
  out += '.';
  out.append(static_cast<size_t>(digits - (r.ptr - buf)), '0');
  out.append(buf, r.ptr);
}

}  // namespace sluice::util

#endif  // SLUICE_UTIL_JSON_STRING_H_
