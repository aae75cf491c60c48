// StatsSink: where a store layer reports its own stats as named, labelled values, for whoever
// renders them (sluiced's /metrics). A layer defines its families (name, kind, help) in its own
// folder and reports them from Store::ReportStats and Limiter::ReportStats; nothing above the
// store has to know the layer exists.
//
//   constexpr StatFamily kHeld{"sluice_lease_units_held", StatKind::kGauge, "Units held."};
//   sink.Add(kHeld, limit_labels, 12);
//
// Samples of the same family and labels add up: several layers may contribute to one series
// (the decisions each layer took, by source). Labels are kept in the order given.
#ifndef SLUICE_STATS_SINK_H_
#define SLUICE_STATS_SINK_H_

#include <span>
#include <string_view>

namespace sluice {

enum class StatKind { kCounter, kGauge };

// One family of series: its name, whether it only grows, and its help text. The strings must
// outlive the Add that reports it (layers keep them as constants).
struct StatFamily {
  std::string_view name;
  StatKind kind = StatKind::kGauge;
  std::string_view help;
};

struct StatLabel {
  std::string_view name;
  std::string_view value;
};

class StatsSink {
 public:
  virtual ~StatsSink() = default;
  // Adds `value` to the series of `family` with `labels` (none: the family's one series).
  virtual void Add(const StatFamily& family, std::span<const StatLabel> labels, double value) = 0;
};

}  // namespace sluice

#endif  // SLUICE_STATS_SINK_H_
