// Priority shedding's reserve (LimitCheck::reserve) in the Redis store, against a real
// redis-server. Every algorithm, and the wide-arithmetic scripts, leave a check's reserve free:
// of a limit of 100, a low request (reserve 40) gets 60, a normal one (reserve 20) 80 and a
// critical one (none) all 100 -- the example. A check refused for its reserve says when
// cost + reserve fits (hand-computed below), or never when that passes the capacity; a
// multi-limit request with such a check is refused whole; a charge ignores its reserve. A trace
// of mixed priorities decides as the pure algorithms (include/sluice/*.h) asked whether
// cost + reserve fits, and then charged only the cost.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/redis_store.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "store/redis/redis_script_choice.h"
#include "store/redis/redis_script_multi.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// 2023-11-15T00:00:00Z: a UTC day's start, so an hour's and a day's window's too.
constexpr int64_t kDay0S = 1'700'006'400;
Timestamp At(Duration since_day0) { return FromNanos(kDay0S * 1'000'000'000) + since_day0; }

// 30001 per day: a rate whose scaled capacity passes 2^53 (redis_script_wide.h). One unit of it
// refills (or drains) in ceil(86400 s / 30001) us.
constexpr int64_t kOddPerDay = 30001;
const Duration kOddUnit = microseconds((86'400'000'000 + kOddPerDay - 1) / kOddPerDay);

// One limit to shed on: low (reserve 2/5 of the capacity), normal (1/5) and critical (none)
// requests of `cost`, all at 00:10. `low_retry`: when the low request refused after low's share
// was taken fits (hand-computed: cost + reserve = 41 of 100, or 12100 of 30000).
struct Case {
  std::string name;
  LimitSpec spec;
  int64_t cost = 1;
  bool wide = false;
  Duration low_retry{0};
};

LimitSpec Bucket(Algorithm a, int64_t limit, Duration period, int64_t burst, bool shaper = false) {
  return LimitSpec{a, limit, period, burst, shaper};
}

std::vector<Case> Cases() {
  LimitSpec calendar{Algorithm::kFixedWindow, 100, hours(24), 0, false};
  calendar.calendar = {CalendarUnit::kDay, "UTC", false};
  // The buckets: 100 per hour, one hit per 36 s; 41 wanted with 40 left is one hit short.
  // The windows: the next one starts at 01:00 (a day's at 24:00). The sliding window counter:
  // from 01:00, 60 hits of the hour before weigh 60 x (1 - t/1h), and 60 x (1 - t/1h) + 41 <= 100
  // from t = 1 min. The log: the 60 hits, all taken at 00:10, leave at 01:10.
  std::vector<Case> cases = {
      {"token_bucket", Bucket(Algorithm::kTokenBucket, 100, hours(1), 100), 1, false, seconds(36)},
      {"gcra", Bucket(Algorithm::kGcra, 100, hours(1), 100), 1, false, seconds(36)},
      {"leaky_bucket", Bucket(Algorithm::kLeakyBucket, 100, hours(1), 100), 1, false, seconds(36)},
      {"leaky_shaper", Bucket(Algorithm::kLeakyBucket, 100, hours(1), 100, true), 1, false,
       seconds(36)},
      {"fixed_window", {Algorithm::kFixedWindow, 100, hours(1), 0, false}, 1, false, minutes(50)},
      {"calendar_day", calendar, 1, false, hours(23) + minutes(50)},
      {"sliding_window_counter",
       {Algorithm::kSlidingWindowCounter, 100, hours(1), 0, false},
       1,
       false,
       minutes(51)},
      {"sliding_window_log",
       {Algorithm::kSlidingWindowLog, 100, hours(1), 0, false},
       1,
       false,
       hours(1)},
      // Wide: capacity 100 at 30001 per day, one unit short; the counter: 30000 per day in
      // costs of 100, 18000 of the day before weigh 18000 x (1 - t/24h), and with 12100 more
      // that fits 30000 from t = 480 s, so at 24:08 (from 00:10: 23h58m).
      {"token_bucket_wide", Bucket(Algorithm::kTokenBucket, kOddPerDay, hours(24), 100), 1, true,
       kOddUnit},
      {"gcra_wide", Bucket(Algorithm::kGcra, kOddPerDay, hours(24), 100), 1, true, kOddUnit},
      {"leaky_bucket_wide", Bucket(Algorithm::kLeakyBucket, kOddPerDay, hours(24), 100), 1, true,
       kOddUnit},
      {"leaky_shaper_wide", Bucket(Algorithm::kLeakyBucket, kOddPerDay, hours(24), 100, true), 1,
       true, kOddUnit},
      {"sliding_window_counter_wide",
       {Algorithm::kSlidingWindowCounter, 30000, hours(24), 0, false},
       100,
       true,
       hours(23) + minutes(58)},
  };
  return cases;
}

class RedisReserve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    RedisStoreOptions o;
    o.port = server_->port();
    o.use_server_time = false;
    o.limit_id = "unused";
    o.command_timeout = milliseconds(2000);
    o.key_prefix =
        std::string("reserve-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto store = OpenRedisStore(o);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = *store;
  }

  std::unique_ptr<Limiter> Make(const LimitSpec& spec, const std::string& id) {
    auto limiter = store_->MakeLimiter(spec, id, /*fail_open=*/false);
    EXPECT_TRUE(limiter.has_value()) << id << ": " << limiter.error().message;
    return limiter ? std::move(*limiter) : nullptr;
  }

  // One check through the multi-limit script, as the service sends every request.
  Decision Check(Limiter& limiter, std::string_view key, Timestamp now, int64_t cost,
                 int64_t reserve) {
    const LimitCheck check{.limiter = &limiter, .key = key, .cost = cost, .reserve = reserve};
    Decision d;
    store_->DecideAll(std::span(&check, 1), now, std::span(&d, 1));
    return d;
  }

  std::vector<Decision> All(std::span<const LimitCheck> checks, Timestamp now) {
    std::vector<Decision> out(checks.size());
    store_->DecideAll(checks, now, out);
    return out;
  }

  std::vector<Decision> AllAsync(std::span<const LimitCheck> checks, Timestamp now) {
    std::promise<std::vector<Decision>> answered;
    store_->DecideAllAsync(checks, now, [&](std::span<const Decision> out) {
      answered.set_value(std::vector<Decision>(out.begin(), out.end()));
    });
    auto future = answered.get_future();
    EXPECT_EQ(future.wait_for(seconds(30)), std::future_status::ready);
    return future.get();
  }

  static std::unique_ptr<testing::RedisServer> server_;
  std::shared_ptr<RedisStore> store_;
};
std::unique_ptr<testing::RedisServer> RedisReserve::server_;

TEST_F(RedisReserve, TheCasesReachTheScriptsTheyNameAndHoldOneHundredOrThirtyThousand) {
  for (const Case& c : Cases()) {
    auto call = internal::ScriptFor(c.spec);
    ASSERT_TRUE(call.has_value()) << c.name << ": " << call.error().message;
    const bool wide = call->script == &internal::kTokenBucketWideScript ||
                      call->script == &internal::kGcraWideScript ||
                      call->script == &internal::kLeakyBucketWideScript ||
                      call->script == &internal::kSlidingWindowCounterWideScript;
    EXPECT_EQ(wide, c.wide) << c.name;
    EXPECT_EQ(c.spec.Capacity(), c.cost == 1 ? 100 : 30000) << c.name;
  }
}

// Low, then normal, then critical requests at one instant: each is admitted exactly while its
// reserve stays free after it, and its first refusal says when cost + reserve fits.
TEST_F(RedisReserve, EachPriorityGetsWhatItsReserveLeaves) {
  for (const Case& c : Cases()) {
    auto limiter = Make(c.spec, c.name);
    ASSERT_NE(limiter, nullptr);
    const int64_t capacity = c.spec.Capacity();
    const Timestamp now = At(minutes(10));
    int64_t used = 0;
    const std::pair<const char*, int64_t> priorities[] = {
        {"low", capacity * 2 / 5}, {"normal", capacity / 5}, {"critical", 0}};
    for (const auto& [priority, reserve] : priorities) {
      const std::string where = c.name + " " + priority;
      for (int64_t n = 0;; ++n) {
        ASSERT_LE(n, capacity) << where << ": never refused";
        const Decision d = Check(*limiter, "client", now, c.cost, reserve);
        ASSERT_FALSE(d.degraded) << where;
        if (!d.allowed) {
          EXPECT_EQ(d.reason, DecisionReason::kOverLimit) << where;
          EXPECT_EQ(d.remaining, capacity - used) << where << ": the refusal took nothing";
          EXPECT_LT(d.retry_after, kNever) << where;
          if (std::string_view(priority) == "low") {
            EXPECT_EQ(d.retry_after, c.low_retry) << where;
          }
          break;
        }
        used += c.cost;
        EXPECT_EQ(d.remaining, capacity - used) << where;
      }
      // Of 100: low 60, normal 80, critical 100.
      EXPECT_EQ(used, capacity - reserve) << where;
    }
  }
}

// A reserve that no cost fits beside (cost + reserve above the capacity) is refused, over the
// limit and never to be admitted, taking nothing; one that just fits is admitted; a negative
// reserve is none.
TEST_F(RedisReserve, AReserveBeyondTheCapacityIsNeverAdmitted) {
  for (const Case& c : Cases()) {
    auto limiter = Make(c.spec, c.name);
    ASSERT_NE(limiter, nullptr);
    const int64_t capacity = c.spec.Capacity();
    const Timestamp now = At(minutes(10));
    for (int64_t reserve :
         {capacity - c.cost + 1, capacity, capacity + 7, std::numeric_limits<int64_t>::max()}) {
      const Decision d = Check(*limiter, "client", now, c.cost, reserve);
      EXPECT_FALSE(d.allowed) << c.name << " reserve " << reserve;
      EXPECT_FALSE(d.degraded) << c.name;
      EXPECT_EQ(d.reason, DecisionReason::kOverLimit) << c.name << " reserve " << reserve;
      EXPECT_EQ(d.retry_after, kNever) << c.name << " reserve " << reserve;
      EXPECT_EQ(d.remaining, capacity) << c.name << " reserve " << reserve;
    }
    // Asking without a cost: the whole capacity may be reserved.
    EXPECT_TRUE(Check(*limiter, "client", now, 0, capacity).allowed) << c.name;
    const Decision fits = Check(*limiter, "client", now, c.cost, capacity - c.cost);
    EXPECT_TRUE(fits.allowed) << c.name;
    EXPECT_EQ(fits.remaining, capacity - c.cost) << c.name;
    const Decision negative = Check(*limiter, "client", now, c.cost, -5);
    EXPECT_TRUE(negative.allowed) << c.name;
    EXPECT_EQ(negative.remaining, capacity - 2 * c.cost) << c.name;
  }
}

// A fixed window's surplus (an admin credit beyond the limit) is spent before the limit, and
// so before a reserve, but never lets in a reserve that does not fit the limit itself.
TEST_F(RedisReserve, ASurplusNeverAdmitsAReserveBeyondTheLimit) {
  for (const Case& c : Cases()) {
    if (c.spec.algorithm != Algorithm::kFixedWindow) continue;
    auto limiter = Make(c.spec, c.name);
    ASSERT_NE(limiter, nullptr);
    const Timestamp now = At(minutes(10));
    auto credited = limiter->Adjust(
        "client", now, {.kind = AdjustKind::kCredit, .amount = 50, .allow_over_limit = true});
    ASSERT_TRUE(credited.has_value()) << c.name << ": " << credited.error().message;
    const Decision never = Check(*limiter, "client", now, 50, 55);
    EXPECT_FALSE(never.allowed) << c.name;
    EXPECT_EQ(never.retry_after, kNever) << c.name;
    // 150 free: a cost of 50 leaves 100, all of which a reserve may keep.
    EXPECT_TRUE(Check(*limiter, "client", now, 50, 50).allowed) << c.name;
    EXPECT_TRUE(Check(*limiter, "client", now, 60, 40).allowed) << c.name;
    EXPECT_FALSE(Check(*limiter, "client", now, 1, 40).allowed) << c.name;
  }
}

// The log finds the hits that must leave for cost + reserve: of 60 hits taken one a second from
// 00:00, a cost of 3 with a reserve of 40 needs 3 gone, so the third (taken at 00:00:02) must
// leave: at 01:00:02, 3500 + 2 s after 00:01:40.
TEST_F(RedisReserve, TheLogWaitsForAsManyHitsAsCostAndReserveNeed) {
  auto limiter = Make({Algorithm::kSlidingWindowLog, 100, hours(1), 0, false}, "log");
  ASSERT_NE(limiter, nullptr);
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(Check(*limiter, "client", At(seconds(i)), 1, 40).allowed) << i;
  }
  const Timestamp now = At(seconds(100));
  const Decision d = Check(*limiter, "client", now, 3, 40);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, seconds(3502));
  EXPECT_FALSE(Check(*limiter, "client", now + seconds(3502) - microseconds(1), 3, 40).allowed);
  EXPECT_TRUE(Check(*limiter, "client", now + seconds(3502), 3, 40).allowed);
}

// Charges take their cost whatever reserve they carry (LimitCheck::charge): one that fits the
// limit but not its reserve is admitted, and one beyond the capacity (taken into debt) decides
// as the same charge without a reserve does on a twin key.
TEST_F(RedisReserve, AChargeIgnoresItsReserve) {
  for (const Case& c : Cases()) {
    auto limiter = Make(c.spec, c.name);
    ASSERT_NE(limiter, nullptr);
    const int64_t capacity = c.spec.Capacity();
    const Timestamp now = At(minutes(10));
    for (const char* key : {"with", "without"}) {
      ASSERT_TRUE(Check(*limiter, key, now, capacity * 7 / 10, 0).allowed) << c.name;
    }
    for (int64_t cost : {capacity / 10, capacity + 10}) {
      Decision out[2];
      for (int k = 0; k < 2; ++k) {
        const LimitCheck charge{.limiter = limiter.get(),
                                .key = k == 0 ? "with" : "without",
                                .cost = cost,
                                .charge = true,
                                .reserve = k == 0 ? capacity / 2 : 0};
        out[k] = All(std::span(&charge, 1), now)[0];
      }
      const std::string where = c.name + " charge " + std::to_string(cost);
      EXPECT_EQ(out[0].allowed, out[1].allowed) << where;
      EXPECT_EQ(out[0].reason, out[1].reason) << where;
      EXPECT_EQ(out[0].remaining, out[1].remaining) << where;
      EXPECT_EQ(out[0].retry_after, out[1].retry_after) << where;
      if (cost < capacity) {
        EXPECT_TRUE(out[0].allowed) << where;
        EXPECT_EQ(out[0].remaining, capacity / 5) << where;
      } else {
        EXPECT_EQ(out[0].reason, DecisionReason::kCostExceedsCapacity) << where;
      }
    }
  }
}

// A request checked against two limits, one of them with a reserve: refused whole when that one
// is refused for its reserve alone (the other limit's admission is rolled back in the script,
// before or after it), admitted whole when the reserve fits -- synchronously and not.
TEST_F(RedisReserve, AMultiLimitRequestRefusedForOneReserveTakesNothing) {
  auto shed = Make(Bucket(Algorithm::kTokenBucket, 100, hours(1), 100), "shed");
  auto plain = Make({Algorithm::kFixedWindow, 10, hours(1), 0, false}, "plain");
  ASSERT_TRUE(shed && plain);
  const Timestamp now = At(minutes(10));
  ASSERT_TRUE(Check(*shed, "client", now, 60, 0).allowed);
  for (bool async : {false, true}) {
    for (bool shed_first : {true, false}) {
      const std::string where =
          std::string(async ? "async" : "sync") + (shed_first ? ", shed first" : ", shed second");
      LimitCheck checks[2] = {{.limiter = shed.get(), .key = "client", .cost = 1, .reserve = 40},
                              {.limiter = plain.get(), .key = "client", .cost = 1}};
      if (!shed_first) std::swap(checks[0], checks[1]);
      const size_t s = shed_first ? 0 : 1;
      const std::vector<Decision> out = async ? AllAsync(checks, now) : All(checks, now);
      EXPECT_FALSE(out[s].allowed) << where;
      EXPECT_EQ(out[s].reason, DecisionReason::kOverLimit) << where;
      EXPECT_EQ(out[s].retry_after, seconds(36)) << where;
      EXPECT_TRUE(out[1 - s].allowed) << where << ": the plain limit's own verdict";
      EXPECT_TRUE(RequestRefused(checks, out)) << where;
      // Nothing was taken from either limit.
      EXPECT_EQ(Check(*plain, "client", now, 0, 0).remaining, 10) << where;
      EXPECT_EQ(Check(*shed, "client", now, 0, 0).remaining, 40) << where;
    }
  }
  // One hash slot: the script rolled the admissions back itself, no refund was sent.
  EXPECT_EQ(store_->RedisStats().refunds, 0u);
  // So is a reserve that never fits, in the same script.
  const LimitCheck never[2] = {{.limiter = shed.get(), .key = "client", .cost = 1, .reserve = 100},
                               {.limiter = plain.get(), .key = "client", .cost = 1}};
  const std::vector<Decision> refused = All(never, now);
  EXPECT_EQ(refused[0].retry_after, kNever);
  EXPECT_EQ(refused[0].remaining, 40);
  EXPECT_TRUE(refused[1].allowed);
  EXPECT_EQ(store_->RedisStats().refunds, 0u);
  EXPECT_EQ(Check(*plain, "client", now, 0, 0).remaining, 10);
  LimitCheck fits[2] = {{.limiter = shed.get(), .key = "client", .cost = 1, .reserve = 39},
                        {.limiter = plain.get(), .key = "client", .cost = 1}};
  const std::vector<Decision> out = AllAsync(fits, now);
  EXPECT_TRUE(out[0].allowed && out[1].allowed);
  EXPECT_EQ(out[0].remaining, 39);
  EXPECT_EQ(out[1].remaining, 9);
}

// The quota rule reads the quota flag beside a reserve: a quota check refused for its reserve
// does not refuse a request whose other quota check admits, and does when both are refused.
TEST_F(RedisReserve, AQuotaCheckRefusedForItsReserveIsOneQuotaRefusal) {
  auto a = Make({Algorithm::kFixedWindow, 100, hours(1), 0, false}, "quota-a");
  auto b = Make({Algorithm::kFixedWindow, 100, hours(1), 0, false}, "quota-b");
  ASSERT_TRUE(a && b);
  const Timestamp now = At(minutes(10));
  ASSERT_TRUE(Check(*a, "client", now, 70, 0).allowed);
  LimitCheck checks[2] = {
      {.limiter = a.get(), .key = "client", .cost = 1, .quota = true, .reserve = 40},
      {.limiter = b.get(), .key = "client", .cost = 1, .quota = true, .reserve = 40}};
  std::vector<Decision> out = All(checks, now);
  EXPECT_FALSE(out[0].allowed);
  EXPECT_TRUE(out[1].allowed);
  EXPECT_FALSE(RequestRefused(checks, out));
  EXPECT_EQ(Check(*b, "client", now, 0, 0).remaining, 99) << "b's admission stands";
  ASSERT_TRUE(Check(*b, "client", now, 59, 0).allowed);
  out = All(checks, now);
  EXPECT_FALSE(out[0].allowed);
  EXPECT_FALSE(out[1].allowed);
  EXPECT_TRUE(RequestRefused(checks, out));
  EXPECT_EQ(Check(*b, "client", now, 0, 0).remaining, 40);
}

// The oracle: a pure algorithm asked whether cost + reserve fits, on a copy of the key's state,
// and then deciding the cost on the state itself when it does (LimitCheck::reserve's rule).
class ReserveOracle {
 public:
  virtual ~ReserveOracle() = default;
  virtual Decision Decide(const std::string& key, Timestamp now, int64_t cost, int64_t reserve) = 0;
};

template <typename Alg>
class AlgOracle final : public ReserveOracle {
 public:
  explicit AlgOracle(const LimitSpec& spec) : alg_(*Alg::Create(spec)) {}
  Decision Decide(const std::string& key, Timestamp now, int64_t cost, int64_t reserve) override {
    auto it = states_.try_emplace(key, alg_.Initial(now)).first;
    typename Alg::State probe = it->second;
    const Decision asked = alg_.Decide(probe, now, cost + reserve);
    return asked.allowed ? alg_.Decide(it->second, now, cost) : asked;
  }

 private:
  Alg alg_;
  std::map<std::string, typename Alg::State> states_;
};

std::unique_ptr<ReserveOracle> OracleFor(const LimitSpec& spec) {
  const bool wide = NeedsWideArithmetic(spec);
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      if (wide) return std::make_unique<AlgOracle<WideTokenBucket>>(spec);
      return std::make_unique<AlgOracle<TokenBucket>>(spec);
    case Algorithm::kLeakyBucket:
      if (wide) return std::make_unique<AlgOracle<WideLeakyBucket>>(spec);
      return std::make_unique<AlgOracle<LeakyBucket>>(spec);
    case Algorithm::kGcra:
      return std::make_unique<AlgOracle<Gcra>>(spec);
    case Algorithm::kFixedWindow:
      return std::make_unique<AlgOracle<FixedWindow>>(spec);
    case Algorithm::kSlidingWindowCounter:
      return std::make_unique<AlgOracle<SlidingWindowCounter>>(spec);
    case Algorithm::kSlidingWindowLog:
      return std::make_unique<AlgOracle<SlidingWindowLog>>(spec);
  }
  return nullptr;
}

