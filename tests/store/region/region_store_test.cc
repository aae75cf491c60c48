// Multi-region limits on real redis-servers (support/region_harness.h): three regions, each with
// its own Redis, and a global Redis behind a proxy that can add latency or cut the link. The
// oracle is counting: admissions per region and per fixed window, against the parts the
// regions held (from their stats) and the limit. Traffic is paced by the test; every wait is
// for a condition, with a deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sluice/region_scope.h"
#include "sluice/store.h"
#include "support/region_harness.h"
#include "support/stats_reader.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ReadStats;
using testing::RegionHarness;
using testing::StatsReader;

constexpr int64_t kLimit = 1000;  // per second, across the three regions
constexpr milliseconds kRefresh{100};
constexpr milliseconds kTick{10};  // Drive's pacing: at least this long between two ticks

// What the busy region holds once the leased parts have followed the skewed traffic below (30
// requests a tick to us, 1 to eu and to ap), derived from the allocation, not measured: a quiet
// region sees at most one hit a tick, so at most kRefresh / kTick + 2 in a refresh interval (one
// more for the tick at each end: the interval's ends and the hits are read a little apart), which
// is 120 a second, and asks for that plus 25% headroom: 150. The quiet regions' demands are met
// first and the busy region, hungry, is granted the rest: at least kLimit - 2 * 150. On an idle
// machine a tick takes 11 ms or so and the busy region holds 750 to 800; before the quiet
// regions are both seen it holds at most kLimit - 330 - 1 (one counted at its static part).
constexpr int64_t kQuietDemandAtMost =
    (kRefresh / kTick + 2) * (std::chrono::seconds(1) / kRefresh) * 125 / 100;
constexpr int64_t kBusyPartAtLeast = kLimit - 2 * kQuietDemandAtMost;
static_assert(kBusyPartAtLeast == 700);

LimiterOptions Options(RegionMode mode, std::vector<RegionShare> shares, size_t region) {
  LimiterOptions o;
  o.id = "world";
  o.region.global = true;
  o.region.mode = mode;
  o.region.refresh = kRefresh;
  std::sort(shares.begin(), shares.end(),
            [](const RegionShare& a, const RegionShare& b) { return a.region < b.region; });
  o.region.shares = std::move(shares);
  o.region.region = RegionHarness::kRegions[region];
  o.region.global_spec = {
      .algorithm = Algorithm::kFixedWindow, .limit = kLimit, .period = seconds(1)};
  return o;
}

// The three regions of one limit, as three sluiced nodes hold it (the config's work done here:
// each limiter is made with its region's static part).
struct World {
  World(RegionHarness& h, RegionMode mode, std::vector<RegionShare> shares) {
    for (size_t i = 0; i < 3; ++i) {
      stores[i] = h.Open(i, mode == RegionMode::kLeased);
      const LimiterOptions o = Options(mode, shares, i);
      auto part = RegionPart(o.region.global_spec, SharedUnits(kLimit, o.region.OwnShare()));
      EXPECT_TRUE(part.has_value());
      auto made = stores[i]->MakeLimiter(*part, o);
      EXPECT_TRUE(made.has_value()) << made.error().message;
      limiters[i] = std::move(*made);
    }
  }
  int64_t Part(size_t i) const {
    const StatsReader s = ReadStats(*limiters[i]);
    return s.Has("sluice_region_share_units")
               ? static_cast<int64_t>(s.Value("sluice_region_share_units"))
               : limiters[i]->spec().limit;
  }
  std::array<std::shared_ptr<Store>, 3> stores;
  std::array<std::unique_ptr<Limiter>, 3> limiters;
};

// What the traffic got: admissions per region per window (keyed by the window's end, in
// seconds), and the largest part each region held while it ran.
struct Tally {
  std::map<int64_t, std::array<int64_t, 3>> admitted;
  std::map<int64_t, std::array<int64_t, 3>> max_part;
  std::array<int64_t, 3> total{};
  std::array<int64_t, 3> offered{};
};

