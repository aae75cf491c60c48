// The permit suite's tests (permit_suite.h).
#include "store/permit_suite.h"

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "store/store_suite.h"  // UniqueName
#include "support/wait_for.h"

namespace sluice::testing {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

void PrintTo(const PermitStoreUnderTest& store, std::ostream* os) { *os << store.name; }

std::string PermitSuiteName(const ::testing::TestParamInfo<PermitStoreUnderTest>& info) {
  return info.param.name;
}

PermitAnswer Await(const std::function<void(PermitPool::Callback)>& call) {
  auto answered = std::make_shared<std::promise<PermitAnswer>>();
  auto future = answered->get_future();
  call([answered](const PermitAnswer& a) { answered->set_value(a); });
  if (future.wait_for(kWaitForDeadline) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within the deadline";
    return PermitAnswer{.degraded = true};
  }
  return future.get();
}

PermitAnswer Acquire(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id,
                     int64_t reserve) {
  return Await([&](PermitPool::Callback done) {
    pool.AcquireAsync(key, now, {.permit = id, .reserve = reserve}, std::move(done));
  });
}

PermitAnswer Release(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id) {
  return Await(
      [&](PermitPool::Callback done) { pool.ReleaseAsync(key, now, id, std::move(done)); });
}

PermitAnswer Renew(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id) {
  return Await([&](PermitPool::Callback done) { pool.RenewAsync(key, now, id, std::move(done)); });
}

void PermitSuite::SetUp() {
  if (GetParam().set_up) GetParam().set_up();
  if (IsSkipped() || HasFatalFailure()) return;
  store_ = GetParam().open();
  ASSERT_NE(store_, nullptr);
}

std::unique_ptr<PermitPool> PermitSuite::Pool(int64_t max_in_flight, Duration ttl) {
  auto pool =
      store_->MakePermitPool({.max_in_flight = max_in_flight, .ttl = ttl}, {.id = "permits"});
  EXPECT_TRUE(pool.has_value()) << (pool ? "" : pool.error().message);
  return pool ? std::move(*pool) : nullptr;
}

Timestamp PermitSuite::Now() const {
  if (GetParam().manual_clock) return manual_;
  return Timestamp(
      std::chrono::duration_cast<Duration>(std::chrono::system_clock::now().time_since_epoch()));
}

void PermitSuite::PassStoreTime(int64_t expires_us) {
  if (GetParam().manual_clock) {
    manual_ = std::max(manual_, FromNanos(expires_us * 1000));
    return;
  }
  // A release of a permit nobody holds changes nothing and reports the store's clock.
  auto probe = Pool(1, seconds(1));
  ASSERT_TRUE(WaitFor(
      [&] { return Release(*probe, "clock-probe", Now(), "nobody").store_time_us >= expires_us; }));
}

namespace {

// The expiry a granted answer reports is ttl after the store time it reports (the memory store
// rounds its nanoseconds: the expiry up, the time down).
void ExpectLivesFor(const PermitAnswer& a, Duration ttl) {
  ASSERT_TRUE(a.granted);
  const int64_t ttl_us = std::chrono::duration_cast<microseconds>(ttl).count();
  EXPECT_GE(a.expires_us - a.store_time_us, ttl_us);
  EXPECT_LE(a.expires_us - a.store_time_us, ttl_us + 1);
}

}  // namespace

TEST_P(PermitSuite, AcquiresUpToMaxThenRefusesUntilTheEarliestExpiry) {
  const Duration ttl = seconds(30);
  auto pool = Pool(3, ttl);
  ASSERT_NE(pool, nullptr);
  std::vector<PermitAnswer> held;
  for (const char* id : {"a", "b", "c"}) {
    held.push_back(Acquire(*pool, "k", Now(), id));
    ExpectLivesFor(held.back(), ttl);
    EXPECT_EQ(held.back().in_flight, static_cast<int64_t>(held.size()));
    Advance(milliseconds(5));
  }
  const PermitAnswer refused = Acquire(*pool, "k", Now(), "d");
  EXPECT_FALSE(refused.granted);
  EXPECT_FALSE(refused.degraded);
  EXPECT_FALSE(refused.full);
  EXPECT_EQ(refused.in_flight, 3);
  // Until a's expiry, read on the store's clock.
  const auto retry_us = std::chrono::duration_cast<microseconds>(refused.retry_after).count();
  EXPECT_NEAR(retry_us, held[0].expires_us - refused.store_time_us, 1);
  EXPECT_GT(refused.retry_after, Duration(0));
  // Another key of the same pool has its own slots.
  ExpectLivesFor(Acquire(*pool, "other", Now(), "d"), ttl);
}

TEST_P(PermitSuite, AReleaseFreesItsSlot) {
  auto pool = Pool(2, seconds(30));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(Acquire(*pool, "k", Now(), "a").granted);
  ASSERT_TRUE(Acquire(*pool, "k", Now(), "b").granted);
  ASSERT_FALSE(Acquire(*pool, "k", Now(), "c").granted);
  const PermitAnswer released = Release(*pool, "k", Now(), "a");
  EXPECT_TRUE(released.granted);
  EXPECT_EQ(released.in_flight, 1);
  const PermitAnswer c = Acquire(*pool, "k", Now(), "c");
  EXPECT_TRUE(c.granted);
  EXPECT_EQ(c.in_flight, 2);
  EXPECT_FALSE(Acquire(*pool, "k", Now(), "d").granted);
}

TEST_P(PermitSuite, UnknownForeignAndDoubleReleasesAreNotGrantedAndChangeNothing) {
  auto pool = Pool(1, seconds(30));
  ASSERT_NE(pool, nullptr);
  EXPECT_FALSE(Release(*pool, "k", Now(), "never-acquired").granted);
  ASSERT_TRUE(Acquire(*pool, "k", Now(), "a").granted);
  EXPECT_FALSE(Release(*pool, "other-key", Now(), "a").granted);  // a is k's, not other-key's
  EXPECT_FALSE(Release(*pool, "k", Now(), "b").granted);
  EXPECT_FALSE(Acquire(*pool, "k", Now(), "b").granted);  // a still holds the slot
  EXPECT_TRUE(Release(*pool, "k", Now(), "a").granted);
  const PermitAnswer twice = Release(*pool, "k", Now(), "a");
  EXPECT_FALSE(twice.granted);
  EXPECT_FALSE(twice.degraded);
  EXPECT_EQ(twice.in_flight, 0);
}

TEST_P(PermitSuite, ARetriedAcquireOfAHeldIdTakesNoSecondSlot) {
  auto pool = Pool(2, seconds(30));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(Acquire(*pool, "k", Now(), "a").granted);
  Advance(seconds(1));
  const PermitAnswer again = Acquire(*pool, "k", Now(), "a");
  EXPECT_TRUE(again.granted);
  EXPECT_EQ(again.in_flight, 1);
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "b").granted);
}

