// The memory store's snapshots (docs/quotas.md, "Counters that survive a restart"). The oracle
// is the store itself: a store that never restarted and a store restored from its snapshot are
// given the same decisions from the snapshot on, and must answer each the same.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/calendar_window.h"
#include "sluice/memory_store.h"
#include "sluice/permits.h"
#include "sluice/stats_sink.h"
#include "store/memory/snapshot_bytes.h"

namespace sluice {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Timestamp kStart = FromNanos(int64_t{1'790'000'000'000'000'000});

std::shared_ptr<Store> MustOpen() {
  auto store = OpenMemoryStore({.max_bytes = size_t{64} << 20, .shards = 8});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? *store : nullptr;
}

std::unique_ptr<Limiter> MustMake(Store& store, const LimitSpec& spec, bool transient = false) {
  LimiterOptions o;
  o.id = "limit";
  o.transient = transient;
  auto made = store.MakeLimiter(spec, o);
  EXPECT_TRUE(made.has_value()) << made.error().message;
  return made ? std::move(*made) : nullptr;
}

struct Named {
  const char* name;
  LimitSpec spec;
};

// Every state a memory store keeps: the wide buckets (128-bit states) and the shaper included.
std::vector<Named> EverySpec() {
  using enum Algorithm;
  // Past 64 bits: burst x period / gcd(limit, period in ns) reaches 2^61 (NeedsWideArithmetic).
  const Duration long_period = hours(1);
  return {
      {"token_bucket", {kTokenBucket, 10, seconds(1), 20}},
      {"token_bucket_wide", {kTokenBucket, 7, long_period, 1'000'000}},
      {"gcra", {kGcra, 10, seconds(1), 5}},
      {"leaky_bucket", {kLeakyBucket, 10, seconds(1), 15}},
      {"leaky_bucket_wide", {kLeakyBucket, 7, long_period, 1'000'000}},
      {"leaky_shaper", {kLeakyBucket, 10, seconds(1), 15, true}},
      {"fixed_window", {kFixedWindow, 12, seconds(1)}},
      {"sliding_window_counter", {kSlidingWindowCounter, 12, seconds(1)}},
      {"sliding_window_log", {kSlidingWindowLog, 12, seconds(1)}},
  };
}

bool Same(const Decision& a, const Decision& b) {
  return a.allowed == b.allowed && a.reason == b.reason && a.remaining == b.remaining &&
         a.reset_after == b.reset_after && a.retry_after == b.retry_after && a.delay == b.delay;
}

// Random traffic on a few keys: what one step of it asks.
struct Step {
  std::string key;
  int64_t cost;
  Duration advance;
};
std::vector<Step> Traffic(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<Step> steps;
  for (int i = 0; i < n; ++i) {
    steps.push_back({"k" + std::to_string(rng() % 6) + (rng() % 3 == 0 ? "-a-longer-key" : ""),
                     static_cast<int64_t>(rng() % 3),
                     milliseconds(rng() % 40) + Duration(rng() % 1000)});
  }
  return steps;
}

// The live store and the restored one, given the same decisions: `shift` is how far the restored
// store's clock is ahead of the first's (a process started with another wall-clock offset).
void ExpectRestoredDecidesAlike(const LimitSpec& spec, bool transient, Duration shift) {
  auto live_store = MustOpen();
  auto live = MustMake(*live_store, spec, transient);
  Timestamp t = kStart;
  int admitted = 0;
  for (const Step& s : Traffic(7, 300)) {
    t += s.advance;
    admitted += live->Decide(s.key, t, s.cost).allowed;
  }
  ASSERT_GT(admitted, 0);
  SnapshotSaved saved;
  // The live store's clock is `shift` behind the wall clock; the restored one's is the wall.
  const std::string bytes = SnapshotsOf(*live_store)->Save(t, shift, &saved);
  ASSERT_GT(saved.counters, 0u);

  auto restored_store = MustOpen();
  const SnapshotLoaded loaded = SnapshotsOf(*restored_store)->Load(bytes, t + shift, Duration(0));
  EXPECT_EQ(loaded.error, "");
  auto restored = MustMake(*restored_store, spec, transient);
  const SnapshotRestored counts = SnapshotsOf(*restored_store)->FinishRestore();
  EXPECT_EQ(counts.rule_changed + counts.unmatched, 0u);
  EXPECT_EQ(counts.restored, saved.counters);

  int i = 0;
  for (const Step& s : Traffic(11, 400)) {
    t += s.advance;
    const Decision a = live->Decide(s.key, t, s.cost);
    const Decision b = restored->Decide(s.key, t + shift, s.cost);
    ASSERT_TRUE(Same(a, b)) << "step " << i << " key " << s.key << ": live allowed=" << a.allowed
                            << " remaining=" << a.remaining << ", restored allowed=" << b.allowed
                            << " remaining=" << b.remaining;
    ++i;
  }
}

TEST(MemorySnapshot, EveryAlgorithmDecidesAsIfNeverRestarted) {
  for (const Named& n : EverySpec()) {
    SCOPED_TRACE(n.name);
    ExpectRestoredDecidesAlike(n.spec, /*transient=*/false, Duration(0));
  }
}

TEST(MemorySnapshot, OverrideCountersDecideAsIfNeverRestarted) {
  for (const Named& n : EverySpec()) {
    SCOPED_TRACE(n.name);
    ExpectRestoredDecidesAlike(n.spec, /*transient=*/true, Duration(0));
  }
}

// Times are saved as wall-clock instants: a process whose clock reads an hour more for the same
// wall-clock instant continues every counter where it was (an hour is a whole number of each
// window, so the windows line up as they do on the wall clock).
TEST(MemorySnapshot, TimesMoveWithTheClockOffset) {
  for (const Named& n : EverySpec()) {
    SCOPED_TRACE(n.name);
    ExpectRestoredDecidesAlike(n.spec, /*transient=*/false, hours(1));
    ExpectRestoredDecidesAlike(n.spec, /*transient=*/true, hours(1));
  }
}

LimitSpec CalendarDay(const char* zone, int64_t limit = 12) {
  LimitSpec spec{Algorithm::kFixedWindow, limit, hours(24)};
  spec.calendar = {CalendarUnit::kDay, zone, false};
  return spec;
}

// A calendar window (configured rules only: overrides are never calendar windows) continues in
// its recorded window, also under a clock an hour off.
TEST(MemorySnapshot, ACalendarWindowDecidesAsIfNeverRestarted) {
  ExpectRestoredDecidesAlike(CalendarDay("Europe/Lisbon"), /*transient=*/false, Duration(0));
  ExpectRestoredDecidesAlike(CalendarDay("Asia/Kathmandu"), /*transient=*/false, hours(1));
}

// The zone a window was opened in survives a restart: a request in another zone after it is
// decided in the restored window and counted as a mismatch (docs/quotas.md, "A zone per
// customer").
TEST(MemorySnapshot, ACalendarWindowKeepsItsZone) {
  auto tokyo = ResolveCalendarZone("Asia/Tokyo");
  auto new_york = ResolveCalendarZone("America/New_York");
  ASSERT_TRUE(tokyo && new_york);
  const LimitSpec spec = CalendarDay("Europe/Lisbon", 10);
  const auto decide = [](Store& store, Limiter& l, const CalendarZone& zone, Timestamp t) {
    const LimitCheck c{.limiter = &l, .key = "k", .cost = 1, .zone = &zone};
    Decision d;
    store.DecideAll(std::span(&c, 1), t, std::span(&d, 1));
    return d;
  };
  struct Sink : StatsSink {
    double mismatches = -1;
    void Add(const StatFamily& f, std::span<const StatLabel>, double v) override {
      if (f.name == "sluice_calendar_zone_mismatches_total") mismatches = v;
    }
  };
  auto first = MustOpen();
  auto limiter = MustMake(*first, spec);
  const Decision opened = decide(*first, *limiter, *tokyo, kStart);
  ASSERT_TRUE(opened.allowed);
  const std::string bytes = SnapshotsOf(*first)->Save(kStart, Duration(0));
  auto second = MustOpen();
  EXPECT_EQ(SnapshotsOf(*second)->Load(bytes, kStart, Duration(0)).error, "");
  auto restored = MustMake(*second, spec);
  EXPECT_EQ(SnapshotsOf(*second)->FinishRestore().restored, 1u);
  const Decision d = decide(*second, *restored, *new_york, kStart);
  EXPECT_EQ(d.remaining, 8);
  EXPECT_EQ(d.reset_after, opened.reset_after);  // Tokyo's day, not New York's
  Sink sink;
  restored->ReportStats(sink, {});
  EXPECT_EQ(sink.mismatches, 1);
}

// Takes `used` hits of `spec` for key "k", snapshots, and restores under `now_spec`.
struct Reloaded {
  std::unique_ptr<Limiter> limiter;
  SnapshotRestored counts;
  std::shared_ptr<Store> store;
};
Reloaded UseThenRestoreAs(const LimitSpec& spec, int used, const LimitSpec& now_spec) {
  auto first = MustOpen();
  auto limiter = MustMake(*first, spec);
  for (int i = 0; i < used; ++i) EXPECT_TRUE(limiter->Decide("k", kStart, 1).allowed) << i;
  const std::string bytes = SnapshotsOf(*first)->Save(kStart, Duration(0));
  Reloaded r;
  r.store = MustOpen();
  EXPECT_EQ(SnapshotsOf(*r.store)->Load(bytes, kStart, Duration(0)).error, "");
  r.limiter = MustMake(*r.store, now_spec);
  r.counts = SnapshotsOf(*r.store)->FinishRestore();
  return r;
}

TEST(MemorySnapshot, AWindowKeepsItsUseUnderANewLimit) {
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowCounter, Algorithm::kSlidingWindowLog}) {
    SCOPED_TRACE(AlgorithmName(a));
    Reloaded r = UseThenRestoreAs({a, 100, hours(1)}, 90, {a, 500, hours(1)});
    EXPECT_EQ(r.counts.restored, 1u);
    const Decision d = r.limiter->Decide("k", kStart + seconds(1), 1);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 500 - 91) << "raised from 100 to 500 after 90: 410 left, less this one";
    // Lowered below the use: refused until the window ends.
    Reloaded low = UseThenRestoreAs({a, 100, hours(1)}, 90, {a, 50, hours(1)});
    EXPECT_FALSE(low.limiter->Decide("k", kStart + seconds(1), 1).allowed);
  }
}

