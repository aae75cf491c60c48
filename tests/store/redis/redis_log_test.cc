// The sliding window log script against a real redis-server: decision for decision what
// SlidingWindowLog decides (allowed, remaining, reset_after and retry_after to the microsecond) on
// worked examples, random multi-key traces and a clock that steps back; every key carries a TTL no
// longer than its reset, and is gone once its window has passed.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sliding_window_log.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_script_log.h"
#include "support/redis_server.h"
#include "support/traffic.h"

namespace sluice {
namespace {

using internal::RedisClient;
using internal::RedisReply;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kMs = 1000;  // in microseconds
constexpr int64_t kSec = 1'000'000;
// A time far from zero, like a real clock: 2023-11-14, in microseconds.
constexpr int64_t kT0 = 1'700'000'000 * kSec;

LimitSpec Log(int64_t limit, Duration window) {
  return LimitSpec{Algorithm::kSlidingWindowLog, limit, window, 0, false};
}

// A decision in the script's units: microseconds.
struct Out {
  bool allowed = false;
  int64_t remaining = 0;
  int64_t reset_us = 0;
  int64_t retry_us = 0;
};

std::ostream& operator<<(std::ostream& os, const Out& o) {
  return os << "{allowed " << o.allowed << ", remaining " << o.remaining << ", reset " << o.reset_us
            << "us, retry " << o.retry_us << "us}";
}

::testing::AssertionResult Same(const Out& want, const Out& got) {
  if (want.allowed == got.allowed && want.remaining == got.remaining &&
      want.reset_us == got.reset_us && want.retry_us == got.retry_us) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "memory " << want << ", redis " << got;
}

// The in-memory SlidingWindowLog per key. A key keeps no state once its log is empty: the script
// deletes such a key (as the memory store drops such a state), and with it the latest time seen.
class Reference {
 public:
  explicit Reference(SlidingWindowLog log) : log_(std::move(log)) {}

  Out Decide(const std::string& key, int64_t now_us, int64_t cost) {
    const Timestamp now = FromNanos(now_us * 1000);
    auto it = states_.find(key);
    if (it == states_.end()) it = states_.emplace(key, log_.Initial(now)).first;
    const Decision d = log_.Decide(it->second, now, cost);
    if (it->second.stamps.empty()) states_.erase(it);
    // Millisecond traces give whole microseconds; a remainder would show up as a mismatch.
    auto us = [](Duration x) { return x.count() % 1000 == 0 ? x.count() / 1000 : -x.count(); };
    return {d.allowed, d.remaining, us(d.reset_after), us(d.retry_after)};
  }
  bool Holds(const std::string& key) const { return states_.count(key) > 0; }

 private:
  SlidingWindowLog log_;
  std::map<std::string, SlidingWindowLog::State> states_;
};

class RedisLog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    auto c =
        RedisClient::Connect("127.0.0.1", server_->port(), milliseconds(500), milliseconds(2000));
    ASSERT_TRUE(c.has_value()) << c.error().message;
    client_ = std::move(*c);
  }

  // Runs the script for `spec`; now_us < 0 asks for the server's clock.
  std::optional<Out> Run(const LimitSpec& spec, const std::string& key, int64_t now_us,
                         int64_t cost) {
    auto params = internal::SlidingWindowLogParams(spec);
    if (!params) return std::nullopt;
    std::vector<std::string> args = {now_us < 0 ? "" : std::to_string(now_us)};
    args.insert(args.end(), params->begin(), params->end());
    args.push_back(std::to_string(cost));
    auto r = client_->Eval(internal::kSlidingWindowLogScript, {key}, args);
    if (!r) {
      ADD_FAILURE() << "EVALSHA failed: " << r.error().message;
      return std::nullopt;
    }
    if (r->type != RedisReply::Type::kArray || r->elements.size() != 4) {
      ADD_FAILURE() << "unexpected reply shape";
      return std::nullopt;
    }
    for (const RedisReply& e : r->elements) {
      if (e.type != RedisReply::Type::kInteger) {
        ADD_FAILURE() << "non-integer in reply: " << e.str;
        return std::nullopt;
      }
    }
    return Out{r->elements[0].integer == 1, r->elements[1].integer, r->elements[2].integer,
               r->elements[3].integer};
  }

