// RegionScope: how one limit is shared between regions that each have their own store -- a
// limit's `scope:` and `regions:` in the config, LimiterOptions::region for a store.
// docs/regions.md has the design, the guarantees and the bounds.
//
//   // scope: global, regions: {mode: static, shares: {us: 0.5, eu: 0.3, ap: 0.2}}, in us:
//   auto part = RegionPart(spec, SharedUnits(spec.limit, 500'000));   // 50% of the limit
#ifndef SLUICE_REGION_SCOPE_H_
#define SLUICE_REGION_SCOPE_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sluice/limit_spec.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice {

enum class RegionMode : uint8_t {
  kStatic,  // each region enforces its fixed share on its own store; regions never talk
  kLeased,  // each region's share follows its demand, leased from the global store
};

// A share of a limit in millionths (ppm): shares are exact integers, so the parts they give
// provably sum to at most the limit.
constexpr int64_t kWholeShare = 1'000'000;

struct RegionShare {
  std::string region;
  int64_t ppm = 0;  // (0, kWholeShare]
  bool operator==(const RegionShare&) const = default;
};

struct RegionScope {
  bool global = false;  // scope: global (false: the limit holds per store, as ever)
  RegionMode mode = RegionMode::kStatic;
  Duration refresh = std::chrono::seconds(1);  // kLeased: how often a node renews its region's part
  std::vector<RegionShare> shares;             // sorted by region name
  std::string region;                          // this node's region (listed in shares)
  LimitSpec global_spec;  // the whole limit; the limiter's own spec is this region's part
  bool operator==(const RegionScope&) const = default;

  // This node's region's static share in ppm (0 if it is not listed).
  int64_t OwnShare() const;
};

// floor(limit * ppm / kWholeShare): a share's part of `limit`, rounded down.
int64_t SharedUnits(int64_t limit, int64_t ppm);

// `global` with its limit replaced by `units` (>= 1) and its burst, if set, scaled alike
// (rounded down, at least 1). The error names the field that cannot be scaled.
Result<LimitSpec> RegionPart(const LimitSpec& global, int64_t units);

// The units each listed region should hold of `limit`, given the regions' static shares (ppm)
// and what each demands (units per period; negative: the region is absent, and is counted at
// its static part, on which it may be deciding). Each present region gets at least one unit,
// then a max-min fair share, weighted by the static shares, of what absent regions leave; what
// demand leaves over is spread by static share. The global store's script computes the same
// (store/region/region_script.h); the simulator and the tests use this one. Result i is for
// share_ppm[i]; the sum never exceeds `limit` (the shares sum to at most 1, each part >= 1).
std::vector<int64_t> AllocateRegions(int64_t limit, std::span<const int64_t> share_ppm,
                                     std::span<const int64_t> demand);

}  // namespace sluice

#endif  // SLUICE_REGION_SCOPE_H_