TEST_P(PermitSuite, ARenewExtendsAHeldPermitAndRefusesAnUnknownOne) {
  const Duration ttl = GetParam().manual_clock ? Duration(seconds(10)) : Duration(seconds(30));
  auto pool = Pool(1, ttl);
  ASSERT_NE(pool, nullptr);
  const PermitAnswer a = Acquire(*pool, "k", Now(), "a");
  ASSERT_TRUE(a.granted);
  Advance(seconds(9));
  const PermitAnswer renewed = Renew(*pool, "k", Now(), "a");
  ExpectLivesFor(renewed, ttl);
  EXPECT_GE(renewed.expires_us, a.expires_us);
  EXPECT_EQ(renewed.in_flight, 1);
  EXPECT_FALSE(Renew(*pool, "k", Now(), "b").granted);
  EXPECT_FALSE(Renew(*pool, "other", Now(), "a").granted);
  if (GetParam().manual_clock) {
    // Past the first expiry, the renewed permit still holds the slot.
    PassStoreTime(a.expires_us + 1000);
    EXPECT_FALSE(Acquire(*pool, "k", Now(), "b").granted);
    EXPECT_TRUE(Release(*pool, "k", Now(), "a").granted);
  }
}

TEST_P(PermitSuite, APermitExpiresAtItsExpiryAndIsThenNeitherReleasedNorRenewed) {
  const Duration ttl =
      GetParam().manual_clock ? Duration(seconds(30)) : Duration(milliseconds(200));
  auto pool = Pool(1, ttl);
  ASSERT_NE(pool, nullptr);
  const PermitAnswer a = Acquire(*pool, "k", Now(), "a");
  ASSERT_TRUE(a.granted);
  if (GetParam().manual_clock) {
    Advance(ttl - Duration(1));
    EXPECT_FALSE(Acquire(*pool, "k", Now(), "b").granted) << "a lives until its expiry";
  }
  PassStoreTime(a.expires_us);
  // The slot is free from a's expiry on, by the store's clock.
  const PermitAnswer b = Acquire(*pool, "k", Now(), "b");
  ASSERT_TRUE(b.granted);
  EXPECT_GE(b.store_time_us, a.expires_us - 1);
  EXPECT_EQ(b.in_flight, 1);
  EXPECT_FALSE(Release(*pool, "k", Now(), "a").granted);
  EXPECT_FALSE(Renew(*pool, "k", Now(), "a").granted);
  EXPECT_EQ(pool->Stats(Now()).expired, 1u);
}

