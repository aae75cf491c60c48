#include "metrics/hyperloglog.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace sluice::server {
namespace {

constexpr int kQ = 64 - HyperLogLog::kPrecision;  // bits of the hash a rank is read from

// sigma(x) = x + sum_{k>=1} x^(2^k) 2^(k-1), the correction for empty registers (x: their
// share). Converges for x < 1.
double Sigma(double x) {
  if (x == 1.0) return std::numeric_limits<double>::infinity();
  double y = 1.0;
  double z = x;
  for (;;) {
    x *= x;
    const double before = z;
    z += x * y;
    y += y;
    if (z == before) return z;
  }
}

// tau(x) = (1 - x - sum_{k>=1} (1 - x^(2^-k))^2 2^-k) / 3, the correction for saturated
// registers (x: the share not saturated).
double Tau(double x) {
  if (x == 0.0 || x == 1.0) return 0.0;
  double y = 1.0;
  double z = 1.0 - x;
  for (;;) {
    x = std::sqrt(x);
    const double before = z;
    y *= 0.5;
    z -= (1.0 - x) * (1.0 - x) * y;
    if (z == before) return z / 3.0;
  }
}

}  // namespace

uint8_t HyperLogLog::RankOf(uint64_t hash) {
  const uint64_t rest = hash << kPrecision;  // the kQ bits after the index, at the top
  const int zeros = rest == 0 ? kQ : std::min(std::countl_zero(rest), kQ);
  return static_cast<uint8_t>(zeros + 1);
}

double HyperLogLog::Estimate(const Registers& registers) {
  std::array<int, kQ + 2> histogram{};  // registers by value, 0 .. kQ + 1
  for (const uint8_t r : registers) ++histogram[r <= kQ + 1 ? r : kQ + 1];
  const double m = static_cast<double>(kRegisterCount);
  if (histogram[0] == static_cast<int>(kRegisterCount)) return 0.0;
  double z = m * Tau(1.0 - histogram[kQ + 1] / m);
  for (int k = kQ; k >= 1; --k) z = 0.5 * (z + histogram[k]);
  z += m * Sigma(histogram[0] / m);
  constexpr double kAlphaInf = 0.72134752044448170368;  // 1 / (2 ln 2)
  return kAlphaInf * m * m / z;
}

}  // namespace sluice::server
