// Calendar windows on a real redis-server, with the memory store as the oracle: the same trace
// across New York's 23-hour 2026-03-08 and its window edges decides the same in both; and under
// Redis's clock the script picks the window that holds Redis's now from the three sluiced
// sends, for a node whose clock is a whole window ahead or behind.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sluice/calendar_window.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/redis_store.h"
#include "sluice/stats_sink.h"
#include "store/redis/redis_client.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kNsPerMs = 1'000'000;

class RedisCalendar : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  RedisStoreOptions Options(bool server_time) const {
    RedisStoreOptions o;
    o.port = server_->port();
    o.use_server_time = server_time;
    o.limit_id = "unused";
    o.command_timeout = milliseconds(2000);
    return o;
  }
  static LimitSpec Calendar(CalendarUnit unit, const char* zone, int64_t limit) {
    LimitSpec spec;
    spec.algorithm = Algorithm::kFixedWindow;
    spec.limit = limit;
    spec.period = hours(24);
    spec.calendar = {unit, zone, false};
    return spec;
  }

  static std::unique_ptr<testing::RedisServer> server_;
};
std::unique_ptr<testing::RedisServer> RedisCalendar::server_;

void ExpectSame(const Decision& redis, const Decision& memory, const std::string& where) {
  EXPECT_EQ(redis.allowed, memory.allowed) << where;
  EXPECT_EQ(redis.remaining, memory.remaining) << where;
  EXPECT_EQ(redis.reset_after, memory.reset_after) << where;
  if (!memory.allowed) {
    EXPECT_EQ(redis.retry_after, memory.retry_after) << where;
  }
}

// 2026-03-07 00:00 EST (05:00Z) to 03-10, in steps of up to 50 minutes: every day edge, the
// 23-hour 03-08 included, with Decide, Charge, Refund and DecideAll beside a plain window.
TEST_F(RedisCalendar, DecidesAsTheMemoryStoreAcrossADstDay) {
  auto store = OpenRedisStore(Options(/*server_time=*/false));
  ASSERT_TRUE(store.has_value());
  auto opened = OpenMemoryStore();
  ASSERT_TRUE(opened.has_value());
  const std::shared_ptr<Store> memory = *opened;
  const LimitSpec spec = Calendar(CalendarUnit::kDay, "America/New_York", 7);
  const LimitSpec plain{Algorithm::kFixedWindow, 50, hours(1), 0, false};
  auto redis_day = (*store)->MakeLimiter(spec, "cal-day", false);
  ASSERT_TRUE(redis_day.has_value()) << redis_day.error().message;
  auto redis_plain = (*store)->MakeLimiter(plain, "cal-plain", false);
  ASSERT_TRUE(redis_plain.has_value());
  auto memory_day = memory->MakeLimiter(spec, LimiterOptions{.id = "cal-day"});
  ASSERT_TRUE(memory_day.has_value()) << memory_day.error().message;
  auto memory_plain = memory->MakeLimiter(plain, LimiterOptions{.id = "cal-plain"});
  ASSERT_TRUE(memory_plain.has_value());

  std::mt19937_64 rng(27);
  std::uniform_int_distribution<int64_t> gap_ms(0, 50 * 60 * 1000);
  std::uniform_int_distribution<int> key(0, 2), cost(1, 3), what(0, 9);
  int64_t t_ms = int64_t{1772859600} * 1000;  // 2026-03-07 00:00 EST
  int refused = 0, edges = 0;
  int64_t last_reset_end = 0;
  while (t_ms < int64_t{1773115200} * 1000) {  // 2026-03-10 04:00Z
    t_ms += gap_ms(rng);
    const Timestamp now = FromNanos(t_ms * kNsPerMs);
    const std::string k = "acct-" + std::to_string(key(rng));
    const int64_t c = cost(rng);
    const std::string where = k + " at " + std::to_string(t_ms) + "ms cost " + std::to_string(c);
    const int w = what(rng);
    Decision r, m;
    if (w == 0) {
      r = (*redis_day)->Charge(k, now, c);
      m = (*memory_day)->Charge(k, now, c);
    } else if (w == 1) {
      std::vector<LimitCheck> rc = {{redis_day->get(), k, c}, {redis_plain->get(), k, c}};
      std::vector<LimitCheck> mc = {{memory_day->get(), k, c}, {memory_plain->get(), k, c}};
      std::vector<Decision> ro(2), mo(2);
      (*store)->DecideAll(rc, now, ro);
      memory->DecideAll(mc, now, mo);
      ExpectSame(ro[1], mo[1], where + " (plain)");
      r = ro[0];
      m = mo[0];
    } else {
      r = (*redis_day)->Decide(k, now, c);
      m = (*memory_day)->Decide(k, now, c);
      if (w == 2 && m.allowed) {
        (*redis_day)->Refund(k, now, now, c);
        (*memory_day)->Refund(k, now, now, c);
      }
    }
    ExpectSame(r, m, where);
    refused += m.allowed ? 0 : 1;
    const int64_t end = t_ms + m.reset_after.count() / kNsPerMs;
    if (m.reset_after.count() > 0 && end != last_reset_end) {
      ++edges;
      last_reset_end = end;
    }
  }
  EXPECT_GT(refused, 10);
  EXPECT_GE(edges, 3);  // windows ending 03-08 05:00Z, 03-09 04:00Z, 03-10 04:00Z (at least)
}