// Sends per tick (10 ms) offered[i] requests to region i until `until` holds or the deadline
// passes; returns whether `until` held.
bool Drive(World& w, std::array<int, 3> offered, Tally& t, const std::function<bool()>& until,
           milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    for (size_t i = 0; i < 3; ++i) {
      for (int k = 0; k < offered[i]; ++k) {
        ++t.offered[i];
        const LimitCheck check{w.limiters[i].get(), "key", 1};
        Decision d;
        w.stores[i]->DecideAll(std::span(&check, 1), Timestamp{}, std::span(&d, 1));
        const auto window_end = std::chrono::system_clock::now() + d.reset_after;
        const int64_t id = std::chrono::duration_cast<milliseconds>(window_end.time_since_epoch() +
                                                                    milliseconds(500))
                               .count() /
                           1000;
        const int64_t part = w.Part(i);
        auto& mp = t.max_part[id];
        mp[i] = std::max(mp[i], part);
        if (d.allowed && !d.degraded) {
          ++t.admitted[id][i];
          ++t.total[i];
        }
      }
    }
    if (until && until()) return true;
    std::this_thread::sleep_for(kTick);  // pacing the offered load, not a wait
  }
  return !until;
}

// The stated bound (docs/regions.md): in each window, the regions together admit at most the
// sum of the largest part each held during it; and no more than their static parts allow if
// regions never talk.
void ExpectWithinBound(const Tally& t) {
  for (const auto& [id, a] : t.admitted) {
    const auto& p = t.max_part.at(id);
    EXPECT_LE(a[0] + a[1] + a[2], p[0] + p[1] + p[2])
        << "window " << id << ": admitted " << a[0] << "/" << a[1] << "/" << a[2] << ", parts "
        << p[0] << "/" << p[1] << "/" << p[2];
    for (size_t i = 0; i < 3; ++i) EXPECT_LE(a[i], p[i]) << "window " << id << " region " << i;
  }
}