TEST(MemorySnapshot, ARuleThatChangedMeaningStartsFresh) {
  using enum Algorithm;
  const struct {
    const char* why;
    LimitSpec saved, now;
  } cases[] = {
      {"another window", {kFixedWindow, 100, hours(1)}, {kFixedWindow, 100, hours(2)}},
      {"another algorithm", {kFixedWindow, 100, hours(1)}, {kSlidingWindowLog, 100, hours(1)}},
      {"a bucket's rate", {kTokenBucket, 100, hours(1)}, {kTokenBucket, 200, hours(1)}},
      {"a bucket's burst", {kGcra, 100, hours(1), 10}, {kGcra, 100, hours(1), 20}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    Reloaded r = UseThenRestoreAs(c.saved, 5, c.now);
    EXPECT_EQ(r.counts.restored, 0u);
    EXPECT_EQ(r.counts.rule_changed, 1u);
    EXPECT_EQ(r.limiter->Decide("k", kStart, 1).remaining, c.now.Capacity() - 1);
  }
}

TEST(MemorySnapshot, ACalendarInAnotherZoneOrForAUnitStartsFresh) {
  for (const bool from_unit : {false, true}) {
    SCOPED_TRACE(from_unit ? "unit: day to calendar: day" : "Lisbon to UTC");
    const LimitSpec saved = from_unit ? LimitSpec{Algorithm::kFixedWindow, 100, hours(24)}
                                      : CalendarDay("Europe/Lisbon", 100);
    Reloaded r = UseThenRestoreAs(saved, 5, CalendarDay("UTC", 100));
    EXPECT_EQ(r.counts.restored, 0u);
    EXPECT_EQ(r.counts.rule_changed, 1u);
    EXPECT_EQ(r.limiter->Decide("k", kStart, 1).remaining, 99);
  }
}

TEST(MemorySnapshot, ReplenishedCountersAreLeftOut) {
  auto store = MustOpen();
  auto limiter = MustMake(*store, {Algorithm::kFixedWindow, 10, seconds(1)});
  limiter->Decide("gone", kStart, 1);
  limiter->Decide("kept", kStart + milliseconds(1500), 1);
  SnapshotSaved saved;
  const std::string bytes = SnapshotsOf(*store)->Save(kStart + milliseconds(1600), {}, &saved);
  EXPECT_EQ(saved.counters, 1u) << "the first window ended: its counter is fresh again";
  // Loaded after the second one's window ended too: nothing comes back.
  auto later = MustOpen();
  SnapshotsOf(*later)->Load(bytes, kStart + seconds(3), {});
  auto again = MustMake(*later, {Algorithm::kFixedWindow, 10, seconds(1)});
  const SnapshotRestored counts = SnapshotsOf(*later)->FinishRestore();
  EXPECT_EQ(counts.restored, 0u);
  EXPECT_EQ(counts.expired, 1u);
  EXPECT_EQ(later->Stats().keys, 0u);
}

TEST(MemorySnapshot, CountersOfALimitNoLongerConfiguredAreDropped) {
  auto first = MustOpen();
  auto limiter = MustMake(*first, {Algorithm::kFixedWindow, 10, seconds(60)});
  limiter->Decide("k", kStart, 1);
  const std::string bytes = SnapshotsOf(*first)->Save(kStart, {});
  auto second = MustOpen();
  SnapshotsOf(*second)->Load(bytes, kStart, {});
  LimiterOptions other;
  other.id = "another";
  auto made = second->MakeLimiter({Algorithm::kFixedWindow, 10, seconds(60)}, other);
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(SnapshotsOf(*second)->FinishRestore().unmatched, 1u);
  EXPECT_EQ((*made)->Decide("k", kStart, 1).remaining, 9);
}

// A snapshot of two limits: "a" (3 used) and "b" (4 used), each its own section.
std::string TwoLimits() {
  auto store = MustOpen();
  LimiterOptions a, b;
  a.id = "a";
  b.id = "b";
  const LimitSpec spec{Algorithm::kFixedWindow, 10, hours(1)};
  auto la = store->MakeLimiter(spec, a);
  auto lb = store->MakeLimiter(spec, b);
  for (int i = 0; i < 3; ++i) (*la)->Decide("k", kStart, 1);
  for (int i = 0; i < 4; ++i) (*lb)->Decide("k", kStart, 1);
  return SnapshotsOf(*store)->Save(kStart, {});
}

// What the limits "a" and "b" have left after loading `bytes` (10: nothing restored).
std::pair<int64_t, int64_t> RemainingAfterLoad(const std::string& bytes, std::string* error) {
  auto store = MustOpen();
  *error = SnapshotsOf(*store)->Load(bytes, kStart, {}).error;
  LimiterOptions a, b;
  a.id = "a";
  b.id = "b";
  const LimitSpec spec{Algorithm::kFixedWindow, 10, hours(1)};
  auto la = store->MakeLimiter(spec, a);
  auto lb = store->MakeLimiter(spec, b);
  SnapshotsOf(*store)->FinishRestore();
  return {(*la)->Decide("k", kStart, 0).remaining, (*lb)->Decide("k", kStart, 0).remaining};
}

TEST(MemorySnapshot, ChecksumIsCrc32c) {
  // The check value of CRC-32C (RFC 3720, and every CRC catalogue): "123456789".
  EXPECT_EQ(internal::Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(internal::Crc32c("56789", internal::Crc32c("1234")), 0xe3069283u);
}

TEST(MemorySnapshot, ASoundFileIsReadWhole) {
  std::string error;
  EXPECT_EQ(RemainingAfterLoad(TwoLimits(), &error), std::make_pair(int64_t{7}, int64_t{6}));
  EXPECT_EQ(error, "");
}

// The file ends with the overrides' section (24 bytes here: none) and the end (24 bytes).
constexpr size_t kTail = 48;

TEST(MemorySnapshot, ATruncatedFileGivesTheSectionsBeforeTheCut) {
  const std::string whole = TwoLimits();
  std::string error;
  // Cut inside the second limit's section: the first comes back, the second starts fresh.
  const auto [a, b] = RemainingAfterLoad(whole.substr(0, whole.size() - kTail - 5), &error);
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, 10);
  // Every shorter cut: refused as such, never a crash, never a counter that was not saved.
  for (size_t n = 0; n < whole.size(); ++n) {
    const auto [x, y] = RemainingAfterLoad(whole.substr(0, n), &error);
    EXPECT_NE(error, "") << n;
    EXPECT_TRUE(x == 7 || x == 10) << n;
    EXPECT_TRUE(y == 10 || (y == 6 && x == 7)) << n;
  }
}

TEST(MemorySnapshot, AFlippedByteLosesOnlyItsSection) {
  const std::string whole = TwoLimits();
  std::string error;
  std::string damaged = whole;
  damaged[damaged.size() - kTail - 5] ^= 0x10;  // in the second limit's section
  const auto [a, b] = RemainingAfterLoad(damaged, &error);
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, 10);
  // Every single flipped bit anywhere: detected, and nothing restored that was not saved.
  for (size_t i = 0; i < whole.size(); ++i) {
    std::string flipped = whole;
    flipped[i] ^= 0x01;
    const auto [x, y] = RemainingAfterLoad(flipped, &error);
    EXPECT_NE(error, "") << "byte " << i;
    EXPECT_TRUE(x == 7 || x == 10) << i;
    EXPECT_TRUE(y == 6 || y == 10) << i;
  }
}

