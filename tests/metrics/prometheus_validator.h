// A small, strict checker of the Prometheus text exposition format (0.0.4) for the metrics
// tests: each line must match the grammar (regexes below), and the families must hang together
// the way Prometheus' parser and storage need (one TYPE before the samples, families
// contiguous, no duplicate series, histograms with ascending le, cumulative buckets, a +Inf
// bucket equal to _count, and a _sum).
#ifndef SLUICE_TESTS_METRICS_PROMETHEUS_VALIDATOR_H_
#define SLUICE_TESTS_METRICS_PROMETHEUS_VALIDATOR_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::server::test {

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped, in order
  double value = 0;
};

struct Exposition {
  std::vector<std::string> errors;  // "line N: what"; empty when valid
  std::vector<Sample> samples;
};

Exposition ParseExposition(std::string_view text);

// The value of the sample with exactly this name and label set (any order), if present.
std::optional<double> SampleValue(const Exposition& e, std::string_view name,
                                  std::vector<std::pair<std::string, std::string>> labels);

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_METRICS_PROMETHEUS_VALIDATOR_H_
