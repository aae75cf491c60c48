// The memory store's permit pools: the permit suite (tests/store/permit_suite.h) on a manual
// clock, and the memory bound under a flood of acquires on distinct keys.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"
#include "sluice/open_store.h"
#include "store/permit_suite.h"
#include "support/heap_in_use.h"

namespace sluice::testing {
namespace {

using std::chrono::seconds;

PermitStoreUnderTest MemoryPermits() {
  PermitStoreUnderTest store;
  store.name = "memory";
  store.open = []() -> std::shared_ptr<Store> {
    auto opened = OpenMemoryStore({});
    return opened ? *opened : nullptr;
  };
  store.manual_clock = true;
  return store;
}

// Through OpenStore: the layers sluiced puts in front pass the pools through.
PermitStoreUnderTest MemoryThroughOpenStore() {
  PermitStoreUnderTest store;
  store.name = "memory_open_store";
  store.open = []() -> std::shared_ptr<Store> {
    auto opened = OpenStore("memory");
    return opened ? *opened : nullptr;
  };
  store.manual_clock = true;
  return store;
}

INSTANTIATE_TEST_SUITE_P(Memory, PermitSuite,
                         ::testing::Values(MemoryPermits(), MemoryThroughOpenStore()),
                         PermitSuiteName);

// A flood of acquires on distinct keys (a client inventing tenants) fills the pool's part of the
// bound and is then refused as `full`; no permit granted before is dropped to make room, and the
// store's accounted bytes stay within its bound. Once the flood's permits expire, the memory is
// taken again.
TEST(MemoryPermits, AFloodOfDistinctKeysIsRefusedAtTheBoundWithoutEvictingLivePermits) {
  constexpr size_t kMaxBytes = size_t{1} << 20;
  auto store = OpenMemoryStore({.max_bytes = kMaxBytes, .shards = 4});
  ASSERT_TRUE(store.has_value());
  auto pool = (*store)->MakePermitPool({.max_in_flight = 2, .ttl = seconds(30)}, {.id = "p"});
  ASSERT_TRUE(pool.has_value()) << pool.error().message;
  Timestamp now = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  const PermitAnswer first = Acquire(**pool, "tenant-first", now, "permit-first");
  ASSERT_TRUE(first.granted);
  std::vector<std::string> granted;
  granted.reserve(50'000);  // the test's own memory, before the baseline
  const size_t heap_before = HeapInUse();
  const uint64_t bytes_before = (*store)->Stats().bytes;
  int full = 0;
  for (int i = 0; i < 50'000; ++i) {
    const std::string key = "tenant-" + std::to_string(i);
    const PermitAnswer a = Acquire(**pool, key, now, "permit-" + std::to_string(i));
    if (a.granted) {
      granted.push_back(key);
    } else {
      EXPECT_TRUE(a.full) << "a new key with free slots is refused only for memory";
      EXPECT_FALSE(a.degraded);
      EXPECT_EQ(a.retry_after, Duration(seconds(30))) << "until the earliest permit expires";
      ++full;
    }
    ASSERT_LE((*store)->Stats().bytes, kMaxBytes);
  }
  EXPECT_GT(full, 0) << "the flood reached the bound";
  // The accounting is an upper bound of what the permits really take from the heap.
  const size_t heap_growth = HeapInUse() - heap_before;
  const uint64_t accounted = (*store)->Stats().bytes - bytes_before;
  EXPECT_LE(heap_growth, accounted) << "heap " << heap_growth << " accounted " << accounted;
  EXPECT_GT(granted.size(), 1000u) << "the bound holds thousands of keys";
  EXPECT_EQ((*pool)->Stats(now).in_flight, static_cast<int64_t>(granted.size()) + 1);
  // Every live permit survived the flood.
  EXPECT_TRUE(Release(**pool, "tenant-first", now, "permit-first").granted);
  for (const std::string& key : granted) {
    ASSERT_TRUE(Release(**pool, key, now, "permit-" + key.substr(7)).granted) << key;
  }
  EXPECT_EQ((*pool)->Stats(now).in_flight, 0);
  // Expired permits give their memory back: a second flood after the ttl is granted as much.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(Acquire(**pool, "again-" + std::to_string(i), now, "x").granted);
  }
  now += seconds(31);
  size_t again = 0;
  for (int i = 0; i < 50'000; ++i) {
    again += Acquire(**pool, "later-" + std::to_string(i), now, "y").granted ? 1 : 0;
  }
  EXPECT_GE(again, granted.size());
  EXPECT_EQ((*pool)->Stats(now).expired, 100u);
}

// Threads acquiring, holding and releasing on one pool (its keys spread over the shards): the
// holders at any moment, counted by the holders themselves, never exceed max_in_flight.
TEST(MemoryPermits, ThreadsNeverHoldMoreThanMax) {
  auto store = OpenMemoryStore({});
  ASSERT_TRUE(store.has_value());
  constexpr int64_t kMax = 3;
  auto pool = (*store)->MakePermitPool({.max_in_flight = kMax, .ttl = seconds(30)}, {.id = "p"});
  ASSERT_TRUE(pool.has_value());
  const Timestamp now = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  constexpr int kKeys = 4;
  std::array<std::atomic<int64_t>, kKeys> holding{};
  std::array<std::atomic<int64_t>, kKeys> most{};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        const int k = (t + i) % kKeys;
        const std::string key = "key-" + std::to_string(k);
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        if (!Acquire(**pool, key, now, id).granted) continue;
        ++granted;
        const int64_t h = ++holding[k];
        int64_t m = most[k].load();
        while (h > m && !most[k].compare_exchange_weak(m, h)) {
        }
        --holding[k];
        ASSERT_TRUE(Release(**pool, key, now, id).granted);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(granted.load(), 0);
  for (int k = 0; k < kKeys; ++k) EXPECT_LE(most[k].load(), kMax);
  EXPECT_EQ((*pool)->Stats(now).in_flight, 0);
}

// sluiced reads the clock before a call takes the key's lock, so two calls can reach the store in
// the other order than their clock readings. The store's clock must still move forward in the
// order the store decides: a permit granted after another was released may not be reported as
// granted before that release, or the answers' times (the invariant's clock) show more than
// max_in_flight held at once.
TEST(MemoryPermits, TheStoreClockNeverGoesBackOnAKeyWhenCallsArriveOutOfOrder) {
  auto store = OpenMemoryStore({});
  ASSERT_TRUE(store.has_value());
  auto pool = (*store)->MakePermitPool({.max_in_flight = 1, .ttl = seconds(30)}, {.id = "p"});
  ASSERT_TRUE(pool.has_value());
  const Timestamp t0 = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  const PermitAnswer a = Acquire(**pool, "k", t0, "a");
  ASSERT_TRUE(a.granted);
  // The release read the clock at t0 + 10ms; the next acquire read it earlier, at t0 + 5ms, but
  // reached the key after the release.
  const PermitAnswer released = Release(**pool, "k", t0 + std::chrono::milliseconds(10), "a");
  ASSERT_TRUE(released.granted);
  const PermitAnswer b = Acquire(**pool, "k", t0 + std::chrono::milliseconds(5), "b");
  ASSERT_TRUE(b.granted) << "the slot was free when the acquire reached the key";
  EXPECT_GE(b.store_time_us, released.store_time_us)
      << "b would be held while a still was, by the store's own clock: 2 > max_in_flight 1";
  EXPECT_GE(b.expires_us - b.store_time_us, 30'000'000) << "a full ttl from the store's time";
  // The store's clock stays where it got to for a renew or release read even earlier.
  PermitAnswer renewed;  // the memory store answers before the call returns
  (*pool)->RenewAsync("k", t0, "b", [&](const PermitAnswer& r) { renewed = r; });
  ASSERT_TRUE(renewed.granted);
  EXPECT_GE(renewed.store_time_us, b.store_time_us);
  EXPECT_GE(renewed.expires_us, b.expires_us) << "a renew never shortens a permit";
}

// A wall clock stepped back (an hour here) is not a call that arrived late: new permits are
// stamped with the stepped clock and live their ttl from it, rather than an hour longer.
TEST(MemoryPermits, AClockSteppedBackIsFollowed) {
  auto store = OpenMemoryStore({});
  ASSERT_TRUE(store.has_value());
  auto pool = (*store)->MakePermitPool({.max_in_flight = 2, .ttl = seconds(30)}, {.id = "p"});
  ASSERT_TRUE(pool.has_value());
  const Timestamp t0 = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  ASSERT_TRUE(Acquire(**pool, "k", t0, "a").granted);
  const Timestamp back = t0 - std::chrono::hours(1);
  const PermitAnswer b = Acquire(**pool, "k", back, "b");
  ASSERT_TRUE(b.granted);
  EXPECT_EQ(b.store_time_us, ToNanos(back) / 1000);
  EXPECT_EQ(b.expires_us, ToNanos(back + seconds(30)) / 1000);
}

// A reload that changes a concurrency block's numbers makes a new pool under the same id: the
// permits held under the old numbers stay held and count against the new max_in_flight, as a
// shared store's new pool reads the same keys (docs/load-protection.md). The test keeps its own
// book of what it was granted and released, on a manual clock.
TEST(MemoryPermits, HeldPermitsCountAgainstANewMaxInFlightUnderTheSameId) {
  constexpr size_t kMaxBytes = size_t{4} << 20;
  auto store = OpenMemoryStore({.max_bytes = kMaxBytes, .shards = 4});
  ASSERT_TRUE(store.has_value());
  const Timestamp t0 = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  std::map<std::string, Timestamp> book;  // held permit -> its expiry, as the test saw them
  const auto live = [&](Timestamp now) {
    int64_t n = 0;
    for (const auto& [id, expiry] : book) n += now < expiry;
    return n;
  };
  const auto acquire = [&](PermitPool& pool, const std::string& id, Timestamp now) {
    const PermitAnswer a = Acquire(pool, "k", now, id);
    if (a.granted) book[id] = now + pool.spec().ttl;
    return a.granted;
  };
  const auto release = [&](PermitPool& pool, const std::string& id, Timestamp now) {
    const bool released = Release(pool, "k", now, id).granted;
    if (released) book.erase(id);
    return released;
  };

  auto old_pool = (*store)->MakePermitPool({.max_in_flight = 4, .ttl = seconds(30)}, {.id = "p"});
  ASSERT_TRUE(old_pool.has_value());
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(acquire(**old_pool, id, t0));
  ASSERT_TRUE(acquire(**old_pool, "d", t0 + seconds(10)));
  ASSERT_FALSE(acquire(**old_pool, "x", t0 + seconds(10)));

  // Lowered to 2, with a longer ttl.
  auto lowered = (*store)->MakePermitPool({.max_in_flight = 2, .ttl = seconds(60)}, {.id = "p"});
  ASSERT_TRUE(lowered.has_value());
  EXPECT_EQ((*lowered)->Stats(t0 + seconds(10)).in_flight, 4);
  const PermitAnswer over = Acquire(**lowered, "k", t0 + seconds(11), "e");
  EXPECT_FALSE(over.granted);
  EXPECT_EQ(over.in_flight, 4);
  EXPECT_TRUE(release(**lowered, "a", t0 + seconds(11)));
  EXPECT_TRUE(release(**old_pool, "b", t0 + seconds(11))) << "the old pool hands calls on";
  EXPECT_EQ(live(t0 + seconds(12)), 2);
  EXPECT_FALSE(acquire(**lowered, "e", t0 + seconds(12))) << "2 held of 2";
  // A renewal takes the new ttl; d keeps its own expiry (t0 + 40s).
  const PermitAnswer renewed = Renew(**lowered, "k", t0 + seconds(12), "c");
  ASSERT_TRUE(renewed.granted);
  book["c"] = t0 + seconds(72);
  EXPECT_EQ(renewed.expires_us, ToNanos(t0 + seconds(72)) / 1000);
  EXPECT_FALSE(acquire(**lowered, "e", t0 + seconds(40) - Duration(1)));
  EXPECT_EQ(live(t0 + seconds(40)), 1);
  EXPECT_TRUE(acquire(**lowered, "e", t0 + seconds(40))) << "d expired";
  EXPECT_FALSE(release(**lowered, "d", t0 + seconds(41)));
  EXPECT_EQ((*lowered)->Stats(t0 + seconds(41)).expired, 1u);
  EXPECT_FALSE(acquire(**lowered, "f", t0 + seconds(72) - Duration(1)));
  EXPECT_TRUE(acquire(**lowered, "f", t0 + seconds(72))) << "c expired at its renewed expiry";
  EXPECT_EQ((*lowered)->Stats(t0 + seconds(72)).in_flight, live(t0 + seconds(72)));

  // Raised to 5: e and f are held, three more fit.
  auto raised = (*store)->MakePermitPool({.max_in_flight = 5, .ttl = seconds(60)}, {.id = "p"});
  ASSERT_TRUE(raised.has_value());
  for (const char* id : {"g", "h", "i"}) EXPECT_TRUE(acquire(**raised, id, t0 + seconds(73)));
  EXPECT_FALSE(acquire(**raised, "j", t0 + seconds(73)));
  EXPECT_EQ(live(t0 + seconds(73)), 5);
  EXPECT_EQ((*raised)->Stats(t0 + seconds(73)).in_flight, 5);
  for (const char* id : {"e", "f", "g", "h", "i"}) {
    EXPECT_TRUE(release(**raised, id, t0 + seconds(74))) << id;
  }
  EXPECT_EQ((*raised)->Stats(t0 + seconds(74)).in_flight, 0);
  EXPECT_LE((*store)->Stats().bytes, (*store)->Stats().max_bytes);

  // Another id shares nothing.
  auto other = (*store)->MakePermitPool({.max_in_flight = 1, .ttl = seconds(60)}, {.id = "q"});
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(Acquire(**other, "k", t0 + seconds(75), "z").granted);
  EXPECT_EQ((*raised)->Stats(t0 + seconds(75)).in_flight, 0);
}

// Pools replacing each other under one id (reloads) while threads acquire, hold and release
// through whichever pool they picked up: no permit is lost or doubled on the way (every release
// of a granted permit answers true), and the holders, counted by themselves, never exceed
// max_in_flight.
TEST(MemoryPermits, APoolReplacedUnderThreadsLosesNoPermit) {
  auto store = OpenMemoryStore({.shards = 4});
  ASSERT_TRUE(store.has_value());
  constexpr int64_t kMax = 3;
  const auto make = [&](int generation) -> std::shared_ptr<PermitPool> {
    // Another ttl each time, so each is a changed concurrency block.
    auto pool = (*store)->MakePermitPool({.max_in_flight = kMax, .ttl = seconds(30 + generation)},
                                         {.id = "p"});
    EXPECT_TRUE(pool.has_value());
    return pool ? std::shared_ptr<PermitPool>(std::move(*pool)) : nullptr;
  };
  std::mutex mu;
  std::shared_ptr<PermitPool> current = make(0);
  const auto pick = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return current;
  };
  const Timestamp now = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  std::atomic<int64_t> holding{0};
  std::atomic<int64_t> most{0};
  std::atomic<int> granted{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !done.load() || i < 2000; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        if (!Acquire(*pick(), "k", now, id).granted) continue;
        ++granted;
        const int64_t h = ++holding;
        int64_t m = most.load();
        while (h > m && !most.compare_exchange_weak(m, h)) {
        }
        --holding;
        // Released through the pool current now, which may be a newer one than granted it.
        ASSERT_TRUE(Release(*pick(), "k", now, id).granted) << id;
      }
    });
  }
  for (int generation = 1; generation <= 200; ++generation) {
    auto next = make(generation);
    std::lock_guard<std::mutex> lock(mu);
    current = std::move(next);
  }
  done = true;
  for (std::thread& t : threads) t.join();
  EXPECT_GT(granted.load(), 0);
  EXPECT_LE(most.load(), kMax);
  EXPECT_EQ(pick()->Stats(now).in_flight, 0);
}