TEST(MemorySnapshot, AFutureVersionIsRefusedWhole) {
  std::string future = TwoLimits();
  future[8] = 3;  // the version, after the 8-byte magic
  std::string error;
  EXPECT_EQ(RemainingAfterLoad(future, &error), std::make_pair(int64_t{10}, int64_t{10}));
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
  // With its header's CRC made right, as a newer sluice would write it.
  uint32_t crc = internal::Crc32c(std::string_view(future).substr(0, 12));
  crc = internal::Crc32c(std::string_view("\0\0\0\0", 4), crc);
  crc = internal::Crc32c(std::string_view(future).substr(16, 8), crc);
  std::memcpy(future.data() + 12, &crc, 4);
  EXPECT_EQ(RemainingAfterLoad(future, &error), std::make_pair(int64_t{10}, int64_t{10}));
  EXPECT_NE(error.find("format version 3"), std::string::npos) << error;
  // Version 1 (before calendar specs) has the same layout for every other spec: read whole.
  std::string first = TwoLimits();
  first[8] = 1;
  uint32_t crc1 = internal::Crc32c(std::string_view(first).substr(0, 12));
  crc1 = internal::Crc32c(std::string_view("\0\0\0\0", 4), crc1);
  crc1 = internal::Crc32c(std::string_view(first).substr(16, 8), crc1);
  std::memcpy(first.data() + 12, &crc1, 4);
  EXPECT_EQ(RemainingAfterLoad(first, &error), std::make_pair(int64_t{7}, int64_t{6}));
  EXPECT_EQ(error, "");
  EXPECT_EQ(RemainingAfterLoad("not a snapshot at all", &error),
            std::make_pair(int64_t{10}, int64_t{10}));
  EXPECT_NE(error.find("not a sluice snapshot"), std::string::npos) << error;
}