  // Runs the memory log and the script, expects the same decision, and returns it.
  Out Both(Reference& ref, const LimitSpec& spec, const std::string& key, int64_t now_us,
           int64_t cost) {
    const Out want = ref.Decide(key, now_us, cost);
    const std::optional<Out> got = Run(spec, key, now_us, cost);
    EXPECT_TRUE(got.has_value());
    if (got) {
      EXPECT_TRUE(Same(want, *got)) << key << " at " << now_us << "us cost " << cost;
    }
    return want;
  }

  int64_t Integer(const std::vector<std::string>& cmd) {
    auto r = client_->Command(cmd);
    EXPECT_TRUE(r.has_value()) << cmd[0] << ": " << (r ? "" : r.error().message);
    return r ? r->integer : -3;
  }
  int64_t Pttl(const std::string& key) { return Integer({"PTTL", key}); }
  bool Exists(const std::string& key) { return Integer({"EXISTS", key}) == 1; }

  static std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisClient> client_;
};
std::unique_ptr<testing::RedisServer> RedisLog::server_;

int64_t CeilMs(int64_t us) { return (us + 999) / 1000; }

TEST_F(RedisLog, WorkedBoundaryExample) {
  // Limit 100 per 1 s: 100 hits at 999 ms fill the window (t - 1 s, t] until they leave at 1999 ms.
  const LimitSpec spec = Log(100, seconds(1));
  auto log = SlidingWindowLog::Create(spec);
  ASSERT_TRUE(log.has_value());
  Reference ref(*log);
  const std::string key = "sluice:{worked:a}";
  const int64_t base = 28'000'000 * 60 * kSec;  // an aligned minute
  Out d = Both(ref, spec, key, base + 999 * kMs, 100);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_us, 1000 * kMs);
  d = Both(ref, spec, key, base + 1000 * kMs, 100);  // the fixed window would admit this
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 999 * kMs);
  EXPECT_EQ(d.reset_us, 999 * kMs);
  d = Both(ref, spec, key, base + 1000 * kMs, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 999 * kMs);
  d = Both(ref, spec, key, base + 1998 * kMs, 1);  // 999 ms is still inside (998, 1998]
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 1 * kMs);
  d = Both(ref, spec, key, base + 1999 * kMs, 60);  // and gone from (999, 1999]
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 40);
  d = Both(ref, spec, key, base + 2500 * kMs, 40);
  EXPECT_TRUE(d.allowed);
  d = Both(ref, spec, key, base + 2600 * kMs, 70);  // needs all 60 of 1999 and 10 of 2500
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 900 * kMs);  // the 2500 ms hits leave at 3500 ms
  EXPECT_EQ(d.reset_us, 900 * kMs);
  d = Both(ref, spec, key, base + 2600 * kMs, 60);  // exactly the 1999 ms request
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 399 * kMs);
  d = Both(ref, spec, key, base + 2999 * kMs, 60);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);

  // The 100/min boundary traffic of docs/algorithms.md: 100 in the last 5 s of a minute and 100
  // in the first 5 s of the next. The log admits the first 100 only.
  const LimitSpec per_minute = Log(100, seconds(60));
  auto minute_log = SlidingWindowLog::Create(per_minute);
  ASSERT_TRUE(minute_log.has_value());
  Reference minute_ref(*minute_log);
  int admitted = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const int64_t t =
        base + (i < 100 ? 55 * kSec + i * 50 * kMs : 60 * kSec + (i - 100) * 50 * kMs);
    admitted += Both(minute_ref, per_minute, "sluice:{worked:b}", t, 1).allowed;
  }
  EXPECT_EQ(admitted, 100);
}

// Millisecond traces over several keys: bursty or uniform arrivals from tests/support/traffic.h,
// costs 0..3 and now and then one above what is left, idle gaps longer than the window, and
// (when `step_back`) requests whose clock is up to 1.5 windows behind.
struct Line {
  int64_t t_us;
  std::string key;
  int64_t cost;
};