// The three windows sluiced sends, picked by Redis's TIME: a node a whole day ahead or behind
// still decides in Redis's today, whose end the memory store at the real time gives.
TEST_F(RedisCalendar, UnderRedisTimeTheScriptPicksTheWindowHoldingItsNow) {
  auto store = OpenRedisStore(Options(/*server_time=*/true));
  ASSERT_TRUE(store.has_value());
  const LimitSpec spec = Calendar(CalendarUnit::kDay, "UTC", 3);
  auto day = (*store)->MakeLimiter(spec, "cal-skew", false);
  ASSERT_TRUE(day.has_value()) << day.error().message;
  auto oracle = MakeMemoryLimiter(spec);
  ASSERT_TRUE(oracle.has_value());
  MonotonicClock wall;
  for (const int days : {-1, 1, 0}) {
    const std::string k = "node-" + std::to_string(days);
    const Timestamp real = wall.Now();
    const Decision d = (*day)->Decide(k, real + hours(24 * days), 1);
    const Decision expected = (*oracle)->Decide(k, real, 1);
    ASSERT_TRUE(d.allowed) << days;
    EXPECT_EQ(d.remaining, 2) << days;
    // Redis's clock and this process's agree to well within a few seconds on one machine.
    EXPECT_LE(d.reset_after, expected.reset_after + seconds(5)) << days;
    EXPECT_GE(d.reset_after, expected.reset_after - seconds(5)) << days;
  }
  // The key's TTL ends with the window.
  auto c = internal::RedisClient::Connect("127.0.0.1", server_->port(), milliseconds(500),
                                          milliseconds(2000));
  ASSERT_TRUE(c.has_value());
  auto keys = (*c)->Command({"KEYS", "*cal-skew*"});
  ASSERT_TRUE(keys.has_value());
  ASSERT_EQ(keys->elements.size(), 3u);
  auto ttl = (*c)->Command({"PTTL", keys->elements[0].str});
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 24 * 3600 * 1000);
}

// A zone per request (LimitCheck::zone) on Redis and on memory: a key whose window opens in
// Tokyo ends at Tokyo's March 1st, a key opened in New York at New York's, and a request in
// another zone while a window is open is decided in that window. Oracle: `TZ=<zone> date -d
// '2026-03-01 00:00' +%s` = 1772290800 (Tokyo), 1772341200 (New York).
TEST_F(RedisCalendar, EachKeysWindowIsTheZoneItOpenedIn) {
  auto redis = OpenRedisStore(Options(/*server_time=*/false));
  ASSERT_TRUE(redis.has_value());
  auto memory = OpenMemoryStore();
  ASSERT_TRUE(memory.has_value());
  const LimitSpec spec = Calendar(CalendarUnit::kMonth, "Europe/Lisbon", 5);
  auto tokyo = ResolveCalendarZone("Asia/Tokyo");
  auto new_york = ResolveCalendarZone("America/New_York");
  ASSERT_TRUE(tokyo && new_york);
  const int64_t now_s = 1772290800 - 7200;  // Feb 28 22:00 JST, 08:00 EST
  const Timestamp now = FromNanos(now_s * 1'000'000'000);
  for (const std::shared_ptr<Store>& store : {std::shared_ptr<Store>(*redis), *memory}) {
    auto made = store->MakeLimiter(spec, LimiterOptions{.id = "cal-zone"});
    ASSERT_TRUE(made.has_value()) << made.error().message;
    Limiter* l = made->get();
    const auto decide = [&](std::string_view key, const CalendarZone& zone) {
      const LimitCheck c{.limiter = l, .key = key, .cost = 1, .zone = &zone};
      Decision d;
      store->DecideAll(std::span(&c, 1), now, std::span(&d, 1));
      return d;
    };
    const Decision t = decide("k-tokyo", *tokyo);
    ASSERT_TRUE(t.allowed);
    EXPECT_EQ(t.reset_after, seconds(7200));
    const Decision n = decide("k-ny", *new_york);
    ASSERT_TRUE(n.allowed);
    EXPECT_EQ(n.reset_after, seconds(1772341200 - now_s));
    // k-tokyo's open window decides a New York request: Tokyo's end, its count.
    const Decision switched = decide("k-tokyo", *new_york);
    EXPECT_EQ(switched.reset_after, seconds(7200));
    EXPECT_EQ(switched.remaining, 3);
    // ... and counted once: the requests in their windows' own zones are not.
    struct Sink : StatsSink {
      double mismatches = -1;
      void Add(const StatFamily& f, std::span<const StatLabel>, double v) override {
        if (f.name == "sluice_calendar_zone_mismatches_total") mismatches = v;
      }
    } sink;
    l->ReportStats(sink, {});
    EXPECT_EQ(sink.mismatches, 1);
    // A refund and a credit keep the window's zone: still Tokyo's window, still a mismatch.
    l->Refund("k-tokyo", now, now, 1);                                            // 1 left counted
    EXPECT_EQ(decide("k-tokyo", *tokyo).remaining, 3);                            // 2
    ASSERT_TRUE(l->Adjust("k-tokyo", now, Adjustment{.amount = 1}).has_value());  // 1
    const Decision again = decide("k-tokyo", *new_york);  // 2, in Tokyo's window
    EXPECT_EQ(again.remaining, 3);
    EXPECT_EQ(again.reset_after, seconds(7200));
    l->ReportStats(sink, {});
    EXPECT_EQ(sink.mismatches, 2);
  }
}

}  // namespace
}  // namespace sluice