// Snapshots taken while other threads decide, make limiters (a reload) and destroy them: every
// snapshot reads back whole, and a limiter alive throughout is in every one.
TEST(MemorySnapshot, SavesBesideDecisionsAndReloads) {
  auto store = MustOpen();
  const LimitSpec spec{Algorithm::kFixedWindow, 1'000'000, hours(1)};
  auto steady = MustMake(*store, spec);
  for (int i = 0; i < 2000; ++i) steady->Decide("k" + std::to_string(i), kStart, 1);
  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (int round = 0; !done.load(); ++round) {
      LimiterOptions o;
      o.id = "churn";
      auto limiter = store->MakeLimiter(spec, o);
      ASSERT_TRUE(limiter.has_value());
      for (int i = 0; i < 50; ++i) (*limiter)->Decide("c" + std::to_string(i), kStart, 1);
      steady->Decide("k" + std::to_string(round % 2000), kStart, 0);
    }
  });
  for (int i = 0; i < 200; ++i) {
    SnapshotSaved saved;
    const std::string bytes = SnapshotsOf(*store)->Save(kStart, {}, &saved);
    ASSERT_GE(saved.counters, 2000u);
    auto restored = MustOpen();
    ASSERT_EQ(SnapshotsOf(*restored)->Load(bytes, kStart, {}).error, "");
    auto back = MustMake(*restored, spec);
    const SnapshotRestored r = SnapshotsOf(*restored)->FinishRestore();
    ASSERT_EQ(r.restored, 2000u);  // the churning limiter's id is made nowhere here
    ASSERT_EQ(r.restored + r.unmatched, saved.counters);
    ASSERT_EQ(back->Decide("k7", kStart, 0).remaining, 1'000'000 - 1);
  }
  done = true;
  churn.join();
}

