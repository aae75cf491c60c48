// Backoff: each jitter variant's delays against the closed form of its distribution in the AWS
// analysis (a Kolmogorov-Smirnov distance for the uniform ones), the exponential ceiling, the
// Retry-After floor and max_attempts. Seeded randomness: the same numbers every run, so the
// bounds cannot flake; they are set where a wrong distribution (full jitter drawing from
// [0, e/2], equal jitter from [0, e]) is off by 0.25 or more while a right one with 20000
// samples lies within 1.95/sqrt(n) = 0.0138 (KS at alpha = 0.001).
#include "sluice/client/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace sluice::client {
namespace {

using namespace std::chrono_literals;

constexpr int kSamples = 20000;
const double kKsBound = 1.95 / std::sqrt(static_cast<double>(kSamples));

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// sup |F_n(x) - F(x)| for samples against the uniform distribution on [lo, hi].
double KsDistanceToUniform(std::vector<double> samples, double lo, double hi) {
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  double d = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double f = std::clamp((samples[i] - lo) / (hi - lo), 0.0, 1.0);
    d = std::max({d, std::abs(static_cast<double>(i + 1) / n - f),
                  std::abs(f - static_cast<double>(i) / n)});
  }
  return d;
}

std::vector<double> Draw(const BackoffPolicy& policy, int retry, Duration previous, uint64_t seed) {
  SeededRandom rng(seed);
  std::vector<double> out;
  for (int i = 0; i < kSamples; ++i) {
    out.push_back(Seconds(JitteredDelay(policy, retry, previous, rng.Uniform01())));
  }
  return out;
}

TEST(BackoffTest, NoJitterDoublesFromBaseUpToTheCap) {
  const BackoffPolicy p{.base = 100ms, .cap = 1s, .max_attempts = 10, .jitter = Jitter::kNone};
  SeededRandom rng(1);
  Backoff b(p, rng);
  for (Duration want : {100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms})
    EXPECT_EQ(*b.NextDelay(), want);
}

TEST(BackoffTest, TheCeilingNeverOverflows) {
  const BackoffPolicy p{.base = 1ns, .cap = Duration::max(), .jitter = Jitter::kNone};
  EXPECT_EQ(ExponentialCeiling(p, 62), Duration::max());
  EXPECT_EQ(ExponentialCeiling(p, 1000), Duration::max());
  EXPECT_EQ(ExponentialCeiling(p, 10), 1024ns);
  const BackoffPolicy big{.base = 1h, .cap = 24h};
  EXPECT_EQ(ExponentialCeiling(big, 40), 24h);
}

TEST(BackoffTest, FullJitterIsUniformOnZeroToTheCeiling) {
  const BackoffPolicy p{.base = 100ms, .cap = 10s, .jitter = Jitter::kFull};
  for (int retry : {0, 3, 10}) {
    const double e = Seconds(ExponentialCeiling(p, retry));  // 0.1, 0.8, 10 (capped)
    const auto s = Draw(p, retry, p.base, 7 + retry);
    EXPECT_LT(KsDistanceToUniform(s, 0, e), kKsBound) << "retry " << retry;
    EXPECT_GE(*std::min_element(s.begin(), s.end()), 0.0);
    EXPECT_LE(*std::max_element(s.begin(), s.end()), e);
  }
}

TEST(BackoffTest, EqualJitterIsUniformOnTheUpperHalf) {
  const BackoffPolicy p{.base = 100ms, .cap = 10s, .jitter = Jitter::kEqual};
  for (int retry : {0, 4, 12}) {
    const double e = Seconds(ExponentialCeiling(p, retry));
    const auto s = Draw(p, retry, p.base, 11 + retry);
    EXPECT_LT(KsDistanceToUniform(s, e / 2, e), kKsBound) << "retry " << retry;
    EXPECT_GE(*std::min_element(s.begin(), s.end()), e / 2);
  }
}

TEST(BackoffTest, DecorrelatedJitterIsUniformOnBaseToThreeTimesThePrevious) {
  const BackoffPolicy p{.base = 100ms, .cap = 20s, .jitter = Jitter::kDecorrelated};
  const auto s = Draw(p, 5, 1s, 3);  // the retry number does not matter, the previous does
  EXPECT_LT(KsDistanceToUniform(s, 0.1, 3.0), kKsBound);
}

