// `sluice simulate overload`: every call has exactly one outcome, a run is a function of its
// seed, the backend never holds more than a fixed limit while no client gave up, priorities are
// shed lowest first, and the conclusion the docs draw (goodput collapses without a limit and
// holds with one) holds on the default scenario.
#include "cli/overload.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace sluice::cli {
namespace {

using namespace std::chrono_literals;

OverloadOptions Small() {
  OverloadOptions o;
  o.workers = 20;
  o.rate = 1200;  // 60% of 20 workers at 10 ms
  o.duration = 12s;
  o.spike_start = 4s;
  o.spike_length = 4s;
  return o;
}

double Capacity(const OverloadOptions& o) {
  return static_cast<double>(o.workers) / std::chrono::duration<double>(o.service).count();
}

TEST(OverloadTest, EveryCallHasExactlyOneOutcome) {
  for (OverloadPolicy p : kAllOverloadPolicies) {
    const OverloadResult r = SimulateOverload(p, Small());
    int64_t offered = 0, by_second = 0;
    for (const PriorityCounts& c : r.by_priority) {
      EXPECT_EQ(c.offered, c.shed + c.good + c.timed_out) << OverloadPolicyName(p);
      offered += c.offered;
    }
    for (const OverloadSecond& s : r.seconds) by_second += s.offered;
    EXPECT_EQ(by_second, offered);
    // Poisson arrivals at 1200/s for 8 s and 3600/s for 4 s: 24000 expected.
    EXPECT_NEAR(static_cast<double>(offered), 24000, 24000 * 0.03);
  }
}

TEST(OverloadTest, ARunIsAFunctionOfItsSeedAndEveryPolicySeesTheSameCalls) {
  OverloadOptions o = Small();
  const OverloadResult a = SimulateOverload(OverloadPolicy::kAdaptive, o);
  const OverloadResult b = SimulateOverload(OverloadPolicy::kAdaptive, o);
  const OverloadResult none = SimulateOverload(OverloadPolicy::kNone, o);
  for (int p = 0; p < kPriorities; ++p) {
    EXPECT_EQ(a.by_priority[p].good, b.by_priority[p].good);
    EXPECT_EQ(a.by_priority[p].shed, b.by_priority[p].shed);
    EXPECT_EQ(a.by_priority[p].offered, none.by_priority[p].offered);
  }
  EXPECT_EQ(a.p99, b.p99);
  o.seed = 2;
  EXPECT_NE(SimulateOverload(OverloadPolicy::kAdaptive, o).by_priority[kLow].offered,
            a.by_priority[kLow].offered);
}

TEST(OverloadTest, AFixedLimitBoundsTheBackendWhileNoClientGivesUp) {
  OverloadOptions o = Small();
  o.fixed_limit = 30;
  const OverloadResult r = SimulateOverload(OverloadPolicy::kFixed, o);
  int64_t timed_out = 0;
  for (const PriorityCounts& c : r.by_priority) timed_out += c.timed_out;
  ASSERT_EQ(timed_out, 0);
  for (const OverloadSecond& s : r.seconds) {
    EXPECT_LE(s.backend, 30);
    EXPECT_EQ(s.limit, 30);
  }
  EXPECT_EQ(SimulateOverload(OverloadPolicy::kNone, o).by_priority[kLow].shed, 0);
}

TEST(OverloadTest, LowerPrioritiesAreShedFirst) {
  for (OverloadPolicy p : {OverloadPolicy::kFixed, OverloadPolicy::kAdaptive}) {
    const OverloadResult r = SimulateOverload(p, Small());
    auto shed_share = [&](Priority q) {
      return static_cast<double>(r.by_priority[q].shed) /
             static_cast<double>(r.by_priority[q].offered);
    };
    EXPECT_GT(shed_share(kLow), 0.2) << OverloadPolicyName(p);  // the spike is 1.8x capacity
    EXPECT_GT(shed_share(kLow), shed_share(kNormal)) << OverloadPolicyName(p);
    EXPECT_GE(shed_share(kNormal), shed_share(kCritical)) << OverloadPolicyName(p);
    // Critical calls alone (20% of 3x 60%) are well within capacity: none is refused.
    EXPECT_EQ(r.by_priority[kCritical].shed, 0) << OverloadPolicyName(p);
  }
}

TEST(OverloadTest, GoodputCollapsesWithoutALimitAndHoldsWithOne) {
  const OverloadOptions o;  // the documented scenario
  const double capacity = Capacity(o);
  const double spike = std::chrono::duration<double>(o.spike_length).count();
  const OverloadResult none = SimulateOverload(OverloadPolicy::kNone, o);
  EXPECT_LT(static_cast<double>(none.spike_good) / spike, 0.1 * capacity);
  EXPECT_EQ(none.p99, o.deadline);
  for (OverloadPolicy p : {OverloadPolicy::kFixed, OverloadPolicy::kAdaptive}) {
    const OverloadResult r = SimulateOverload(p, o);
    EXPECT_GT(static_cast<double>(r.spike_good) / spike, 0.95 * capacity) << OverloadPolicyName(p);
    EXPECT_LT(r.p99, o.deadline / 4) << OverloadPolicyName(p);
  }
}

TEST(OverloadTest, BelowCapacityEveryPolicyAnswersEveryCall) {
  OverloadOptions o = Small();
  o.spike_factor = 1;
  o.rate = 0.5 * Capacity(o);
  for (OverloadPolicy p : kAllOverloadPolicies) {
    const OverloadResult r = SimulateOverload(p, o);
    for (const PriorityCounts& c : r.by_priority) {
      EXPECT_EQ(c.timed_out, 0) << OverloadPolicyName(p);
      // The adaptive limit starts at 20 and may shed a few calls in its first windows.
      EXPECT_LE(c.shed, c.offered / 100) << OverloadPolicyName(p);
    }
  }
}

TEST(OverloadTest, BadOptionsAreRefusedByName) {
  auto bad = [](auto change) {
    OverloadOptions o;
    change(o);
    auto r = ValidateOverloadOptions(o);
    return r ? std::string() : r.error().message;
  };
  EXPECT_NE(bad([](auto& o) { o.workers = 0; }).find("--workers"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.rate = -1; }).find("--rate"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.spike_factor = 0.5; }).find("--spike"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.spike_start = 25s; }).find("--spike-start"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.deadline = 0s; }).find("--deadline"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.fixed_limit = 0; }).find("--fixed-limit"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.rate = 1e7; }).find("20 million"), std::string::npos);
  EXPECT_EQ(bad([](auto&) {}), "");
  EXPECT_FALSE(ParseOverloadPolicy("aimd"));
  EXPECT_EQ(*ParseOverloadPolicy("adaptive"), OverloadPolicy::kAdaptive);
}

TEST(OverloadTest, TheCsvHasAHeaderAndARowPerPolicy) {
  const OverloadOptions o = Small();
  std::vector<OverloadResult> results = {SimulateOverload(OverloadPolicy::kNone, o),
                                         SimulateOverload(OverloadPolicy::kFixed, o)};
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buf, &size);
  ASSERT_TRUE(PrintOverload(results, o, OverloadOutput::kCsv, out));
  std::fclose(out);
  const std::string text(buf, size);
  std::free(buf);
  EXPECT_EQ(text.rfind("policy,workers,service_ms,", 0), 0u) << text;
  EXPECT_NE(text.find("\nnone,20,10.000,1200,3,"), std::string::npos) << text;
  EXPECT_NE(text.find("\nfixed,20,10.000,1200,3,4000,4000,200.000,100,1,"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace sluice::cli
