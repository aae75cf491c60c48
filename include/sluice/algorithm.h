// The six algorithms sluice implements, by their configuration names.
#ifndef SLUICE_ALGORITHM_H_
#define SLUICE_ALGORITHM_H_

#include <array>
#include <optional>
#include <string_view>

namespace sluice {

enum class Algorithm {
  kTokenBucket,
  kLeakyBucket,
  kFixedWindow,
  kSlidingWindowLog,
  kSlidingWindowCounter,
  kGcra,
};

inline constexpr std::array<Algorithm, 6> kAllAlgorithms = {
    Algorithm::kTokenBucket,      Algorithm::kLeakyBucket,          Algorithm::kFixedWindow,
    Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter, Algorithm::kGcra,
};

// The bucket algorithms take a burst (capacity / queue size); the windows do not.
constexpr bool HasBurst(Algorithm a) {
  return a == Algorithm::kTokenBucket || a == Algorithm::kGcra || a == Algorithm::kLeakyBucket;
}

// "token_bucket", "leaky_bucket", "fixed_window", "sliding_window_log",
// "sliding_window_counter", "gcra".
std::string_view AlgorithmName(Algorithm a);
std::optional<Algorithm> ParseAlgorithm(std::string_view name);

}  // namespace sluice

#endif  // SLUICE_ALGORITHM_H_