TEST(BackoffTest, DecorrelatedJitterPutsEverythingAboveTheCapAtTheCap) {
  // previous 10s: uniform on [0.1, 30] capped at 20: P(cap) = 10 / 29.9.
  const BackoffPolicy p{.base = 100ms, .cap = 20s, .jitter = Jitter::kDecorrelated};
  const auto s = Draw(p, 0, 10s, 5);
  std::vector<double> below;
  for (double x : s) {
    EXPECT_LE(x, 20.0);
    if (x < 20.0) below.push_back(x);
  }
  const double at_cap = 1.0 - static_cast<double>(below.size()) / kSamples;
  const double p_cap = 10.0 / 29.9;
  // Five standard deviations of a binomial proportion: 5 * sqrt(p(1-p)/n) = 0.017.
  EXPECT_NEAR(at_cap, p_cap, 5 * std::sqrt(p_cap * (1 - p_cap) / kSamples));
  EXPECT_LT(KsDistanceToUniform(below, 0.1, 20.0), 1.95 / std::sqrt(below.size() * 1.0));
}

TEST(BackoffTest, DecorrelatedJitterFeedsEachDelayIntoTheNext) {
  const BackoffPolicy p{
      .base = 100ms, .cap = 1h, .max_attempts = 50, .jitter = Jitter::kDecorrelated};
  SeededRandom rng(9);
  Backoff b(p, rng);
  Duration previous = p.base;
  for (int i = 0; i < 40; ++i) {
    const Duration d = *b.NextDelay();
    EXPECT_GE(d, p.base);
    EXPECT_LE(d, std::min(p.cap, previous * 3));
    previous = d;
  }
}

TEST(BackoffTest, RetryAfterIsAFloorJitterNeverShortens) {
  const BackoffPolicy p{.base = 100ms, .cap = 10s, .max_attempts = 100, .jitter = Jitter::kFull};
  SeededRandom rng(4);
  Backoff b(p, rng);
  for (int i = 0; i < 50; ++i) EXPECT_GE(*b.NextDelay(3s), 3s);
  // A longer jitter is kept as it is (no jitter: 100ms, 200ms, ... 10s).
  const BackoffPolicy none{.base = 100ms, .cap = 10s, .max_attempts = 100, .jitter = Jitter::kNone};
  Backoff plain(none, rng);
  EXPECT_EQ(*plain.NextDelay(50ms), 100ms);
}

TEST(BackoffTest, MaxAttemptsCountsTheFirstCall) {
  SeededRandom rng(1);
  Backoff b({.max_attempts = 3}, rng);
  EXPECT_TRUE(b.NextDelay());
  EXPECT_TRUE(b.NextDelay());
  EXPECT_FALSE(b.NextDelay());  // three calls made: the first and two retries
  EXPECT_EQ(b.retries(), 2);
  b.Reset();
  EXPECT_TRUE(b.NextDelay());
  Backoff once({.max_attempts = 1}, rng);
  EXPECT_FALSE(once.NextDelay());
}

TEST(BackoffTest, TheSameSeedGivesTheSameDelays) {
  SeededRandom a(123), b(123);
  Backoff x({.max_attempts = 20}, a), y({.max_attempts = 20}, b);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(x.NextDelay(), y.NextDelay());
}

TEST(BackoffTest, BadPoliciesAndNamesAreRefusedByName) {
  EXPECT_FALSE(ValidateBackoffPolicy({.base = 0ns}));
  EXPECT_FALSE(ValidateBackoffPolicy({.base = 2s, .cap = 1s}));
  EXPECT_FALSE(ValidateBackoffPolicy({.max_attempts = 0}));
  EXPECT_TRUE(ValidateBackoffPolicy({}));
  EXPECT_EQ(*ParseJitter("decorrelated"), Jitter::kDecorrelated);
  EXPECT_NE(ParseJitter("fuzzy").error().message.find("full"), std::string::npos);
}

}  // namespace
}  // namespace sluice::client