// The memory store counts a permit expired as soon as the stats are asked past its expiry, so
// SluicePermitsExpiring fires for a holder that crashed on a key no call touches again.
TEST(MemoryPermits, AnExpiryIsCountedWhenTheStatsAreAskedWithNoCallOnTheKey) {
  auto store = OpenMemoryStore({});
  ASSERT_TRUE(store.has_value());
  auto pool = (*store)->MakePermitPool({.max_in_flight = 4, .ttl = seconds(30)}, {.id = "p"});
  ASSERT_TRUE(pool.has_value());
  const Timestamp t0 = FromNanos(int64_t{1'760'000'000} * 1'000'000'000);
  for (const char* key : {"k1", "k2", "k3"})
    ASSERT_TRUE(Acquire(**pool, key, t0, "crashed").granted);
  ASSERT_TRUE(Acquire(**pool, "k4", t0 + seconds(20), "later").granted);
  EXPECT_EQ((*pool)->Stats(t0 + seconds(29)).expired, 0u);
  const PermitStats at30 = (*pool)->Stats(t0 + seconds(30));
  EXPECT_EQ(at30.expired, 3u) << "the three permits of t0 expire at t0 + 30s";
  EXPECT_EQ(at30.in_flight, 1) << "the one of t0 + 20s is held";
  EXPECT_EQ((*pool)->Stats(t0 + seconds(30)).expired, 3u) << "each expiry is counted once";
  EXPECT_EQ((*pool)->Stats(t0 + seconds(50)).expired, 4u);
  EXPECT_EQ((*pool)->Stats(t0 + seconds(50)).in_flight, 0);
}

TEST(MemoryPermits, ABoundTooSmallForOneKeyAtItsLimitIsRefusedWithTheReason) {
  auto store = OpenMemoryStore({.max_bytes = size_t{64} << 10});
  ASSERT_TRUE(store.has_value());
  auto pool = (*store)->MakePermitPool({.max_in_flight = 100'000, .ttl = seconds(1)}, {.id = "p"});
  ASSERT_FALSE(pool.has_value());
  EXPECT_NE(pool.error().message.find("memory bound"), std::string::npos) << pool.error().message;
}

}  // namespace
}  // namespace sluice::testing
