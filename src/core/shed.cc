#include "core/shed.h"

namespace sluice {

namespace {

constexpr int kMaxDecimals = 18;  // 10^18 < 2^63

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<ShedFraction> ParseShedFraction(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return MakeError("shed threshold '" + std::string(text) + "' " + std::string(why));
  };
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view decimals =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if ((whole.empty() && decimals.empty()) || (dot != std::string_view::npos && decimals.empty())) {
    return bad("is not a decimal number between 0 and 1 (e.g. 0.6)");
  }
  for (const std::string_view part : {whole, decimals}) {
    for (char c : part) {
      if (!IsDigit(c)) return bad("is not a decimal number between 0 and 1 (e.g. 0.6)");
    }
  }
  if (decimals.size() > kMaxDecimals) return bad("has more than 18 decimals");
  // Leading zeros of the whole part are harmless; anything but 0 or 1 there is above 1.
  size_t first = 0;
  while (first + 1 < whole.size() && whole[first] == '0') ++first;
  const std::string_view unit = whole.substr(first);
  if (unit.size() > 1 || (!unit.empty() && unit[0] > '1')) return bad("is above 1");
  ShedFraction f;
  f.den = 1;
  int64_t frac = 0;
  for (char c : decimals) {
    f.den *= 10;
    frac = frac * 10 + (c - '0');
  }
  f.num = (unit == "1" ? f.den : 0) + frac;
  if (f.num > f.den) return bad("is above 1");
  if (f.num == 0) return bad("must be above 0 (a priority shed at 0 could never pass)");
  return f;
}

std::string ShedFractionText(const ShedFraction& f) {
  if (f.den == 1) return std::to_string(f.num);
  std::string decimals = std::to_string(f.num % f.den);
  const size_t places = std::to_string(f.den).size() - 1;
  decimals.insert(0, places - decimals.size(), '0');
  return std::to_string(f.num / f.den) + "." + decimals;
}

bool ShedFractionLess(const ShedFraction& a, const ShedFraction& b) {
  return static_cast<__int128>(a.num) * b.den < static_cast<__int128>(b.num) * a.den;
}

int64_t ShedReserve(const ShedRule& rule, std::optional<std::string_view> priority,
                    int64_t capacity) {
  if (rule.levels.empty() || capacity <= 0) return 0;
  if (priority && *priority == kCriticalPriority) return 0;
  const ShedLevel* level = &rule.levels.front();  // absent or unknown: the least important
  if (priority) {
    for (const ShedLevel& l : rule.levels) {
      if (l.priority == *priority) {
        level = &l;
        break;
      }
    }
  }
  // floor(num * C / den) <= C: num <= den, and the product of two int64 fits 128 bits.
  const auto allowed = static_cast<int64_t>(static_cast<unsigned __int128>(level->above.num) *
                                            static_cast<uint64_t>(capacity) /
                                            static_cast<uint64_t>(level->above.den));
  return capacity - allowed;
}

}  // namespace sluice