// Redis counts microseconds: durations compare rounded up to one.
Duration CeilUs(Duration d) {
  if (d == kNever) return d;
  return microseconds((d.count() + 999) / 1000);
}

// Random traffic of low, normal and critical requests (reserves 2/5, 1/5 and none of the
// capacity) on three keys, a few with a reserve that never fits, decided in turn by DecideAll
// and DecideAllAsync, decides as the oracle in every field: so no critical request is refused
// while room is left that only a lower priority was refused from, and each threshold holds to
// the request.
TEST_F(RedisReserve, MixedPrioritiesDecideAsThePureAlgorithmAskedForCostAndReserve) {
  uint64_t seed = 28;
  int admitted = 0;
  int shed[3] = {0, 0, 0};  // refusals of low, normal and critical requests
  for (const Case& c : Cases()) {
    if (c.spec.IsCalendar()) continue;  // its windows: the calendar tests, and the cases above
    auto limiter = Make(c.spec, c.name + "-trace");
    ASSERT_NE(limiter, nullptr);
    auto oracle = OracleFor(c.spec);
    ASSERT_NE(oracle, nullptr) << c.name;
    const int64_t capacity = c.spec.Capacity();
    const int64_t reserves[] = {capacity * 2 / 5, capacity / 5, 0};
    std::mt19937_64 rng(seed++);
    // Each of the three keys asks twice what refills: on average one request of 2 x cost per
    // the time 3 x cost hits refill (the fill time x 3 x cost / capacity), in whole ms.
    const int64_t fill_ms = c.spec.period.count() / 1'000'000 * capacity / c.spec.limit;
    const int64_t gap_ms = 2 * fill_ms * c.cost / capacity / 3;
    Timestamp now = At(minutes(3));
    for (int step = 0; step < 400; ++step) {
      now += milliseconds(static_cast<int64_t>(rng() % static_cast<uint64_t>(gap_ms)));
      const std::string key = "client-" + std::to_string(rng() % 3);
      const int64_t cost = c.cost * static_cast<int64_t>(1 + rng() % 3);
      const size_t priority = rng() % 3;
      int64_t reserve = reserves[priority];
      if (rng() % 50 == 0) reserve = capacity - cost + 1;  // never fits
      const Decision want = oracle->Decide(key, now, cost, reserve);
      // Every other one through DecideAllAsync: both build and read the script call alike.
      const LimitCheck check{
          .limiter = limiter.get(), .key = key, .cost = cost, .reserve = reserve};
      const Decision got = step % 2 == 0 ? Check(*limiter, key, now, cost, reserve)
                                         : AllAsync(std::span(&check, 1), now)[0];
      const std::string where = c.name + " step " + std::to_string(step) + " cost " +
                                std::to_string(cost) + " reserve " + std::to_string(reserve);
      ASSERT_FALSE(got.degraded) << where;
      ASSERT_EQ(got.allowed, want.allowed) << where;
      if (cost + reserve > capacity) {
        // The pure algorithm calls cost + reserve too costly; the store, over the limit.
        EXPECT_EQ(got.reason, DecisionReason::kOverLimit) << where;
      } else {
        EXPECT_EQ(got.reason, want.reason) << where;
      }
      EXPECT_EQ(got.remaining, want.remaining) << where;
      EXPECT_EQ(got.reset_after, CeilUs(want.reset_after)) << where;
      EXPECT_EQ(got.retry_after, CeilUs(want.retry_after)) << where;
      EXPECT_EQ(got.delay, CeilUs(want.delay)) << where;
      if (HasFailure()) return;
      (got.allowed ? admitted : shed[priority]) += 1;
    }
  }
  EXPECT_GT(admitted, 1000);
  // The lower the priority, the more of it is shed.
  EXPECT_GT(shed[0], shed[1]);
  EXPECT_GT(shed[1], shed[2]);
  EXPECT_GT(shed[2], 30) << "the limits themselves are met";
  std::printf("%d admitted; shed: %d low, %d normal, %d critical\n", admitted, shed[0], shed[1],
              shed[2]);
}

}  // namespace
}  // namespace sluice