// A memory store's live permits (docs/load-protection.md, "Failover, restarts and lost writes")
// come back under their pool's id, each until its saved expiry moved onto the new clock: they
// release with released=true and count against max_in_flight (the new one, if it changed). The
// test's own book of what it was granted and released is the oracle.
PermitAnswer CallPool(PermitPool& pool, int call, std::string_view key, Timestamp now,
                      std::string_view id) {
  PermitAnswer answer;
  const auto done = [&](const PermitAnswer& a) { answer = a; };  // the memory store answers inline
  if (call == 0) pool.AcquireAsync(key, now, {.permit = id}, done);
  if (call == 1) pool.ReleaseAsync(key, now, id, done);
  if (call == 2) pool.RenewAsync(key, now, id, done);
  return answer;
}
PermitAnswer Acquire(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id) {
  return CallPool(pool, 0, key, now, id);
}
PermitAnswer Release(PermitPool& pool, std::string_view key, Timestamp now, std::string_view id) {
  return CallPool(pool, 1, key, now, id);
}

std::unique_ptr<PermitPool> MustMakePool(Store& store, int64_t max_in_flight) {
  auto pool =
      store.MakePermitPool({.max_in_flight = max_in_flight, .ttl = seconds(30)}, {.id = "pool"});
  EXPECT_TRUE(pool.has_value()) << pool.error().message;
  return pool ? std::move(*pool) : nullptr;
}