TEST(StaticRegions, EachRegionAdmitsExactlyItsPart) {
  RegionHarness h;
  World w(h, RegionMode::kStatic, {{"us", 500'000}, {"eu", 300'000}, {"ap", 200'000}});
  // One burst far over every part. A window boundary may fall inside it, so the oracle is per
  // window: in each, a region admits exactly min(what it was offered, its part).
  const std::array<int64_t, 3> part = {500, 300, 200};
  for (size_t i = 0; i < 3; ++i) {
    std::map<int64_t, std::pair<int64_t, int64_t>> offered_admitted;  // by window end, seconds
    for (int k = 0; k < 700; ++k) {
      const Decision d = w.limiters[i]->Decide("key", Timestamp{}, 1);
      const auto window_end = std::chrono::system_clock::now() + d.reset_after;
      const int64_t id = std::chrono::duration_cast<milliseconds>(window_end.time_since_epoch() +
                                                                  milliseconds(500))
                             .count() /
                         1000;
      auto& [offered, admitted] = offered_admitted[id];
      ++offered;
      admitted += d.allowed;
    }
    for (const auto& [id, oa] : offered_admitted) {
      EXPECT_EQ(oa.second, std::min(oa.first, part[i]))
          << "region " << i << ", window " << id << ": offered " << oa.first;
    }
  }
}

TEST(LeasedRegions, SkewedTrafficMovesTheLimitToTheBusyRegion) {
  RegionHarness h;
  World w(h, RegionMode::kLeased, {{"us", 340'000}, {"eu", 330'000}, {"ap", 330'000}});
  Tally t;
  // 30:1:1 (more skewed than 90/5/5), about 2.5 limits: us gets most of the limit once its demand
  // is seen.
  const bool moved = Drive(
      w, {30, 1, 1}, t, [&] { return w.Part(0) >= kBusyPartAtLeast; }, seconds(5));
  EXPECT_TRUE(moved) << "us holds " << w.Part(0) << " of " << kLimit << ", eu " << w.Part(1)
                     << ", ap " << w.Part(2);
  Tally steady;
  Drive(w, {30, 1, 1}, steady, nullptr, milliseconds(2100));
  ExpectWithinBound(t);
  ExpectWithinBound(steady);
  // The quiet regions get what they ask, the busy one the rest: most of the limit (a 2.1 s run
  // may span two windows and parts of two more that the traffic before it had already spent).
  // A quiet region's part is its demand plus 25%, its demand the larger of its rate over the
  // last refresh (100 ms here) and over the last second: on a loaded machine the test thread's
  // ticks bunch, the offered load rises by more than that within a second, and a few of its
  // requests are refused until the next refresh. Hence three quarters, not all.
  EXPECT_GE(steady.total[1] * 4, steady.offered[1] * 3) << steady.total[1];
  EXPECT_GE(steady.total[2] * 4, steady.offered[2] * 3) << steady.total[2];
  EXPECT_GE(steady.total[0], kLimit * 12 / 10) << steady.total[0] << " of " << steady.offered[0];
  EXPECT_GT(steady.total[0], 3 * (steady.total[1] + steady.total[2]));
}

TEST(LeasedRegions, CutLinkKeepsServingWithinBoundAndRestoreReconverges) {
  RegionHarness h;
  World w(h, RegionMode::kLeased, {{"us", 340'000}, {"eu", 330'000}, {"ap", 330'000}});
  Tally t;
  ASSERT_TRUE(Drive(
      w, {30, 1, 1}, t, [&] { return w.Part(0) >= kBusyPartAtLeast; }, seconds(5)));
  h.link().Cut();
  // Every region keeps deciding: on its grant until it expires, then on its static part.
  Tally cut;
  const bool fell_back = Drive(
      w, {30, 1, 1}, cut, [&] { return w.Part(0) == 340 && w.Part(1) == 330 && w.Part(2) == 330; },
      seconds(3));
  EXPECT_TRUE(fell_back) << w.Part(0) << " " << w.Part(1) << " " << w.Part(2);
  Drive(w, {30, 1, 1}, cut, nullptr, milliseconds(1100));
  ExpectWithinBound(t);
  ExpectWithinBound(cut);
  for (size_t i = 0; i < 3; ++i) EXPECT_GT(cut.total[i], 0) << "region " << i;
  EXPECT_GT(ReadStats(*w.limiters[0]).Value("sluice_region_cutoff_decisions_total"), 0);
  EXPECT_GT(ReadStats(*w.stores[0]).Value("sluice_region_global_sync_age_seconds"), 0.3);
  h.link().Restore();
  Tally back;
  EXPECT_TRUE(Drive(
      w, {30, 1, 1}, back, [&] { return w.Part(0) >= kBusyPartAtLeast; }, seconds(5)))
      << "us holds " << w.Part(0) << ", eu " << w.Part(1) << ", ap " << w.Part(2);
  ExpectWithinBound(back);
}

// A global store that goes silent holds each refresh for the whole exchange timeout (1 s here,
// ten refreshes): a part above the static one must still end 2 refreshes after it was asked for,
// on the request path, before the regions below their static parts take theirs back.
TEST(LeasedRegions, ASilentGlobalStoreEndsAPartAboveTheStaticOneOnTime) {
  RegionHarness h;
  World w(h, RegionMode::kLeased, {{"us", 340'000}, {"eu", 330'000}, {"ap", 330'000}});
  Tally t;
  ASSERT_TRUE(Drive(
      w, {30, 1, 1}, t, [&] { return w.Part(0) >= kBusyPartAtLeast; }, seconds(5)));
  h.link().Silence();
  const auto silenced = std::chrono::steady_clock::now();
  Tally silent;
  int64_t most = 0;
  const bool fell_back = Drive(
      w, {30, 1, 1}, silent,
      [&] {
        most = std::max(most, w.Part(0) + w.Part(1) + w.Part(2));
        return w.Part(0) == 340;
      },
      seconds(3));
  const auto took = std::chrono::steady_clock::now() - silenced;
  EXPECT_TRUE(fell_back) << w.Part(0);
  // Asked at most a refresh (100 ms) and a round trip before the silence, kept 2 refreshes.
  EXPECT_LT(took, milliseconds(600)) << "the refresher's timeout is 1 s";
  EXPECT_LE(most, kLimit) << "the parts in force while the grants ended";
  ExpectWithinBound(silent);
  h.link().Restore();
}

}  // namespace
}  // namespace sluice