std::vector<Line> Trace(uint64_t seed, const LimitSpec& spec, int n, int keys, bool step_back,
                        const std::string& ns) {
  std::mt19937_64 rng(seed);
  const int64_t d_ms = spec.period.count() / 1'000'000;
  // About 1.3 times the limit per key, counting the mean cost of 1.5 and the idle gaps.
  const int64_t gap_ms = std::max<int64_t>(1, d_ms * 15 / (spec.limit * keys * 13));
  const int64_t start_ns = kT0 * 1000;
  const std::vector<testing::Request> times =
      seed % 2 == 0 ? testing::RandomTraffic(rng, n, start_ns, gap_ms * 1'000'000, 1'000'000, 1)
                    : testing::BurstyTraffic(rng, n, start_ns, 12, gap_ms * 1'000'000 / 2,
                                             gap_ms * 12 * 1'000'000, 1'000'000, 1);
  std::uniform_int_distribution<int> key(0, keys - 1), cost(0, 3), big(0, 19), idle(0, 399),
      back(0, 9);
  std::uniform_int_distribution<int64_t> big_cost(std::min<int64_t>(4, spec.limit), spec.limit),
      idle_ms(d_ms, 2 * d_ms), back_ms(1, d_ms * 3 / 2);
  std::vector<Line> out;
  int64_t shift_ms = 0;
  for (const testing::Request& r : times) {
    if (idle(rng) == 0) shift_ms += idle_ms(rng);  // every key's window empties
    int64_t t_ms = r.t_ns / 1'000'000 + shift_ms;
    if (step_back && back(rng) == 0) t_ms -= back_ms(rng);
    const int64_t c = big(rng) == 0 ? big_cost(rng) : std::min<int64_t>(cost(rng), spec.limit);
    out.push_back({t_ms * kMs, "sluice:{" + ns + ":client-" + std::to_string(key(rng)) + "}", c});
  }
  return out;
}

struct Counts {
  int admitted = 0;
  int rejected = 0;
  int emptied = 0;  // calls after which the key no longer exists
};

class RedisLogParity : public RedisLog {
 protected:
  // Every decision the same; after each, the key exists iff the memory log holds hits, and a
  // recorded request leaves a TTL of its reset rounded up to milliseconds.
  Counts ExpectParity(const LimitSpec& spec, const std::vector<Line>& trace) {
    auto log = SlidingWindowLog::Create(spec);
    EXPECT_TRUE(log.has_value());
    Counts counts;
    if (!log) return counts;
    Reference ref(*log);
    for (size_t i = 0; i < trace.size(); ++i) {
      const Line& l = trace[i];
      const Out want = ref.Decide(l.key, l.t_us, l.cost);
      const std::optional<Out> got = Run(spec, l.key, l.t_us, l.cost);
      if (!got) {
        ADD_FAILURE() << "line " << i;
        return counts;
      }
      if (!Same(want, *got)) {
        ADD_FAILURE() << DescribeLimitSpec(spec) << " line " << i << " (" << l.key << " at "
                      << l.t_us << "us cost " << l.cost << "): " << Same(want, *got).message();
        return counts;
      }
      const bool exists = Exists(l.key);
      if (exists != ref.Holds(l.key)) {
        ADD_FAILURE() << DescribeLimitSpec(spec) << " line " << i << ": EXISTS " << exists;
        return counts;
      }
      if (want.allowed && l.cost > 0) {
        const int64_t ttl = Pttl(l.key);
        if (ttl <= 0 || ttl > CeilMs(want.reset_us) || ttl < CeilMs(want.reset_us) - 1000) {
          ADD_FAILURE() << DescribeLimitSpec(spec) << " line " << i << ": PTTL " << ttl
                        << "ms for a reset of " << want.reset_us << "us";
          return counts;
        }
      }
      counts.admitted += want.allowed;
      counts.rejected += !want.allowed;
      counts.emptied += !exists;
    }
    return counts;
  }

  void ExpectEveryKeyExpires() {
    auto keyspace = client_->Command({"INFO", "keyspace"});
    ASSERT_TRUE(keyspace.has_value());
    const std::string& info = keyspace->str;  // db0:keys=N,expires=M (absent when empty)
    const auto keys_at = info.find("keys=");
    if (keys_at == std::string::npos) return;
    const auto expires_at = info.find("expires=");
    ASSERT_NE(expires_at, std::string::npos);
    EXPECT_EQ(std::stoll(info.substr(keys_at + 5)), std::stoll(info.substr(expires_at + 8)));
  }
};

const std::vector<LimitSpec>& ParitySpecs() {
  static const std::vector<LimitSpec> specs = {
      Log(100, seconds(1)),      Log(10, seconds(1)),       Log(250, seconds(60)),
      Log(5, milliseconds(250)), Log(7, milliseconds(250)), Log(3, seconds(1)),
  };
  return specs;
}

