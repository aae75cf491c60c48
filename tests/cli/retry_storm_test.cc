// `sluice simulate retry-storm`: the anchor's conclusion (AWS Architecture Blog, "Exponential
// Backoff And Jitter") reproduced, and the plain exponential case against a closed form worked
// out here: with a bucket that holds one token and refills between waves, each lockstep wave
// lets exactly one client through, so N clients make N + (N-1) + ... + 1 calls and the last
// succeeds at the sum of the first N-1 capped delays.
#include "cli/retry_storm.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sluice::cli {
namespace {

using namespace std::chrono_literals;

RetryStormOptions Storm(int64_t clients, uint64_t seed = 1) {
  RetryStormOptions o;
  o.clients = clients;
  o.limit = 100;
  o.per = 1s;
  o.burst = 1;
  o.base = 100ms;
  o.cap = 10s;
  o.seed = seed;
  return o;
}

TEST(RetryStormTest, WithoutJitterClientsRetryInLockstepWavesOfOneSuccessEach) {
  const int64_t n = 60;
  const RetryStormResult r = SimulateRetryStorm(RetryPolicy::kExponential, Storm(n));
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.calls, n * (n + 1) / 2);
  EXPECT_EQ(r.rejected, r.calls - n);
  Duration last{0};
  for (int k = 0; k < n - 1; ++k)
    last += std::min<Duration>(10s, 100ms * (int64_t{1} << std::min(k, 20)));
  EXPECT_EQ(r.time_to_all_succeeded, last);
  EXPECT_EQ(r.largest_retry_wave, n - 1);  // every client that failed, in the same millisecond
}

TEST(RetryStormTest, FullJitterNeedsFarFewerCallsAndBreaksTheWaves) {
  for (uint64_t seed : {1, 2, 3}) {
    const RetryStormOptions o = Storm(100, seed);
    const RetryStormResult none = SimulateRetryStorm(RetryPolicy::kExponential, o);
    const RetryStormResult full = SimulateRetryStorm(RetryPolicy::kFull, o);
    EXPECT_TRUE(full.complete);
    EXPECT_LT(full.calls * 5, none.calls) << "seed " << seed;
    EXPECT_LT(full.time_to_all_succeeded * 20, none.time_to_all_succeeded) << "seed " << seed;
    EXPECT_LT(full.largest_retry_wave, 10) << "seed " << seed;
    // Every jittered variant beats no jitter; full jitter is within 2x of the best of them.
    int64_t best = full.calls;
    for (RetryPolicy p : {RetryPolicy::kEqual, RetryPolicy::kDecorrelated}) {
      const RetryStormResult j = SimulateRetryStorm(p, o);
      EXPECT_TRUE(j.complete);
      EXPECT_LT(j.calls * 5, none.calls) << RetryPolicyName(p);
      best = std::min(best, j.calls);
    }
    EXPECT_LT(full.calls, 2 * best);
  }
}

TEST(RetryStormTest, ImmediateRetriesFinishSoonestButCostTheMostCalls) {
  const RetryStormOptions o = Storm(50);
  const RetryStormResult now = SimulateRetryStorm(RetryPolicy::kImmediate, o);
  const RetryStormResult full = SimulateRetryStorm(RetryPolicy::kFull, o);
  EXPECT_TRUE(now.complete);
  // One success per 10 ms (100/s, one token), one retry per client per ms in between.
  EXPECT_EQ(now.time_to_all_succeeded, 490ms);
  EXPECT_GT(now.calls, 20 * full.calls);
}

TEST(RetryStormTest, TheSameSeedGivesTheSameRun) {
  const RetryStormResult a = SimulateRetryStorm(RetryPolicy::kDecorrelated, Storm(80, 7));
  const RetryStormResult b = SimulateRetryStorm(RetryPolicy::kDecorrelated, Storm(80, 7));
  EXPECT_EQ(a.calls, b.calls);
  EXPECT_EQ(a.time_to_all_succeeded, b.time_to_all_succeeded);
}

TEST(RetryStormTest, ARunStopsAtMaxCallsAndSaysItIsIncomplete) {
  RetryStormOptions o = Storm(200);
  o.max_calls = 1000;
  const RetryStormResult r = SimulateRetryStorm(RetryPolicy::kImmediate, o);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.calls, 1000);
}

TEST(RetryStormTest, BadOptionsAreRefusedByName) {
  RetryStormOptions o = Storm(0);
  EXPECT_NE(ValidateRetryStormOptions(o).error().message.find("--clients"), std::string::npos);
  o = Storm(10);
  o.cap = 1ms;
  EXPECT_NE(ValidateRetryStormOptions(o).error().message.find("--cap"), std::string::npos);
  o = Storm(10);
  o.burst = 0;
  EXPECT_NE(ValidateRetryStormOptions(o).error().message.find("--burst"), std::string::npos);
  EXPECT_FALSE(ParseRetryPolicy("jittery"));
  EXPECT_EQ(*ParseRetryPolicy("exponential"), RetryPolicy::kExponential);
}

}  // namespace
}  // namespace sluice::cli
