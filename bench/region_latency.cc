// p99 check latency in one region with a slow link to the global store against a fast one
// (issue 17: no request waits on the global store). Starts the test harness's redis-servers
// (three regions, one global behind a TCP proxy), makes a leased limit of scope global in region
// us, and times DecideAll calls while the region layer refreshes its part every 100 ms over a
// link of 0 ms and of 50 ms each way, in alternating runs of the same process.
//
//   build/bin/region_latency [pairs=3] [decisions per run=20000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "sluice/region_scope.h"
#include "support/region_harness.h"
#include "support/stats_reader.h"

namespace {

using sluice::testing::RegionHarness;
using Clock = std::chrono::steady_clock;

struct Run {
  double p50_us, p99_us;
  uint64_t leases;
};

Run Measure(RegionHarness& h, std::chrono::milliseconds delay, int decisions, int id) {
  h.link().SetDelay(delay);
  auto store = h.Open(0);
  sluice::LimiterOptions o;
  o.id = "bench" + std::to_string(id);  // a fresh limit: no state from the run before
  o.region = {.global = true,
              .mode = sluice::RegionMode::kLeased,
              .refresh = std::chrono::milliseconds(100),
              .shares = {{"ap", 330'000}, {"eu", 330'000}, {"us", 340'000}},
              .region = "us",
              .global_spec = {.algorithm = sluice::Algorithm::kFixedWindow,
                              .limit = 1'000'000,
                              .period = std::chrono::seconds(1)}};
  auto limiter = store->MakeLimiter(*sluice::RegionPart(o.region.global_spec, 340'000), o);
  if (!limiter) {
    std::fprintf(stderr, "%s\n", limiter.error().message.c_str());
    std::exit(1);
  }
  std::vector<double> us;
  us.reserve(decisions);
  for (int i = 0; i < decisions; ++i) {
    const std::string key = "k" + std::to_string(i % 64);
    const sluice::LimitCheck check{limiter->get(), key, 1};
    sluice::Decision d;
    const auto start = Clock::now();
    store->DecideAll(std::span(&check, 1), sluice::Timestamp{}, std::span(&d, 1));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  const auto leases = static_cast<uint64_t>(
      sluice::testing::ReadStats(**limiter).Value("sluice_region_global_leases_total"));
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 99 / 100], leases};
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::atoi(argv[1]) : 3;
  const int decisions = argc > 2 ? std::atoi(argv[2]) : 20000;
  RegionHarness h;
  std::printf("| pair | link | p50 us | p99 us | global grants during the run |\n");
  std::printf("|---|---|---|---|---|\n");
  int id = 0;
  for (int p = 1; p <= pairs; ++p) {
    for (int ms : {0, 50}) {
      const Run r = Measure(h, std::chrono::milliseconds(ms), decisions, ++id);
      std::printf("| %d | %d ms | %.1f | %.1f | %llu |\n", p, ms, r.p50_us, r.p99_us,
                  static_cast<unsigned long long>(r.leases));
    }
  }
  return 0;
}