TEST_F(RedisLogParity, RandomTracesGiveTheSameDecisions) {
  int n = 0;
  for (const LimitSpec& spec : ParitySpecs()) {
    for (uint64_t seed = 1; seed <= 4; ++seed, ++n) {
      const auto trace = Trace(seed * 7919 + n, spec, 3000, 4, false, "rnd" + std::to_string(n));
      const Counts c = ExpectParity(spec, trace);
      if (HasFailure()) return;
      // Both sides exercised, and keys emptied (and deleted) along the way.
      EXPECT_GT(c.admitted, 300) << DescribeLimitSpec(spec) << " seed " << seed;
      EXPECT_GT(c.rejected, 100) << DescribeLimitSpec(spec) << " seed " << seed;
      EXPECT_GT(c.emptied, 0) << DescribeLimitSpec(spec) << " seed " << seed;
    }
  }
  ExpectEveryKeyExpires();
}

TEST_F(RedisLogParity, AClockThatStepsBackIsClampedLikeTheMemoryLog) {
  int n = 0;
  for (const LimitSpec& spec : ParitySpecs()) {
    for (uint64_t seed = 1; seed <= 3; ++seed, ++n) {
      const auto trace = Trace(seed * 104729 + n, spec, 3000, 3, true, "back" + std::to_string(n));
      const Counts c = ExpectParity(spec, trace);
      if (HasFailure()) return;
      EXPECT_GT(c.admitted, 300) << DescribeLimitSpec(spec) << " seed " << seed;
      EXPECT_GT(c.rejected, 100) << DescribeLimitSpec(spec) << " seed " << seed;
    }
  }
  ExpectEveryKeyExpires();
}

