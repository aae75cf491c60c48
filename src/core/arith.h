// Integer helpers shared by the algorithms. Internal to libsluice.
#ifndef SLUICE_CORE_ARITH_H_
#define SLUICE_CORE_ARITH_H_

#include <cstdint>
#include <limits>
#include <type_traits>

#include "sluice/decision.h"

namespace sluice::internal {

// Scaled quantities (hits * period) stay below this, so a sum of two never overflows.
inline constexpr int64_t kMaxScaled = int64_t{1} << 61;

// By value: std::min/std::max bind references, and a wide state's 128-bit fields are 8-byte
// aligned (WideInt, limit_spec.h), where a `const __int128&` must not point (UBSan: misaligned).
template <typename T>
constexpr T MinOf(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
constexpr T MaxOf(T a, T b) {
  return a < b ? b : a;
}

// a >= 0, b > 0. Either may be 128 bits (a wide spec's scaled quantities): the result is.
template <typename A, typename B>
constexpr std::common_type_t<A, B> CeilDiv(A a, B b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// Rounds towards minus infinity, b > 0.
template <typename A, typename B>
constexpr std::common_type_t<A, B> FloorDiv(A a, B b) {
  const std::common_type_t<A, B> q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Largest fill (or drain) time of a bucket past 64-bit arithmetic: 100 years of 365 days. With
// one capacity of debt a state reaches twice that ahead of its time, which int64 nanoseconds hold
// for times until 2062 (and for any time below 2^63 ns minus twice the spec's fill time).
inline constexpr int64_t kMaxFillNs = int64_t{100} * 365 * 86400 * 1'000'000'000;

constexpr int64_t Gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// rate = limit / period_ns, reduced to lowest terms n/d.
struct ReducedRate {
  int64_t n;
  int64_t d;
};
constexpr ReducedRate Reduce(int64_t limit, int64_t period_ns) {
  const int64_t g = Gcd(limit, period_ns);
  return ReducedRate{limit / g, period_ns / g};
}

inline Decision Rejected(DecisionReason reason, int64_t limit) {
  Decision d;
  d.allowed = false;
  d.reason = reason;
  d.limit = limit;
  d.retry_after = reason == DecisionReason::kOverLimit ? Duration(0) : kNever;
  return d;
}

inline constexpr Timestamp kLongAgo = Timestamp::min();

// Priority shedding (LimitCheck::reserve): a decision admits `cost` only when cost + reserve
// hits are free, and takes only `cost`. Both helpers expect 0 <= cost <= capacity; a negative
// reserve counts as none.
//
// The hits that must be free to admit `cost`, or -1 when that can never be (reserve beyond
// capacity - cost): then the decision is kOverLimit with retry_after kNever, and takes nothing.
constexpr int64_t FreeNeeded(int64_t cost, int64_t reserve, int64_t capacity) {
  if (reserve <= 0) return cost;
  return reserve > capacity - cost ? -1 : cost + reserve;
}

// The refusal of a cost that fits the capacity only without its reserve: never admitted.
inline Decision ShedForever(int64_t limit) {
  Decision d;
  d.limit = limit;
  d.reason = DecisionReason::kOverLimit;
  d.retry_after = kNever;
  return d;
}

}  // namespace sluice::internal

#endif  // SLUICE_CORE_ARITH_H_
