// Priority shedding's rule (docs/load-protection.md, "Priority shedding"): of a limit's capacity
// C, a request of a priority whose threshold is `above` = a is admitted only if the hits used
// after it are at most floor(a * C), so it must leave C - floor(a * C) hits free: its reserve
// (LimitCheck::reserve; PermitAcquire::reserve for a concurrency limit). Pure and exact: a
// threshold is a decimal fraction, never a float. Internal to sluice (config, service).
#ifndef SLUICE_CORE_SHED_H_
#define SLUICE_CORE_SHED_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"

namespace sluice {

// The priority that is never shed: its reserve is 0 whatever the rule. It must be sent: a
// request without a priority is the rule's lowest.
inline constexpr std::string_view kCriticalPriority = "critical";

// A threshold num / den, 0 < num <= den, den a power of ten up to 10^18: "0.6" is 6 / 10.
struct ShedFraction {
  int64_t num = 1;
  int64_t den = 1;
  friend bool operator==(const ShedFraction&, const ShedFraction&) = default;
};

// "1", "1.0", "0.6", "0.875", ".5" -> the exact fraction; an error for anything else, for 0 and
// for values above 1 (no exponent, sign, or more than 18 decimals).
Result<ShedFraction> ParseShedFraction(std::string_view text);

// The fraction as a decimal with den's digits: {6, 10} -> "0.6", {60, 100} -> "0.60", {1, 1} ->
// "1".
std::string ShedFractionText(const ShedFraction& f);

// a < b, exactly (128-bit cross products).
bool ShedFractionLess(const ShedFraction& a, const ShedFraction& b);

struct ShedLevel {
  std::string priority;
  ShedFraction above;  // 1/1 for a priority listed without a threshold: never shed
  friend bool operator==(const ShedLevel&, const ShedLevel&) = default;
};

// A limit's `shed`: its levels from the least important to the most (thresholds non-decreasing),
// at least one of them below 1. The config's loader checks that; ShedReserve relies on it.
struct ShedRule {
  std::vector<ShedLevel> levels;
  friend bool operator==(const ShedRule&, const ShedRule&) = default;
};

// The hits a request of `priority` must leave free in a limit of `capacity` (>= 0): capacity -
// floor(above * capacity) for a listed priority; 0 for kCriticalPriority; a priority absent
// (nullopt) or not listed counts as the first (least important) level, so that a caller cannot
// claim more by inventing a name.
int64_t ShedReserve(const ShedRule& rule, std::optional<std::string_view> priority,
                    int64_t capacity);

}  // namespace sluice

#endif  // SLUICE_CORE_SHED_H_
