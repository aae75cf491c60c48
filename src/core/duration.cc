#include "sluice/duration.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

namespace sluice {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t ns;
};

// Longest suffixes first so "ms" is not read as "m" + garbage.
constexpr std::array<Unit, 8> kUnits = {{
    {"ns", 1},
    {"us", 1'000},
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
    {"h", 3'600'000'000'000},
    {"d", 86'400'000'000'000},
    {"w", 604'800'000'000'000},
}};

}  // namespace

Result<Duration> ParseDuration(std::string_view text) {
  const std::string shown(text);
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) {
    return MakeError("invalid duration '" + shown +
                     "': expected a number and a unit, e.g. 250ms, 1s, 1m, 1h, 1d");
  }
  const std::string_view suffix = text.substr(digits);
  if (suffix.empty()) {
    return MakeError("invalid duration '" + shown + "': missing unit (ns, us, ms, s, m, h, d, w)");
  }
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc() || ptr != text.data() + digits) {
    return MakeError("invalid duration '" + shown + "': number out of range");
  }
  for (const Unit& u : kUnits) {
    if (u.suffix != suffix) continue;
    if (value > std::numeric_limits<int64_t>::max() / u.ns) {
      return MakeError("invalid duration '" + shown + "': too long");
    }
    return Duration(value * u.ns);
  }
  return MakeError("invalid duration '" + shown + "': unknown unit '" + std::string(suffix) +
                   "' (use ns, us, ms, s, m, h, d, w)");
}

std::string FormatDuration(Duration d) {
  const int64_t ns = d.count();
  if (ns == 0) return "0s";
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (ns % it->ns == 0) return std::to_string(ns / it->ns) + std::string(it->suffix);
  }
  return std::to_string(ns) + "ns";
}

}  // namespace sluice
