#include "cli/simulate_regions.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "sluice/region_scope.h"

namespace sluice::cli {
namespace {

constexpr std::array<const char*, 3> kRegions = {"us", "eu", "ap"};
constexpr std::array<int64_t, 3> kSharePpm = {340'000, 330'000, 330'000};
constexpr int64_t kHeadroomPercent = 125;  // as the region layer asks

// Offered requests per region in step `t` of `steps`: 1.5 limits in all.
std::array<int64_t, 3> Offered(const std::string& workload, int64_t limit, int t, int steps) {
  const int64_t total = limit * 3 / 2;
  if (workload == "skewed") return {total * 90 / 100, total * 5 / 100, total * 5 / 100};
  // shifting: the busy region moves every third of the run (follow the sun).
  const int busy = std::min(2, t * 3 / steps);
  std::array<int64_t, 3> out{};
  for (int i = 0; i < 3; ++i) out[i] = i == busy ? total * 90 / 100 : total * 5 / 100;
  return out;
}

void Simulate(const std::string& workload, const SimulateRegionsFlags& f, std::FILE* out) {
  std::array<int64_t, 3> statics{};
  for (int i = 0; i < 3; ++i) statics[i] = SharedUnits(f.limit, kSharePpm[i]);
  std::array<int64_t, 3> parts = statics;  // leased: every region starts on its static part
  int64_t sum_static = 0, sum_leased = 0, sum_nominal = 0;
  fmt::print(out, "workload {}: limit {} per window, shares us 0.34 eu 0.33 ap 0.33\n", workload,
             f.limit);
  fmt::print(out, "{:>4}  {:>22}  {:>22}  {:>22}  {:>14}  {:>14}\n", "step",
             "us offered/part/admit", "eu offered/part/admit", "ap offered/part/admit",
             "static total", "leased total");
  for (int t = 0; t < f.steps; ++t) {
    const auto offered = Offered(workload, f.limit, t, f.steps);
    int64_t total_static = 0, total_leased = 0;
    std::array<int64_t, 3> admitted{};
    for (int i = 0; i < 3; ++i) {
      total_static += std::min(offered[i], statics[i]);
      admitted[i] = std::min(offered[i], parts[i]);
      total_leased += admitted[i];
    }
    fmt::print(out, "{:>4}  {:>22}  {:>22}  {:>22}  {:>14}  {:>14}\n", t,
               fmt::format("{}/{}/{}", offered[0], parts[0], admitted[0]),
               fmt::format("{}/{}/{}", offered[1], parts[1], admitted[1]),
               fmt::format("{}/{}/{}", offered[2], parts[2], admitted[2]),
               fmt::format("{}/{}", total_static, f.limit),
               fmt::format("{}/{}", total_leased, f.limit));
    sum_static += total_static;
    sum_leased += total_leased;
    sum_nominal += f.limit;
    // The refresh: demand (offered, refused included, with headroom) to the global store, whose
    // grant to each region in turn is its allocation, at most what the others do not hold.
    std::array<int64_t, 3> demand{};
    for (int i = 0; i < 3; ++i) demand[i] = offered[i] * kHeadroomPercent / 100;
    const auto alloc = AllocateRegions(f.limit, kSharePpm, demand);
    for (int i = 0; i < 3; ++i) {
      int64_t others = 0;
      for (int j = 0; j < 3; ++j) others += j == i ? 0 : parts[j];
      parts[i] = std::max<int64_t>(1, std::min(alloc[i], f.limit - others));
    }
  }
  fmt::print(out, "admitted over {} windows: static {} ({:.1f}%), leased {} ({:.1f}%) of {}\n\n",
             f.steps, sum_static, 100.0 * sum_static / sum_nominal, sum_leased,
             100.0 * sum_leased / sum_nominal, sum_nominal);
}

}  // namespace

int RunSimulateRegions(const SimulateRegionsFlags& f, std::FILE* out) {
  if (f.workload != "skewed" && f.workload != "shifting" && f.workload != "both") {
    fmt::print(stderr, "sluice simulate regions: --workload is skewed, shifting or both\n");
    return 2;
  }
  if (f.limit < 3 || f.limit > 1'000'000'000 || f.steps < 1 || f.steps > 10'000) {
    fmt::print(stderr, "sluice simulate regions: --limit must be 3..1e9 and --steps 1..10000\n");
    return 2;
  }
  for (const char* w : {"skewed", "shifting"}) {
    if (f.workload == "both" || f.workload == w) Simulate(w, f, out);
  }
  return 0;
}

}  // namespace sluice::cli
