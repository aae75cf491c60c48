#include "util/byte_size.h"

#include <array>
#include <limits>
#include <utility>

namespace sluice::util {

std::expected<uint64_t, std::string> ParseByteSize(std::string_view text) {
  const auto refuse = [text] {
    return std::unexpected("'" + std::string(text.substr(0, 64)) +
                           "' is not a byte count: write digits, optionally followed by Ki, "
                           "Mi, Gi or Ti (e.g. 67108864, 64Mi, 1Gi)");
  };
  size_t digits = 0;
  uint64_t value = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    const uint64_t d = static_cast<uint64_t>(text[digits] - '0');
    if (value > (kMax - d) / 10)
      return std::unexpected("'" + std::string(text.substr(0, 64)) + "' is too large a byte count");
    value = value * 10 + d;
  }
  if (digits == 0) return refuse();
  const std::string_view suffix = text.substr(digits);
  if (suffix.empty()) return value;
  constexpr std::array<std::pair<std::string_view, int>, 4> kSuffixes{
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}}};
  for (const auto& [name, shift] : kSuffixes) {
    if (suffix != name) continue;
    if (value > (kMax >> shift)) {
      return std::unexpected("'" + std::string(text.substr(0, 64)) + "' is too large a byte count");
    }
    return value << shift;
  }
  return refuse();
}

}  // namespace sluice::util
