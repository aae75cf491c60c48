#include "metrics/collected_stats.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "metrics/prometheus_text.h"

namespace sluice::server {
namespace {

// 2^64: integral values below it are shown as the integers they are (1e+16 would not be).
constexpr double kTwoTo64 = 18446744073709551616.0;

void AppendValue(std::string& out, std::string_view name, std::string_view labels, double value) {
  if (value >= 0 && value < kTwoTo64 && std::floor(value) == value) {
    AppendSample(out, name, labels, {}, static_cast<uint64_t>(value));
  } else {
    AppendSample(out, name, labels, {}, value);
  }
}

}  // namespace

void CollectedStats::Add(const StatFamily& family, std::span<const StatLabel> labels,
                         double value) {
  auto [f, new_family] = index_.try_emplace(std::string(family.name), families_.size());
  if (new_family) {
    families_.push_back({std::string(family.name), family.kind, std::string(family.help), {}, {}});
  }
  Family& into = families_[f->second];
  labels_.clear();
  for (const StatLabel& l : labels) {
    if (!labels_.empty()) labels_ += ',';
    AppendLabel(labels_, l.name, l.value);
  }
  auto [s, new_sample] = into.index.try_emplace(labels_, into.samples.size());
  if (new_sample) into.samples.push_back({labels_, 0});
  into.samples[s->second].value += value;
}

void CollectedStats::Render(std::string& out) const {
  for (const Family& f : families_) {
    const bool counter = f.kind == StatKind::kCounter;
    AppendHelpAndType(out, f.name, f.help, counter ? "counter" : "gauge");
    for (const Sample& s : f.samples) {
      AppendValue(out, f.name, s.labels, counter && !(s.value > 0) ? 0 : s.value);
    }
  }
}

}  // namespace sluice::server
