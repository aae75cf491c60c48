// StatsReader: a StatsSink (sluice/stats_sink.h) that keeps what a store or limiter reported,
// for tests that read a layer's stats as /metrics would get them.
//
//   StatsReader r;
//   limiter->ReportStats(r, {});
//   EXPECT_EQ(r.Value("sluice_region_share_units"), 34);
#ifndef SLUICE_TESTS_SUPPORT_STATS_READER_H_
#define SLUICE_TESTS_SUPPORT_STATS_READER_H_

#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/stats_sink.h"
#include "sluice/store.h"

namespace sluice::testing {

class StatsReader final : public StatsSink {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  void Add(const StatFamily& family, std::span<const StatLabel> labels, double value) override {
    Labels key;
    for (const StatLabel& l : labels) key.emplace_back(l.name, l.value);
    values_[{std::string(family.name), std::move(key)}] += value;
    kinds_[std::string(family.name)] = family.kind;
  }

  // The series' value (summed over what every layer added); 0 when it was not reported.
  double Value(std::string_view name, const Labels& labels = {}) const {
    auto it = values_.find({std::string(name), labels});
    return it == values_.end() ? 0 : it->second;
  }
  bool Has(std::string_view name, const Labels& labels = {}) const {
    return values_.contains({std::string(name), labels});
  }
  // Whether any series of the family was reported.
  bool HasFamily(std::string_view name) const { return kinds_.contains(std::string(name)); }
  // Every series of the family, summed.
  double Sum(std::string_view name) const {
    double sum = 0;
    for (const auto& [key, value] : values_) {
      if (key.first == name) sum += value;
    }
    return sum;
  }

 private:
  std::map<std::pair<std::string, Labels>, double> values_;
  std::map<std::string, StatKind> kinds_;
};

// What `store` reports of its own (Store::ReportStats).
inline StatsReader ReadStats(const Store& store) {
  StatsReader r;
  store.ReportStats(r);
  return r;
}

// What `limiter` reports, with no limit labels (Limiter::ReportStats).
inline StatsReader ReadStats(const Limiter& limiter) {
  StatsReader r;
  limiter.ReportStats(r, {});
  return r;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_STATS_READER_H_
