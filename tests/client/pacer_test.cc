// The pacer against simulated servers: a sluice limiter (the real algorithms, memory store)
// answering with the draft-11 fields as sluiced writes them (q, w; r, t rounded up to seconds),
// and a client that would send every millisecond if it could. Paced, it must take no 429 in a
// minute of simulated time and still use most of the quota. The oracle is the server's own
// decisions: an independent limiter, not the pacer's arithmetic.
#include "sluice/client/pacer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/memory_store.h"

namespace sluice::client {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  int64_t admitted = 0;
  int64_t rejected = 0;
};

int64_t CeilSeconds(Duration d) { return (d.count() + 999'999'999) / 1'000'000'000; }

// Sends as fast as the pacer lets (at most one request a millisecond) for `run` of simulated
// time. With state_fields false the server sends only RateLimit-Policy.
Outcome RunPaced(const LimitSpec& spec, Duration run, bool state_fields = true) {
  auto limiter = MakeMemoryLimiter(spec);
  EXPECT_TRUE(limiter.has_value());
  Pacer pacer;
  Outcome out;
  const std::string policy =
      "\"p\";q=" + std::to_string(spec.limit) + ";w=" + std::to_string(CeilSeconds(spec.period));
  Timestamp now = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);  // a whole second
  const Timestamp end = now + run;
  while (true) {
    now = pacer.NextSendTime(now);
    if (now >= end) break;
    pacer.OnSend(now);
    const Decision d = (*limiter)->Decide("k", now, 1);
    (d.allowed ? out.admitted : out.rejected)++;
    const std::string state = "\"p\";r=" + std::to_string(d.remaining) +
                              ";t=" + std::to_string(CeilSeconds(d.reset_after));
    const std::string retry = std::to_string(std::max<int64_t>(1, CeilSeconds(d.retry_after)));
    std::vector<Header> headers = {{"RateLimit-Policy", policy}};
    if (state_fields) headers.push_back({"RateLimit", state});
    if (!d.allowed) headers.push_back({"Retry-After", retry});
    pacer.Observe(ReadServerHints(headers, now), now);
    now += 1ms;
  }
  return out;
}

TEST(PacerTest, APacedClientTakesNoRejectionFromAnyAlgorithm) {
  struct Case {
    Algorithm algorithm;
    int64_t limit;
    Duration period;
  };
  for (const Case& c :
       {Case{Algorithm::kTokenBucket, 10, 1s}, Case{Algorithm::kFixedWindow, 100, 60s},
        Case{Algorithm::kSlidingWindowLog, 20, 10s},
        Case{Algorithm::kSlidingWindowCounter, 50, 60s}, Case{Algorithm::kGcra, 5, 1s},
        Case{Algorithm::kLeakyBucket, 10, 1s}}) {
    const LimitSpec spec{c.algorithm, c.limit, c.period};
    const Outcome o = RunPaced(spec, 300s);
    const double quota = static_cast<double>(c.limit) * (300s / c.period);
    EXPECT_EQ(o.rejected, 0) << AlgorithmName(c.algorithm);
    // Used at least half of what the limit allows over the run (the pacer spreads what remains
    // over whole seconds, rounded up, so it leaves some on the table).
    EXPECT_GE(static_cast<double>(o.admitted), 0.5 * quota) << AlgorithmName(c.algorithm);
    EXPECT_LE(static_cast<double>(o.admitted), quota + static_cast<double>(c.limit));
  }
}

TEST(PacerTest, WithOnlyThePolicyTheClientSendsOneRequestPerWindowOverQuota) {
  const LimitSpec spec{Algorithm::kFixedWindow, 10, 1s};
  const Outcome o = RunPaced(spec, 60s, /*state_fields=*/false);
  // The first answer teaches the policy; from then on one request every 100 ms.
  EXPECT_EQ(o.rejected, 0);
  EXPECT_GE(o.admitted, 590);
}

TEST(PacerTest, AnUnpacedClientWouldHaveBeenRejected) {
  // The same server and demand without a pacer: the test's server does reject, so the zero
  // above means something.
  auto limiter = MakeMemoryLimiter({Algorithm::kTokenBucket, 10, 1s});
  int64_t rejected = 0;
  for (int ms = 0; ms < 10000; ++ms) {
    if (!(*limiter)->Decide("k", FromNanos(int64_t{ms} * 1'000'000), 1).allowed) ++rejected;
  }
  EXPECT_GT(rejected, 9000);
}

TEST(PacerTest, RetryAfterHoldsEverySend) {
  Pacer pacer;
  const Timestamp t0 = FromNanos(0);
  EXPECT_EQ(pacer.NextSendTime(t0), t0);  // nothing known: nothing held
  const std::vector<Header> headers = {{"Retry-After", "5"}};
  pacer.Observe(ReadServerHints(headers, t0), t0);
  EXPECT_EQ(pacer.NextSendTime(t0 + 1s), t0 + 5s);
  EXPECT_EQ(pacer.NextSendTime(t0 + 6s), t0 + 6s);
}

TEST(PacerTest, TheTightestOfSeveralPoliciesGoverns) {
  Pacer pacer;
  const Timestamp t0 = FromNanos(0);
  const std::vector<Header> headers = {{"RateLimit-Policy", R"("sec";q=10;w=1, "min";q=60;w=60)"},
                                       {"RateLimit", R"("sec";r=9;t=1, "min";r=0;t=30)"}};
  pacer.OnSend(t0);
  pacer.Observe(ReadServerHints(headers, t0), t0);
  EXPECT_EQ(pacer.NextSendTime(t0), t0 + 30s);  // "min" is spent until its reset
}

}  // namespace
}  // namespace sluice::client