TEST_F(RedisLog, AClockThatStepsBackIsClampedWorkedExample) {
  const LimitSpec spec = Log(3, seconds(1));
  auto log = SlidingWindowLog::Create(spec);
  ASSERT_TRUE(log.has_value());
  Reference ref(*log);
  const std::string key = "sluice:{back:a}";
  const int64_t s = kT0;
  EXPECT_TRUE(Both(ref, spec, key, s + 10'000 * kMs, 1).allowed);
  EXPECT_TRUE(Both(ref, spec, key, s + 10'500 * kMs, 2).allowed);
  // 300 ms behind: evaluated at 10.5 s, where the window is full.
  Out d = Both(ref, spec, key, s + 10'200 * kMs, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 800 * kMs);   // the 10 s hit leaves at 11 s
  EXPECT_EQ(d.reset_us, 1300 * kMs);  // the 10.5 s hits at 11.5 s
  // A rejected request still moves the latest time seen: 10.6 s is evaluated at 10.8 s.
  EXPECT_FALSE(Both(ref, spec, key, s + 10'800 * kMs, 1).allowed);
  d = Both(ref, spec, key, s + 10'600 * kMs, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_us, 400 * kMs);
  EXPECT_TRUE(Both(ref, spec, key, s + 11'000 * kMs, 1).allowed);
  // Behind by 800 ms: the reset counts from 10.2 s to when the 11 s hit leaves.
  d = Both(ref, spec, key, s + 10'200 * kMs, 0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_us, 1800 * kMs);
  d = Both(ref, spec, key, s + 11'600 * kMs, 1);  // the 10.5 s hits are gone
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 1);
  // Recorded at the latest time seen (11.6 s), not at 10.9 s: its TTL covers the 700 ms behind.
  d = Both(ref, spec, key, s + 10'900 * kMs, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_us, 1700 * kMs);
  const int64_t ttl = Pttl(key);
  EXPECT_GT(ttl, 1000);
  EXPECT_LE(ttl, 1700);
}

TEST_F(RedisLog, TheKeyIsGoneOnceTheWindowHasPassed) {
  const LimitSpec spec = Log(5, milliseconds(250));
  auto log = SlidingWindowLog::Create(spec);
  ASSERT_TRUE(log.has_value());
  Reference ref(*log);
  const std::string key = "sluice:{gone:a}";
  Out d = Both(ref, spec, key, kT0, 2);
  EXPECT_EQ(d.reset_us, 250 * kMs);
  EXPECT_TRUE(Both(ref, spec, key, kT0 + 100 * kMs, 3).allowed);
  int64_t ttl = Pttl(key);
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 250);
  EXPECT_EQ(Integer({"ZCARD", key}), 3) << "two requests and the latest time seen";
  d = Both(ref, spec, key, kT0 + 300 * kMs, 0);  // the first has left, not the second
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_us, 50 * kMs);
  EXPECT_EQ(Integer({"ZCARD", key}), 2);
  EXPECT_TRUE(Exists(key));
  d = Both(ref, spec, key, kT0 + 350 * kMs, 0);  // both gone: no state at all
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_EQ(d.reset_us, 0);
  EXPECT_FALSE(Exists(key));
  // An admitted request into an emptied window starts a fresh key: one request, one TTL.
  EXPECT_TRUE(Both(ref, spec, key, kT0 + 400 * kMs, 1).allowed);
  EXPECT_TRUE(Both(ref, spec, key, kT0 + 700 * kMs, 5).allowed);
  EXPECT_EQ(Integer({"ZCARD", key}), 2);
  ttl = Pttl(key);
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 250);
  // Cost 0 on a key that does not exist creates nothing.
  d = Both(ref, spec, "sluice:{gone:b}", kT0, 0);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_FALSE(Exists("sluice:{gone:b}"));
}

TEST_F(RedisLog, RedisExpiresTheKeyByItselfUnderItsOwnClock) {
  // The server's clock (ARGV[1] = ''): no later call is needed for the key to go.
  const LimitSpec spec = Log(3, milliseconds(100));
  const std::string key = "sluice:{server-clock:a}";
  std::optional<Out> d = Run(spec, key, -1, 2);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 1);
  EXPECT_GT(d->reset_us, 0);
  EXPECT_LE(d->reset_us, 100 * kMs);
  d = Run(spec, key, -1, 2);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->allowed);
  EXPECT_GT(d->retry_us, 0);
  EXPECT_LE(d->retry_us, d->reset_us);
  const int64_t ttl = Pttl(key);
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 100);
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_FALSE(Exists(key));
}

TEST_F(RedisLog, ALargeCostIsOneMemberAndItsRetryIsFoundAmongManySmallOnes) {
  // 300 one-hit requests (past the listpack encoding) then rejected costs that need the k-th
  // oldest hit for k up to 300: the binary search over ranks.
  const LimitSpec spec = Log(400, seconds(10));
  auto log = SlidingWindowLog::Create(spec);
  ASSERT_TRUE(log.has_value());
  Reference ref(*log);
  const std::string key = "sluice:{many:a}";
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(Both(ref, spec, key, kT0 + i * 10 * kMs, 1).allowed);
  }
  EXPECT_TRUE(Both(ref, spec, key, kT0 + 3000 * kMs, 100).allowed);
  EXPECT_EQ(Integer({"ZCARD", key}), 302);
  for (int64_t cost = 1; cost <= 400; cost += 7) {
    const Out d = Both(ref, spec, key, kT0 + 3500 * kMs, cost);
    EXPECT_FALSE(d.allowed);
    // The cost-th oldest hit: the one-hit request at (cost - 1) * 10 ms, or the big one.
    const int64_t leaves = cost <= 300 ? (cost - 1) * 10 * kMs + 10 * kSec : 13 * kSec;
    EXPECT_EQ(d.retry_us, leaves - 3500 * kMs) << "cost " << cost;
  }
}

TEST(RedisLogParams, LimitAndWindowInMicroseconds) {
  auto p = internal::SlidingWindowLogParams(Log(100, seconds(1)));
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(*p, (std::vector<std::string>{"100", "1000000"}));
  p = internal::SlidingWindowLogParams(Log(7, milliseconds(250)));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (std::vector<std::string>{"7", "250000"}));
}

TEST(RedisLogParams, UnusableSpecsAreClearErrors) {
  auto sub_us = internal::SlidingWindowLogParams(Log(10, Duration(1'500)));
  ASSERT_FALSE(sub_us.has_value());
  EXPECT_NE(sub_us.error().message.find("whole number of us"), std::string::npos);
  // 2^24 hits per day: valid in memory, but 2^24 * 86'400'000'000 us is past 2^53.
  auto big = internal::SlidingWindowLogParams(Log(int64_t{1} << 24, std::chrono::hours(24)));
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.error().message.find("2^53"), std::string::npos);
  auto near = internal::SlidingWindowLogParams(Log(100'000, std::chrono::hours(24)));
  EXPECT_TRUE(near.has_value());
  auto wrong = internal::SlidingWindowLogParams(
      LimitSpec{Algorithm::kFixedWindow, 10, seconds(1), 0, false});
  EXPECT_FALSE(wrong.has_value());
  auto invalid = internal::SlidingWindowLogParams(Log(0, seconds(1)));
  EXPECT_FALSE(invalid.has_value());
}

}  // namespace
}  // namespace sluice