// A holder that crashed on a key nobody asks for again: the pool's in-flight count (what
// sluice_in_flight shows) drops when the permit's ttl has passed, with no further call on the key.
// The stats are asked at an instant past the expiry; no store clock has to get there.
TEST_P(PermitSuite, AnExpiredPermitLeavesInFlightWithNoFurtherCallOnItsKey) {
  const Duration ttl = seconds(30);
  auto pool = Pool(3, ttl);
  ASSERT_NE(pool, nullptr);
  const Timestamp t = Now();
  ASSERT_TRUE(Acquire(*pool, "idle", t, "a").granted);
  ASSERT_TRUE(Acquire(*pool, "idle", t, "b").granted);
  ASSERT_TRUE(Release(*pool, "idle", t, "b").granted);
  EXPECT_EQ(pool->Stats(t).in_flight, 1) << "a is held";
  EXPECT_EQ(pool->Stats(t + ttl / 2).in_flight, 1) << "a is held until its ttl has passed";
  EXPECT_EQ(pool->Stats(t + ttl + seconds(1)).in_flight, 0) << "a expired; nothing asked since";
}

TEST_P(PermitSuite, AReserveLeavesSlotsFree) {
  auto pool = Pool(4, seconds(30));
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "low1", 2).granted);
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "low2", 2).granted);
  const PermitAnswer low3 = Acquire(*pool, "k", Now(), "low3", 2);
  EXPECT_FALSE(low3.granted);
  EXPECT_EQ(low3.in_flight, 2);
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "normal", 1).granted);
  EXPECT_FALSE(Acquire(*pool, "k", Now(), "normal2", 1).granted);
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "critical", 0).granted);
  EXPECT_FALSE(Acquire(*pool, "k", Now(), "critical2", 0).granted);
}

// A reserve of the whole limit (a shed level whose threshold admits no slot) is never granted,
// held permits or not, and no wait helps: retry_after is kNever, as a rate limit's hits that
// can never pass say, not a ttl or an expiry.
TEST_P(PermitSuite, AReserveOfEverySlotIsNeverGrantedAndSaysNever) {
  constexpr int64_t kMax = 3;
  auto pool = Pool(kMax, seconds(30));
  ASSERT_NE(pool, nullptr);
  for (const int64_t reserve : {kMax, kMax + 1}) {
    const PermitAnswer empty = Acquire(*pool, "empty", Now(), "x", reserve);
    EXPECT_FALSE(empty.granted) << reserve;
    EXPECT_FALSE(empty.full || empty.invalid || empty.degraded) << reserve;
    EXPECT_EQ(empty.in_flight, 0) << reserve;
    EXPECT_EQ(empty.retry_after, kNever) << reserve;
  }
  // With permits held (one of kMax), still never, and nothing taken.
  ASSERT_TRUE(Acquire(*pool, "k", Now(), "held", 0).granted);
  const PermitAnswer refused = Acquire(*pool, "k", Now(), "low", kMax);
  EXPECT_FALSE(refused.granted);
  EXPECT_EQ(refused.in_flight, 1);
  EXPECT_EQ(refused.retry_after, kNever);
  // A reserve one short of every slot is an ordinary refusal once the one slot is taken: until
  // the held permit expires, within the ttl.
  const PermitAnswer later = Acquire(*pool, "k", Now(), "normal", kMax - 1);
  EXPECT_FALSE(later.granted);
  EXPECT_GT(later.retry_after, Duration(0));
  EXPECT_LE(later.retry_after, Duration(seconds(30)));
  // An id already held is renewed whatever the reserve (a retried acquire), as before.
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "held", kMax).granted);
  EXPECT_EQ(Release(*pool, "k", Now(), "held").in_flight, 0);
}