TEST(MemorySnapshot, LivePermitsAreHeldAgainUntilTheirExpiry) {
  auto first = MustOpen();
  auto pool = MustMakePool(*first, 10);
  ASSERT_NE(pool, nullptr);
  int granted = 0;
  // Expired when saved (kStart + 35s): not written.
  for (const char* id : {"old-0", "old-1", "old-2"})
    granted += Acquire(*pool, "k1", kStart, id).granted;
  // Live when saved, expired when loaded (kStart + 45s): dropped.
  for (const char* id : {"soon-0", "soon-1"}) {
    granted += Acquire(*pool, "k2", kStart + seconds(10), id).granted;
  }
  // Live when loaded: held again (until kStart + 50s). And one released before the save.
  for (const char* id : {"live-0", "live-1", "live-2", "live-3", "live-4", "gone"}) {
    granted += Acquire(*pool, "k1", kStart + seconds(20), id).granted;
  }
  ASSERT_EQ(granted, 11);
  ASSERT_TRUE(Release(*pool, "k1", kStart + seconds(21), "gone").granted);
  SnapshotSaved saved;
  // The first process's clock is an hour behind the wall clock; the second's is the wall clock.
  const Duration shift = hours(1);
  const std::string bytes = SnapshotsOf(*first)->Save(kStart + seconds(35), shift, &saved);
  EXPECT_EQ(saved.permits, 7u) << "2 soon and 5 live";

  auto second = MustOpen();
  const Timestamp later = kStart + shift + seconds(45);  // 10 s down
  ASSERT_EQ(SnapshotsOf(*second)->Load(bytes, later, Duration(0)).error, "");
  auto back = MustMakePool(*second, 6);  // max_in_flight changed across the restart
  ASSERT_NE(back, nullptr);
  const SnapshotRestored r = SnapshotsOf(*second)->FinishRestore();
  EXPECT_EQ(r.permits, 5u);
  EXPECT_EQ(r.permits_dropped, 2u);
  EXPECT_EQ(back->Stats(later).in_flight, 5);
  // 5 held of 6: one more, then refused.
  EXPECT_TRUE(Acquire(*back, "k1", later, "new-0").granted);
  const PermitAnswer full = Acquire(*back, "k1", later, "new-1");
  EXPECT_FALSE(full.granted);
  EXPECT_EQ(full.in_flight, 6);
  for (const char* id : {"old-0", "soon-0", "soon-1", "gone"}) {
    EXPECT_FALSE(Release(*back, id[0] == 's' ? "k2" : "k1", later, id).granted) << id;
  }
  for (const char* id : {"live-0", "live-1", "live-2"}) {
    EXPECT_TRUE(Release(*back, "k1", later, id).granted) << id;
  }
  // Each keeps its own expiry, moved onto the new clock: kStart + 50s + the shift.
  const Timestamp expiry = kStart + shift + seconds(50);
  EXPECT_TRUE(Release(*back, "k1", expiry - Duration(1000), "live-3").granted);
  EXPECT_FALSE(Release(*back, "k1", expiry, "live-4").granted);
  EXPECT_EQ(back->Stats(expiry).in_flight, 1) << "new-0";
}

