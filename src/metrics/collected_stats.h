// What the store layers report at one scrape (sluice/stats_sink.h), collected and rendered in
// the Prometheus text format: each family's samples together under one # HELP and # TYPE, the
// families in the order they were first reported, the samples of a family likewise, labels in
// the order given. Samples of the same family and labels add up. Not thread-safe: one per
// render.
#ifndef SLUICE_METRICS_COLLECTED_STATS_H_
#define SLUICE_METRICS_COLLECTED_STATS_H_

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/stats_sink.h"

namespace sluice::server {

class CollectedStats final : public StatsSink {
 public:
  void Add(const StatFamily& family, std::span<const StatLabel> labels, double value) override;

  // Counters are shown as at least 0 (layers may take back what another counted); integral
  // values as integers, as the format spells them.
  void Render(std::string& out) const;

 private:
  struct Sample {
    std::string labels;  // rendered: name="value",...
    double value = 0;
  };
  struct Family {
    std::string name;
    StatKind kind = StatKind::kGauge;
    std::string help;
    std::vector<Sample> samples;
    std::unordered_map<std::string, size_t> index;  // labels -> samples[i]
  };
  std::vector<Family> families_;
  std::unordered_map<std::string, size_t> index_;  // name -> families_[i]
  std::string labels_;                             // scratch
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_COLLECTED_STATS_H_