TEST_P(PermitSuite, MalformedIdsAndKeysAreInvalidAndChangeNothing) {
  auto pool = Pool(1, seconds(30));
  ASSERT_NE(pool, nullptr);
  const std::string longest(kMaxPermitIdBytes, 'x');
  const std::string too_long(kMaxPermitIdBytes + 1, 'x');
  for (const std::string& id : {std::string(), too_long}) {
    const PermitAnswer a = Acquire(*pool, "k", Now(), id);
    EXPECT_FALSE(a.granted);
    EXPECT_TRUE(a.invalid);
    EXPECT_TRUE(Release(*pool, "k", Now(), id).invalid);
    EXPECT_TRUE(Renew(*pool, "k", Now(), id).invalid);
  }
  EXPECT_TRUE(Acquire(*pool, std::string(70'000, 'k'), Now(), "a").invalid);
  const PermitAnswer a = Acquire(*pool, "k", Now(), longest);
  EXPECT_TRUE(a.granted);
  EXPECT_FALSE(a.invalid);
  EXPECT_TRUE(Release(*pool, "k", Now(), longest).granted);
}

TEST_P(PermitSuite, AHolderThatNeverReleasesIsBoundedByMaxAndTheTtl) {
  const Duration ttl =
      GetParam().manual_clock ? Duration(seconds(30)) : Duration(milliseconds(300));
  constexpr int64_t kMax = 5;
  auto pool = Pool(kMax, ttl);
  ASSERT_NE(pool, nullptr);
  for (int round = 0; round < 2; ++round) {
    int granted = 0;
    int64_t last_expiry = 0;
    for (int i = 0; i < 40; ++i) {
      const PermitAnswer a =
          Acquire(*pool, "k", Now(), "hostile-" + std::to_string(round) + "-" + std::to_string(i));
      if (a.granted) {
        ++granted;
        last_expiry = std::max(last_expiry, a.expires_us);
      }
      EXPECT_LE(a.in_flight, kMax);
    }
    EXPECT_EQ(granted, kMax);
    // Once the hostile permits expired, the slots are back (and taken again by the next round).
    PassStoreTime(last_expiry);
  }
  // Every hostile permit expired without a release: counted when a call on the key drops them.
  EXPECT_TRUE(Acquire(*pool, "k", Now(), "after").granted);
  EXPECT_EQ(pool->Stats(Now()).expired, 2 * static_cast<uint64_t>(kMax));
}

TEST_P(PermitSuite, ASpecOutsideItsRangeIsRefused) {
  EXPECT_FALSE(store_->MakePermitPool({.max_in_flight = 0, .ttl = seconds(1)}, {.id = "p"}));
  EXPECT_FALSE(store_->MakePermitPool({.max_in_flight = 1, .ttl = Duration(0)}, {.id = "p"}));
  EXPECT_FALSE(store_->MakePermitPool({.max_in_flight = 1, .ttl = kMaxPermitTtl + Duration(1)},
                                      {.id = "p"}));
  EXPECT_TRUE(store_->MakePermitPool({.max_in_flight = 1, .ttl = kMinPermitTtl}, {.id = "p"}));
}

}  // namespace sluice::testing
