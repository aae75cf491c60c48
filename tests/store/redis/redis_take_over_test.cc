// Changing a limit mid-period on Redis against the memory store as the oracle: random specs of
// each algorithm the scripts convert, random usage, then a new spec (a newer generation) whose
// scripts find the key written under the old one -- every decision after the change as the
// memory store decides it after Limiter::TakeOver at the same instant.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <random>
#include <string>

#include "sluice/memory_store.h"
#include "sluice/redis_store.h"
#include "store/redis/redis_script_choice.h"
#include "store/redis/redis_script_multi.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kDayNs = int64_t{86400} * 1'000'000'000;
const Timestamp kT0 = FromNanos(20010 * kDayNs);

class RedisTakeOver : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    RedisStoreOptions o;
    o.port = server_->port();
    o.use_server_time = false;
    o.command_timeout = milliseconds(5000);
    auto redis = OpenRedisStore(o);
    ASSERT_TRUE(redis.has_value()) << redis.error().message;
    redis_ = *redis;
    auto memory = OpenMemoryStore();
    ASSERT_TRUE(memory.has_value()) << memory.error().message;
    memory_ = *memory;
  }

  static std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, const std::string& id,
                                       int64_t generation) {
    auto made = store.MakeLimiter(spec, {.id = id, .spec_generation = generation});
    EXPECT_TRUE(made.has_value()) << made.error().message;
    return made ? std::move(*made) : nullptr;
  }

  static std::unique_ptr<testing::RedisServer> server_;
  std::shared_ptr<Store> redis_;
  std::shared_ptr<Store> memory_;
};
std::unique_ptr<testing::RedisServer> RedisTakeOver::server_;

// A spec of `a` the narrow scripts decide exactly (the conversion's range on Redis).
LimitSpec RandomSpec(std::mt19937_64& rng, Algorithm a, Duration period) {
  LimitSpec spec{a, static_cast<int64_t>(1 + rng() % 400), period};
  if (HasBurst(a) && rng() % 2 == 0) spec.burst = spec.limit + static_cast<int64_t>(rng() % 400);
  return spec;
}

bool Narrow(const LimitSpec& spec) {
  auto call = internal::ScriptFor(spec);
  return call.has_value() && call->id <= internal::kWideScriptId;
}

// Decides the same requests on both, at whole-millisecond times from `t` (the first at `t`
// itself), expecting the same answers (the memory store's are the oracle's).
void DecideBoth(std::mt19937_64& rng, Limiter& memory, Limiter& redis, Timestamp& t, int n,
                int64_t max_cost, const std::string& what) {
  for (int i = 0; i < n; ++i) {
    if (i > 0) t += milliseconds(rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 20'000));
    const int64_t cost = static_cast<int64_t>(rng() % (max_cost + 1));
    const Decision want = memory.Decide("k", t, cost);
    const Decision got = redis.Decide("k", t, cost);
    ASSERT_FALSE(got.degraded) << what;
    ASSERT_EQ(got.allowed, want.allowed) << what << " request " << i << " cost " << cost;
    ASSERT_EQ(got.remaining, want.remaining) << what << " request " << i << " cost " << cost;
  }
}

TEST_F(RedisTakeOver, DecidesAfterAChangeAsTheMemoryStore) {
  std::mt19937_64 rng(27);
  constexpr std::array kAlgorithms = {Algorithm::kTokenBucket, Algorithm::kGcra,
                                      Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
                                      Algorithm::kSlidingWindowCounter};
  constexpr std::array kPeriods = {Duration(std::chrono::seconds(10)),
                                   Duration(std::chrono::minutes(1)),
                                   Duration(std::chrono::hours(1))};
  int cases = 0;
  for (int c = 0; c < 150; ++c) {
    const Algorithm a = kAlgorithms[c % kAlgorithms.size()];
    const Duration period = kPeriods[rng() % kPeriods.size()];
    const LimitSpec from = RandomSpec(rng, a, period);
    // A bucket may change its period too; a window keeps it (another length drops the counts).
    const LimitSpec to =
        RandomSpec(rng, a, HasBurst(a) ? kPeriods[rng() % kPeriods.size()] : period);
    if (!Narrow(from) || !Narrow(to) || from == to) continue;
    ++cases;
    const std::string id = "carry" + std::to_string(c);
    const std::string what = DescribeLimitSpec(from) + " -> " + DescribeLimitSpec(to);
    auto m1 = Make(*memory_, from, id, 1);
    auto r1 = Make(*redis_, from, id, 1);
    ASSERT_TRUE(m1 && r1);
    Timestamp t = kT0;
    DecideBoth(rng, *m1, *r1, t, 12, from.Capacity() / 3 + 1, what + " (before)");
    t += milliseconds(rng() % 5000);
    auto m2 = Make(*memory_, to, id, 2);
    auto r2 = Make(*redis_, to, id, 2);
    ASSERT_TRUE(m2 && r2);
    // Redis converts the key at its first use, which is at `t`: the memory store's take-over
    // there is the oracle (docs/quotas.md: a reload's conversion on Redis waits for that use).
    m2->TakeOver(*m1, t);
    DecideBoth(rng, *m2, *r2, t, 12, to.Capacity() / 3 + 1, what + " (after)");
  }
  EXPECT_GE(cases, 100);
}

}  // namespace
}  // namespace sluice
