// The store suite (store_suite.h), the whole range of rates (issue 25): every unit from a second
// to a year x {1, 7, 30001, 999999, 2^31-1, 2^32-1} x every algorithm but the log, with the
// limit's own burst and with a burst of 2^32-1, decides on the store under test exactly as on
// the memory store (the pure algorithms), every field. Costs run from 1 to the capacity and gaps
// from nothing to past a fill time, so both sides admit, refuse and refill. A spec the core
// refuses (ValidateLimitSpec) is counted and left out; every spec it accepts must be served.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "sluice/memory_store.h"
#include "store/store_suite.h"
#include "store/traffic_time.h"

namespace sluice::testing {
namespace {

constexpr int64_t kRangeLimits[] = {1, 7, 30001, 999999, 2147483647, 4294967295};
constexpr int64_t kRangeUnitsS[] = {1, 60, 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400};

}  // namespace

TEST_P(StoreSuite, TheWholeRangeDecidesAsTheMemoryStore) {
  // Batched limits may be stricter than the pure algorithm by an interval's refill (checked
  // within that bound by the parity tests); their views and syncs run through the same scripts
  // as exact and leased limits, which this test checks over the whole range.
  if (GetParam().sync.mode == SyncMode::kBatched) {
    GTEST_SKIP() << "batched: its bound is checked by the parity tests, the scripts here";
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  int decided = 0, refused_by_core = 0, spec_index = 0, fresh = 0;
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kLeakyBucket,
                      Algorithm::kFixedWindow, Algorithm::kSlidingWindowCounter}) {
    for (int64_t limit : kRangeLimits) {
      for (int64_t unit : kRangeUnitsS) {
        for (int64_t burst : {int64_t{0}, int64_t{4294967295}}) {
          if (burst != 0 && !HasBurst(a)) continue;
          const LimitSpec spec{a, limit, std::chrono::seconds(unit), burst, false};
          ++spec_index;
          if (!Serves(spec)) continue;
          if (!ValidateLimitSpec(spec)) {
            ++refused_by_core;
            continue;
          }
          auto memory = MakeMemoryLimiter(spec);
          ASSERT_TRUE(memory.has_value()) << DescribeLimitSpec(spec);
          auto limiter = Make(*store, spec, "range" + std::to_string(spec_index));
          ASSERT_NE(limiter, nullptr) << DescribeLimitSpec(spec);
          std::mt19937_64 rng(spec_index);
          const int64_t period_ms = unit * 1000, capacity = spec.Capacity();
          const int64_t fill_ms = static_cast<int64_t>(std::min<__int128>(
              __int128{capacity} * period_ms / limit + 1, int64_t{2} * 365 * 86'400'000));
          TrafficTime time(int64_t{1'700'000'000'000} * 1'000'000, 1'000'000);
          for (int i = 0; i < 24; ++i) {
            int64_t gap_ms = 0;
            switch (rng() % 5) {
              case 0:
                gap_ms = 0;
                break;
              case 1:
                gap_ms = 1 + static_cast<int64_t>(rng() % 3);
                break;
              case 2:
                gap_ms = static_cast<int64_t>(rng() % static_cast<uint64_t>(period_ms / limit + 2));
                break;
              case 3:
                gap_ms = static_cast<int64_t>(rng() % static_cast<uint64_t>(fill_ms + 1));
                break;
              default:
                gap_ms = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * period_ms));
                break;
            }
            const Timestamp now = time.Advance(gap_ms * 1'000'000, *store);
            const int64_t cost =
                i % 3 == 0   ? capacity
                : i % 3 == 1 ? 1
                             : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
            const std::string key = "k" + std::to_string(i % 2);
            Decision want = (*memory)->Decide(key, now, cost);
            const Decision got = Decide(*limiter, key, now, cost, i % 4 == 3);
            // After a request that outran (TrafficTime), the key may have expired in real time
            // (a fixed window's TTL is what is left of it, a millisecond at times): the store's
            // answer is then right for a fresh state, which the oracle takes.
            if (!Same(got, want) && time.Outran()) {
              (*memory)->Reset(key);
              want = (*memory)->Decide(key, now, cost);
              ++fresh;
            }
            ASSERT_TRUE(Same(got, want)) << DescribeLimitSpec(spec) << ", request " << i;
          }
          ++decided;
        }
      }
    }
  }
  std::printf(
      "the whole range: %d specs decided as the memory store, %d refused by the core, %d requests "
      "met a state that had expired in real time\n",
      decided, refused_by_core, fresh);
  EXPECT_GT(decided, 0);
  // Only a machine far too slow for the traffic's pace meets many.
  EXPECT_LT(fresh, decided * 24 / 10);
}

}  // namespace sluice::testing
