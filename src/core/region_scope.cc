#include "sluice/region_scope.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace sluice {

int64_t RegionScope::OwnShare() const {
  for (const RegionShare& s : shares) {
    if (s.region == region) return s.ppm;
  }
  return 0;
}

int64_t SharedUnits(int64_t limit, int64_t ppm) {
  // limit < 2^53 and ppm <= 10^6 keep the product below 2^73: use 128 bits.
  return static_cast<int64_t>(static_cast<__int128>(limit) * ppm / kWholeShare);
}

Result<LimitSpec> RegionPart(const LimitSpec& global, int64_t units) {
  if (units < 1) return MakeError("a region's part of the limit must be at least 1");
  LimitSpec part = global;
  part.limit = units;
  if (global.burst > 0) {
    part.burst = std::max<int64_t>(
        1, static_cast<int64_t>(static_cast<__int128>(global.burst) * units / global.limit));
  }
  return ValidateLimitSpec(part);
}

std::vector<int64_t> AllocateRegions(int64_t limit, std::span<const int64_t> share_ppm,
                                     std::span<const int64_t> demand) {
  const size_t n = share_ppm.size();
  const auto part = [](int64_t pool, int64_t ppm, int64_t weight) {
    return static_cast<int64_t>(static_cast<__int128>(pool) * ppm / weight);
  };
  std::vector<int64_t> alloc(n, 0);
  int64_t free = limit;
  std::vector<size_t> present;
  for (size_t i = 0; i < n; ++i) {
    if (demand[i] < 0) {
      alloc[i] = SharedUnits(limit, share_ppm[i]);  // absent: it may be deciding on it
      free -= alloc[i];
    } else {
      present.push_back(i);
    }
  }
  if (present.empty()) return alloc;
  // Every present region keeps one unit: its pool is a limit, which cannot be zero.
  std::vector<int64_t> want(n, 0);
  for (size_t i : present) {
    alloc[i] = 1;
    --free;
    want[i] = std::max<int64_t>(0, demand[i] - 1);
  }
  // Weighted max-min fairness: regions wanting less than their weighted part of what is free
  // get what they want; the rest split what remains by weight.
  std::vector<size_t> hungry;
  for (size_t i : present) {
    if (want[i] > 0) hungry.push_back(i);
  }
  while (!hungry.empty() && free > 0) {
    int64_t weight = 0;
    for (size_t i : hungry) weight += share_ppm[i];
    std::vector<size_t> still;
    bool satisfied = false;
    const int64_t pool = free;
    for (size_t i : hungry) {
      const int64_t fair = part(pool, share_ppm[i], weight);
      if (want[i] <= fair) {
        alloc[i] += want[i];
        free -= want[i];
        satisfied = true;
      } else {
        still.push_back(i);
      }
    }
    if (!satisfied) {
      for (size_t i : still) {
        const int64_t fair = part(pool, share_ppm[i], weight);
        alloc[i] += fair;
        free -= fair;
      }
      still.clear();
    }
    hungry = std::move(still);
  }
  // What demand leaves over goes out by static share, so a region whose demand grows before
  // the next refresh has room to grow into.
  if (free > 0) {
    int64_t weight = 0;
    for (size_t i : present) weight += share_ppm[i];
    const int64_t spare = free;
    for (size_t i : present) alloc[i] += part(spare, share_ppm[i], weight);
  }
  return alloc;
}

}  // namespace sluice
