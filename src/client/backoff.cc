#include "sluice/client/backoff.h"

#include <algorithm>
#include <cmath>

namespace sluice::client {
namespace {

// lo + u * (hi - lo), rounded down to a nanosecond, in [lo, hi] (in floating point, u < 1 can
// still round up to hi).
Duration Between(Duration lo, Duration hi, double u) {
  const double span = static_cast<double>((hi - lo).count());
  const double offset = std::floor(u * span);
  if (offset >= span) return hi;
  return lo + Duration(static_cast<Duration::rep>(offset));
}

}  // namespace

std::string_view JitterName(Jitter jitter) {
  switch (jitter) {
    case Jitter::kNone:
      return "none";
    case Jitter::kFull:
      return "full";
    case Jitter::kEqual:
      return "equal";
    case Jitter::kDecorrelated:
      return "decorrelated";
  }
  return "none";
}

Result<Jitter> ParseJitter(std::string_view name) {
  for (Jitter j : {Jitter::kNone, Jitter::kFull, Jitter::kEqual, Jitter::kDecorrelated}) {
    if (JitterName(j) == name) return j;
  }
  return MakeError("unknown jitter '" + std::string(name) +
                   "' (none, full, equal or decorrelated)");
}

Result<BackoffPolicy> ValidateBackoffPolicy(const BackoffPolicy& policy) {
  if (policy.base <= Duration{0}) return MakeError("backoff base must be positive");
  if (policy.cap < policy.base) return MakeError("backoff cap must be at least its base");
  if (policy.max_attempts < 1) return MakeError("backoff max_attempts must be at least 1");
  return policy;
}

Duration ExponentialCeiling(const BackoffPolicy& policy, int retry) {
  // base * 2^retry > cap  <=>  base > cap / 2^retry; past 62 doublings any positive base is.
  if (retry >= 62 || policy.base.count() > (policy.cap.count() >> retry)) return policy.cap;
  return policy.base * (int64_t{1} << retry);
}

Duration JitteredDelay(const BackoffPolicy& policy, int retry, Duration previous, double u) {
  const Duration ceiling = ExponentialCeiling(policy, retry);
  switch (policy.jitter) {
    case Jitter::kNone:
      return ceiling;
    case Jitter::kFull:
      return Between(Duration{0}, ceiling, u);
    case Jitter::kEqual:
      return ceiling - ceiling / 2 + Between(Duration{0}, ceiling / 2, u);
    case Jitter::kDecorrelated: {
      // The analysis' form exactly: uniform on [base, 3 * previous], then capped (so the cap
      // itself has the mass of everything drawn above it). 3 * previous saturates.
      constexpr Duration kMax = Duration::max();
      const Duration hi = previous > kMax / 3 ? kMax : previous * 3;
      return std::min(policy.cap, Between(policy.base, std::max(policy.base, hi), u));
    }
  }
  return ceiling;
}

Backoff::Backoff(const BackoffPolicy& policy, Random& random)
    : policy_(policy), random_(random), previous_(policy.base) {}

std::optional<Duration> Backoff::NextDelay(std::optional<Duration> retry_after) {
  if (retries_ + 1 >= policy_.max_attempts) return std::nullopt;
  const Duration jittered = JitteredDelay(policy_, retries_, previous_, random_.Uniform01());
  previous_ = jittered;
  ++retries_;
  return retry_after ? std::max(jittered, *retry_after) : jittered;
}

void Backoff::Reset() {
  retries_ = 0;
  previous_ = policy_.base;
}

}  // namespace sluice::client
