#include "sluice/algorithm.h"

namespace sluice {

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kTokenBucket:
      return "token_bucket";
    case Algorithm::kLeakyBucket:
      return "leaky_bucket";
    case Algorithm::kFixedWindow:
      return "fixed_window";
    case Algorithm::kSlidingWindowLog:
      return "sliding_window_log";
    case Algorithm::kSlidingWindowCounter:
      return "sliding_window_counter";
    case Algorithm::kGcra:
      return "gcra";
  }
  return "unknown";
}

std::optional<Algorithm> ParseAlgorithm(std::string_view name) {
  for (Algorithm a : kAllAlgorithms) {
    if (AlgorithmName(a) == name) return a;
  }
  return std::nullopt;
}

}  // namespace sluice