// Restored permits count toward the pool's part of the bound: a smaller store takes what fits
// and drops the rest, and its accounted bytes stay within its bound.
TEST(MemorySnapshot, RestoredPermitsStayWithinTheBound) {
  auto big = MustOpen();
  auto pool = MustMakePool(*big, 4);
  ASSERT_NE(pool, nullptr);
  constexpr int kKeys = 300;
  for (int k = 0; k < kKeys; ++k) {
    for (int i = 0; i < 4; ++i) {
      const std::string id = "permit-" + std::to_string(k) + "-" + std::to_string(i) +
                             "-with-the-length-of-a-real-one";
      ASSERT_TRUE(Acquire(*pool, "tenant-" + std::to_string(k), kStart, id).granted);
    }
  }
  SnapshotSaved saved;
  const std::string bytes = SnapshotsOf(*big)->Save(kStart, {}, &saved);
  ASSERT_EQ(saved.permits, uint64_t{kKeys} * 4);

  auto small = OpenMemoryStore({.max_bytes = size_t{256} << 10, .shards = 2});
  ASSERT_TRUE(small.has_value());
  ASSERT_EQ(SnapshotsOf(**small)->Load(bytes, kStart, {}).error, "");
  auto back = MustMakePool(**small, 4);
  ASSERT_NE(back, nullptr);
  const SnapshotRestored r = SnapshotsOf(**small)->FinishRestore();
  EXPECT_GT(r.permits, 0u);
  EXPECT_GT(r.permits_dropped, 0u) << "the small bound cannot hold them all";
  EXPECT_EQ(r.permits + r.permits_dropped, saved.permits);
  EXPECT_EQ(back->Stats(kStart).in_flight, static_cast<int64_t>(r.permits));
  const StoreStats stats = (*small)->Stats();
  EXPECT_LE(stats.bytes, stats.max_bytes);
}

// A snapshot with permits whose pool is no longer configured: dropped, counted.
TEST(MemorySnapshot, PermitsOfAPoolNoLongerConfiguredAreDropped) {
  auto first = MustOpen();
  auto pool = MustMakePool(*first, 2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(Acquire(*pool, "k", kStart, "p").granted);
  const std::string bytes = SnapshotsOf(*first)->Save(kStart, {});
  auto second = MustOpen();
  ASSERT_EQ(SnapshotsOf(*second)->Load(bytes, kStart, {}).error, "");
  const SnapshotRestored r = SnapshotsOf(*second)->FinishRestore();
  EXPECT_EQ(r.permits, 0u);
  EXPECT_EQ(r.permits_dropped, 1u);
}

}  // namespace
}  // namespace sluice
