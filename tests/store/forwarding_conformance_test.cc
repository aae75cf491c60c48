// Every store layer (leased, batched, over-limit cache, region) built over a recording inner
// store: every virtual of the layer's limiters and store is called, and the test checks which
// virtual of the inner objects it reached. A limit the layer passes through must reach the
// inner object's same virtual (TakeAsync one take, not two Decides; RefundAsync, not a blocking
// Refund); a limit the layer serves must be served by it (its stats move, and the inner store
// is not asked the same thing behind its back). So a layer that overrides Decide but not
// TakeAsync cannot bypass itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sluice/batched_store.h"
#include "sluice/clock.h"
#include "sluice/leased_store.h"
#include "sluice/memory_store.h"
#include "sluice/over_limit_cache.h"
#include "sluice/region_store.h"
#include "sluice/scheduler.h"
#include "support/stats_reader.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using Calls = std::vector<std::string>;
using testing::StatsReader;

// What reached the inner store, in order: "limiter.<virtual>" or "store.<virtual>".
class Recorder {
 public:
  void Add(std::string call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(call));
  }
  // The calls since the last Take. Reads -- a spec a layer looks up as it likes, the stats the
  // test itself asks for -- are left out unless asked for.
  Calls Take(bool with_reads = false) {
    std::lock_guard<std::mutex> lock(mu_);
    Calls calls = std::exchange(calls_, {});
    if (!with_reads) {
      std::erase_if(calls, [](const std::string& c) {
        return c == "limiter.spec" || c == "limiter.Stats" || c == "store.Stats" ||
               c == "limiter.ReportStats" || c == "store.ReportStats";
      });
    }
    return calls;
  }

 private:
  std::mutex mu_;
  Calls calls_;
};

// A memory store's limiter, every virtual recorded before it is passed on.
class RecordingLimiter final : public Limiter {
 public:
  RecordingLimiter(const Store* owner, std::unique_ptr<Limiter> memory, Recorder& rec)
      : Limiter(owner), memory_(std::move(memory)), rec_(rec) {}

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    rec_.Add("limiter.Decide");
    return memory_->Decide(key, now, cost);
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    rec_.Add("limiter.Charge");
    return memory_->Charge(key, now, cost);
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    rec_.Add("limiter.ChargeAsync");
    memory_->ChargeAsync(key, now, cost, std::move(done));
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    rec_.Add("limiter.DecideAsync");
    memory_->DecideAsync(key, now, cost, std::move(done));
  }
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    rec_.Add("limiter.DecideBatch");
    memory_->DecideBatch(requests, out);
  }
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    rec_.Add("limiter.Refund");
    memory_->Refund(key, at, now, cost);
  }
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    rec_.Add("limiter.RefundAsync");
    memory_->RefundAsync(key, at, now, cost);
  }
  void RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                  GivenBackCallback done) override {
    rec_.Add("limiter.RefundThen");
    memory_->RefundThen(key, at, now, cost, std::move(done));
  }
  void GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units,
                    GivenBackCallback done) override {
    rec_.Add("limiter.GiveBackThen");
    memory_->GiveBackThen(key, stamp_us, now, units, std::move(done));
  }
  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override {
    rec_.Add("limiter.TakeAsync");
    memory_->TakeAsync(key, now, request, std::move(done));
  }
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override {
    rec_.Add("limiter.GiveBack");
    memory_->GiveBack(key, stamp_us, now, units);
  }
  void Reset(std::string_view key) override {
    rec_.Add("limiter.Reset");
    memory_->Reset(key);
  }
  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override {
    rec_.Add("limiter.Adjust");
    return memory_->Adjust(key, now, change);
  }
  void TakeOver(Limiter& old, Timestamp now) override {
    rec_.Add("limiter.TakeOver");
    auto* recording = dynamic_cast<RecordingLimiter*>(&old);
    memory_->TakeOver(recording != nullptr ? *recording->memory_ : old, now);
  }
  StoreStats Stats() const override {
    rec_.Add("limiter.Stats");
    return memory_->Stats();
  }
  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override {
    rec_.Add("limiter.ReportStats");
    memory_->ReportStats(sink, limit_labels);
  }
  const LimitSpec& spec() const override {
    rec_.Add("limiter.spec");
    return memory_->spec();
  }
  Limiter* memory() const { return memory_.get(); }

 private:
  const std::unique_ptr<Limiter> memory_;
  Recorder& rec_;
};

// A memory store whose every virtual, and every virtual of its limiters, is recorded.
class RecordingStore final : public Store {
 public:
  explicit RecordingStore(Recorder& rec) : memory_(*OpenMemoryStore()), rec_(rec) {}

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    rec_.Add("store.MakeLimiter");
    auto made = memory_->MakeLimiter(spec, options);
    if (!made) return std::unexpected(made.error());
    return std::unique_ptr<Limiter>(
        std::make_unique<RecordingLimiter>(this, std::move(*made), rec_));
  }
  void DecideAll(std::span<const LimitCheck> checks, Timestamp now,
                 std::span<Decision> out) override {
    rec_.Add("store.DecideAll");
    const std::vector<LimitCheck> inner = Memory(checks);
    memory_->DecideAll(inner, now, out);
  }
  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      DecideAllCallback done) override {
    rec_.Add("store.DecideAllAsync");
    const std::vector<LimitCheck> inner = Memory(checks);
    memory_->DecideAllAsync(inner, now, std::move(done));
  }
  bool Ready() override {
    rec_.Add("store.Ready");
    return true;
  }
  StoreStats Stats() const override {
    rec_.Add("store.Stats");
    return memory_->Stats();
  }
  void ReportStats(StatsSink& sink) const override {
    rec_.Add("store.ReportStats");
    memory_->ReportStats(sink);
  }
  size_t MaxTransientLimiters() const override {
    rec_.Add("store.MaxTransientLimiters");
    return 7;
  }

 private:
  // The memory store's limiters; null (invalid there) for any limiter this store did not make.
  std::vector<LimitCheck> Memory(std::span<const LimitCheck> checks) const {
    std::vector<LimitCheck> inner(checks.begin(), checks.end());
    for (LimitCheck& c : inner) {
      c.limiter = c.limiter != nullptr && c.limiter->owner() == this
                      ? static_cast<RecordingLimiter*>(c.limiter)->memory()
                      : nullptr;
    }
    return inner;
  }

  const std::shared_ptr<Store> memory_;
  Recorder& rec_;
};

const Timestamp kT0 = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);
const LimitSpec kSpec{Algorithm::kTokenBucket, 100, minutes(1), 100, false};

// One call of each Limiter virtual, by name.
struct LimiterCall {
  std::string name;
  std::function<void(Limiter&, std::string_view key, Timestamp now)> call;
};

std::vector<LimiterCall> EveryLimiterVirtual() {
  const auto ignore = [](const Decision&) {};
  return {
      {"Decide", [](Limiter& l, std::string_view k, Timestamp t) { l.Decide(k, t, 1); }},
      {"Charge", [](Limiter& l, std::string_view k, Timestamp t) { l.Charge(k, t, 1); }},
      {"DecideAsync",
       [ignore](Limiter& l, std::string_view k, Timestamp t) { l.DecideAsync(k, t, 1, ignore); }},
      {"ChargeAsync",
       [ignore](Limiter& l, std::string_view k, Timestamp t) { l.ChargeAsync(k, t, 1, ignore); }},
      {"DecideBatch",
       [](Limiter& l, std::string_view k, Timestamp t) {
         const DecideRequest requests[2] = {{k, t, 1}, {k, t, 1}};
         Decision out[2];
         l.DecideBatch(requests, out);
       }},
      {"Refund", [](Limiter& l, std::string_view k, Timestamp t) { l.Refund(k, t, t, 1); }},
      {"RefundAsync",
       [](Limiter& l, std::string_view k, Timestamp t) { l.RefundAsync(k, t, t, 1); }},
      {"RefundThen",
       [](Limiter& l, std::string_view k, Timestamp t) { l.RefundThen(k, t, t, 1, [](bool) {}); }},
      {"GiveBackThen",
       [](Limiter& l, std::string_view k, Timestamp t) {
         l.GiveBackThen(k, ToNanos(t) / 1000, t, 1, [](bool) {});
       }},
      {"TakeAsync",
       [](Limiter& l, std::string_view k, Timestamp t) {
         const LeaseRequest request{.cost = 1, .want = 2, .holder = "n1", .ttl = seconds(1)};
         l.TakeAsync(k, t, request, [](const LeaseGrant&) {});
       }},
      {"GiveBack",
       [](Limiter& l, std::string_view k, Timestamp t) { l.GiveBack(k, ToNanos(t) / 1000, t, 1); }},
      {"Reset", [](Limiter& l, std::string_view k, Timestamp) { l.Reset(k); }},
      {"Adjust",
       [](Limiter& l, std::string_view k, Timestamp t) {
         (void)l.Adjust(k, t, Adjustment{.kind = AdjustKind::kCredit, .amount = 1});
       }},
      // Taking over its own counters: nothing to take, but the inner limiter's to say so.
      {"TakeOver", [](Limiter& l, std::string_view, Timestamp t) { l.TakeOver(l, t); }},
      {"Stats", [](Limiter& l, std::string_view, Timestamp) { l.Stats(); }},
      {"ReportStats",
       [](Limiter& l, std::string_view, Timestamp) {
         StatsReader r;
         l.ReportStats(r, {});
       }},
      {"spec", [](Limiter& l, std::string_view, Timestamp) { l.spec(); }},
  };
}

// Reads: the test's own look at the stats, or a spec a layer looks up as it likes.
bool IsRead(const std::string& name) {
  return name == "spec" || name == "Stats" || name == "ReportStats";
}

// What `l` reports of itself (Limiter::ReportStats, no labels): `name`'s value.
double Reported(const Limiter& l, std::string_view name) {
  StatsReader r;
  l.ReportStats(r, {});
  return r.Value(name);
}

// The call of EveryLimiterVirtual named `name`.
void CallVirtual(const std::string& name, Limiter& l, std::string_view key, Timestamp now) {
  for (const LimiterCall& c : EveryLimiterVirtual()) {
    if (c.name == name) return c.call(l, key, now);
  }
  ADD_FAILURE() << "no virtual " << name;
}

Decision DecideAllOne(Store& store, Limiter& l, std::string_view key, Timestamp now, bool async) {
  const LimitCheck check{&l, key, 1};
  Decision out[1];
  if (async) {
    store.DecideAllAsync(std::span(&check, 1), now,
                         [&out](std::span<const Decision> d) { out[0] = d[0]; });
  } else {
    store.DecideAll(std::span(&check, 1), now, out);
  }
  return out[0];
}

// A limit the layer passes through: every limiter virtual reaches the inner limiter's same one,
// and nothing else; the store's virtuals reach the inner store's.
void ExpectPassesThrough(Store& layer, Limiter& l, Recorder& rec) {
  EXPECT_EQ(l.owner(), &layer);
  rec.Take();
  for (const LimiterCall& c : EveryLimiterVirtual()) {
    c.call(l, "pass", kT0);
    EXPECT_EQ(rec.Take(/*with_reads=*/IsRead(c.name)), Calls{"limiter." + c.name}) << c.name;
  }
  EXPECT_TRUE(DecideAllOne(layer, l, "pass", kT0, /*async=*/true).allowed);
  EXPECT_EQ(rec.Take(), Calls{"store.DecideAllAsync"});
  // The one synchronous DecideAll waits on the inner store's DecideAllAsync.
  EXPECT_TRUE(DecideAllOne(layer, l, "pass", kT0, /*async=*/false).allowed);
  EXPECT_EQ(rec.Take(), Calls{"store.DecideAllAsync"});
}

// The store's own virtuals; a limiter another store made is invalid, never unwrapped.
void ExpectStoreForwards(Store& layer, Recorder& rec) {
  rec.Take();
  EXPECT_TRUE(layer.Ready());
  EXPECT_EQ(rec.Take(), Calls{"store.Ready"});
  EXPECT_EQ(layer.MaxTransientLimiters(), 7u);
  EXPECT_EQ(rec.Take(), Calls{"store.MaxTransientLimiters"});
  layer.Stats();
  const Calls stats = rec.Take(/*with_reads=*/true);
  EXPECT_NE(std::find(stats.begin(), stats.end(), "store.Stats"), stats.end());
  StatsReader reported;
  layer.ReportStats(reported);
  const Calls reports = rec.Take(/*with_reads=*/true);
  EXPECT_NE(std::find(reports.begin(), reports.end(), "store.ReportStats"), reports.end());

  auto foreign = MakeMemoryLimiter(kSpec);
  ASSERT_TRUE(foreign.has_value());
  const Decision d = DecideAllOne(layer, **foreign, "k", kT0, /*async=*/false);
  EXPECT_EQ(d.reason, DecisionReason::kInvalidRequest);
  const Decision null_limiter = [&] {
    const LimitCheck check{nullptr, "k", 1};
    Decision out[1];
    layer.DecideAll(std::span(&check, 1), kT0, out);
    return out[0];
  }();
  EXPECT_EQ(null_limiter.reason, DecisionReason::kInvalidRequest);
  rec.Take();
}

std::unique_ptr<Limiter> Make(Store& store, const LimitSpec& spec, const LimiterOptions& o) {
  auto made = store.MakeLimiter(spec, o);
  EXPECT_TRUE(made.has_value()) << made.error().message;
  return made ? std::move(*made) : nullptr;
}

bool Only(const Calls& calls, const Calls& allowed) {
  return std::all_of(calls.begin(), calls.end(), [&](const std::string& c) {
    return std::find(allowed.begin(), allowed.end(), c) != allowed.end();
  });
}

// --- The leased layer ---

struct Leased {
  Recorder rec;
  std::shared_ptr<Store> inner = std::make_shared<RecordingStore>(rec);
  ManualClock clock{kT0};
  // Never advanced: the test gives leases back itself, if at all.
  std::shared_ptr<ManualScheduler> scheduler = std::make_shared<ManualScheduler>(clock);
  std::shared_ptr<LeasedStore> store =
      *OpenLeasedStore(inner, {.holder = "n1", .scheduler = scheduler});
};

LimiterOptions LeasedOptions() {
  LimiterOptions o{.id = "leased"};
  o.sync = {.mode = SyncMode::kLeased, .lease_ttl = seconds(10)};
  return o;
}

TEST(ForwardingConformance, LeasedLayerPassesExactLimitsThrough) {
  Leased l;
  auto limiter = Make(*l.store, kSpec, {.id = "exact"});
  ASSERT_NE(limiter, nullptr);
  EXPECT_EQ(l.rec.Take(), Calls{"store.MakeLimiter"});
  ExpectPassesThrough(*l.store, *limiter, l.rec);
  ExpectStoreForwards(*l.store, l.rec);
}

TEST(ForwardingConformance, LeasedLayerDecidesLeasedLimitsFromItsLeases) {
  Leased l;
  auto limiter = Make(*l.store, kSpec, LeasedOptions());
  ASSERT_NE(limiter, nullptr);
  l.rec.Take();
  // A key is decided by the shared store, one atomic take each time (never a Decide), until
  // its traffic is steady enough for a lease ahead.
  Timestamp now = now;
  for (int i = 0; i < 1000 && l.store->Stats().lease_units_held == 0; ++i) {
    now += milliseconds(10);
    l.clock.Set(now);
    EXPECT_TRUE(limiter->Decide("k", now, 1).allowed);
    EXPECT_EQ(l.rec.Take(), Calls{"limiter.TakeAsync"});
  }
  ASSERT_GT(l.store->Stats().leases_taken, 0u);
  ASSERT_GT(l.store->Stats().lease_units_held, 0);
  // Every way of deciding is then answered from the units held.
  const std::vector<std::pair<std::string, std::function<void()>>> decisions = {
      {"Decide", [&] { limiter->Decide("k", now, 1); }},
      {"Charge", [&] { limiter->Charge("k", now, 1); }},
      {"DecideAsync", [&] { limiter->DecideAsync("k", now, 1, [](const Decision&) {}); }},
      {"ChargeAsync", [&] { limiter->ChargeAsync("k", now, 1, [](const Decision&) {}); }},
      {"DecideBatch", [&] { CallVirtual("DecideBatch", *limiter, "k", now); }},
      {"DecideAll", [&] { DecideAllOne(*l.store, *limiter, "k", now, false); }},
      {"DecideAllAsync", [&] { DecideAllOne(*l.store, *limiter, "k", now, true); }},
  };
  for (const auto& [name, decide] : decisions) {
    l.rec.Take();
    const uint64_t local = l.store->Stats().leased_decisions;
    decide();
    // A prefetch may take more units ahead; nothing else reaches the shared store.
    EXPECT_TRUE(Only(l.rec.Take(), {"limiter.TakeAsync"})) << name;
    EXPECT_GT(l.store->Stats().leased_decisions, local) << name;
  }
  // Its stats: the inner limiter's, then the layer's own.
  l.rec.Take();
  StatsReader reported;
  limiter->ReportStats(reported, {});
  EXPECT_EQ(l.rec.Take(/*with_reads=*/true), Calls{"limiter.ReportStats"});
  EXPECT_GT(reported.Value("sluice_lease_events_total", {{"event", "taken"}}), 0);
  // A refund goes back into the units held, not to the shared store.
  for (const bool async : {false, true}) {
    l.rec.Take();
    const int64_t held = l.store->Stats().lease_units_held;
    async ? limiter->RefundAsync("k", now, now, 1) : limiter->Refund("k", now, now, 1);
    EXPECT_EQ(l.store->Stats().lease_units_held, held + 1);
    EXPECT_TRUE(l.rec.Take().empty());
  }
  // A lease of the leases' own traffic (a layer above) passes through as one take.
  CallVirtual("TakeAsync", *limiter, "other", now);
  EXPECT_EQ(l.rec.Take(), Calls{"limiter.TakeAsync"});
  CallVirtual("GiveBack", *limiter, "other", now);
  EXPECT_EQ(l.rec.Take(), Calls{"limiter.GiveBack"});
  // A reset forgets the units held too: the next decision takes a lease again.
  limiter->Reset("k");
  EXPECT_EQ(l.rec.Take(), Calls{"limiter.Reset"});
  EXPECT_EQ(l.store->Stats().lease_units_held, 0);
  l.rec.Take();
  limiter->Decide("k", now, 1);
  EXPECT_EQ(l.rec.Take(), Calls{"limiter.TakeAsync"});
}

// --- The batched layer ---

struct Batched {
  Recorder rec;
  std::shared_ptr<Store> inner = std::make_shared<RecordingStore>(rec);
  ManualClock clock{kT0};
  // Never advanced: no sync but the test's.
  std::shared_ptr<ManualScheduler> scheduler = std::make_shared<ManualScheduler>(clock);
  std::shared_ptr<BatchedStore> store =
      *OpenBatchedStore(inner, {.max_bytes = 1 << 20, .scheduler = scheduler});
};

TEST(ForwardingConformance, BatchedLayerPassesOtherLimitsThroughAndCountsThem) {
  Batched b;
  auto limiter = Make(*b.store, kSpec, {.id = "exact"});
  ASSERT_NE(limiter, nullptr);
  EXPECT_EQ(b.rec.Take(), Calls{"store.MakeLimiter"});
  const uint64_t before = b.store->Stats().forwarded_decisions;
  ExpectPassesThrough(*b.store, *limiter, b.rec);
  // Decide, Charge, their Asyncs, a batch of 2, a take and two DecideAlls: 9 decisions.
  EXPECT_EQ(b.store->Stats().forwarded_decisions, before + 9);
  ExpectStoreForwards(*b.store, b.rec);
}

TEST(ForwardingConformance, BatchedLayerDecidesBatchedLimitsFromItsViews) {
  Batched b;
  LimiterOptions o{.id = "batched"};
  o.sync = {.mode = SyncMode::kBatched, .interval = seconds(1)};
  auto limiter = Make(*b.store, kSpec, o);
  ASSERT_NE(limiter, nullptr);
  b.rec.Take();
  // A key without a view is decided by the inner store, whose answer seeds the view.
  EXPECT_TRUE(limiter->Decide("k", kT0, 1).allowed);
  EXPECT_EQ(b.rec.Take(), Calls{"limiter.Decide"});
  // A lease's units too are taken from the view (two local takes).
  for (const std::string name :
       {"Decide", "Charge", "DecideAsync", "ChargeAsync", "DecideBatch", "TakeAsync"}) {
    const uint64_t local = b.store->Stats().local_decisions;
    b.rec.Take();
    CallVirtual(name, *limiter, "k", kT0);
    EXPECT_TRUE(b.rec.Take().empty()) << name;
    EXPECT_GT(b.store->Stats().local_decisions, local) << name;
  }
  for (const bool async : {false, true}) {
    const uint64_t local = b.store->Stats().local_decisions;
    b.rec.Take();
    DecideAllOne(*b.store, *limiter, "k", kT0, async);
    EXPECT_TRUE(b.rec.Take().empty());
    EXPECT_EQ(b.store->Stats().local_decisions, local + 1);
  }
  // Its stats: the inner limiter's, then the layer's own.
  b.rec.Take();
  StatsReader reported;
  limiter->ReportStats(reported, {});
  EXPECT_EQ(b.rec.Take(/*with_reads=*/true), Calls{"limiter.ReportStats"});
  EXPECT_TRUE(reported.Has("sluice_batched_limit_over_admitted_hits_total"));
  // Refunds and give-backs return hits not yet sent, in the view.
  for (const std::string name : {"Refund", "RefundAsync", "GiveBack"}) {
    const uint64_t pending = b.store->Stats().batched_pending_hits;
    b.rec.Take();
    CallVirtual(name, *limiter, "k", kT0);
    EXPECT_TRUE(b.rec.Take().empty()) << name;
    EXPECT_EQ(b.store->Stats().batched_pending_hits, pending - 1) << name;
  }
  // The hits go to the inner store in a sync, as charges through its DecideAll.
  b.rec.Take();
  EXPECT_GT(b.store->Flush(kT0).hits_sent, 0u);
  EXPECT_TRUE(Only(b.rec.Take(), {"store.DecideAllAsync"}));
  limiter->Reset("k");
  EXPECT_EQ(b.rec.Take(), Calls{"limiter.Reset"});
}

// --- The over-limit cache ---

TEST(ForwardingConformance, OverLimitCacheForwardsWhatItCannotAnswerToTheSameVirtual) {
  Recorder rec;
  auto inner = std::make_shared<RecordingStore>(rec);
  auto store = OpenOverLimitCache(inner, {.max_bytes = 1 << 16});
  ASSERT_TRUE(store.has_value());
  auto limiter = Make(**store, kSpec, {.id = "cached"});
  ASSERT_NE(limiter, nullptr);
  EXPECT_EQ(limiter->owner(), store->get());
  rec.Take();
  for (const LimiterCall& c : EveryLimiterVirtual()) {
    const uint64_t forwarded = (*store)->Stats().forwarded_decisions;
    rec.Take();
    c.call(*limiter, "k", kT0);
    // A batch is decided one by one, each of them the cache's to answer if it can.
    const Calls want = c.name == "DecideBatch" ? Calls{"limiter.Decide", "limiter.Decide"}
                                               : Calls{"limiter." + c.name};
    EXPECT_EQ(rec.Take(/*with_reads=*/IsRead(c.name)), want) << c.name;
    const uint64_t decisions = c.name == "DecideBatch" ? 2
                               : c.name == "Decide" || c.name == "Charge" ||
                                       c.name == "DecideAsync" || c.name == "ChargeAsync"
                                   ? 1
                                   : 0;
    EXPECT_EQ((*store)->Stats().forwarded_decisions, forwarded + decisions) << c.name;
  }
  ExpectStoreForwards(**store, rec);
}

TEST(ForwardingConformance, OverLimitCacheAnswersSureRefusalsItself) {
  Recorder rec;
  auto inner = std::make_shared<RecordingStore>(rec);
  auto store = OpenOverLimitCache(inner, {.max_bytes = 1 << 16});
  ASSERT_TRUE(store.has_value());
  const LimitSpec two{Algorithm::kTokenBucket, 2, minutes(1), 2, false};
  auto limiter = Make(**store, two, {.id = "cached"});
  ASSERT_NE(limiter, nullptr);
  EXPECT_TRUE(limiter->Decide("k", kT0, 1).allowed);
  EXPECT_TRUE(limiter->Decide("k", kT0, 1).allowed);
  EXPECT_FALSE(limiter->Decide("k", kT0, 1).allowed);  // learnt
  const std::vector<std::pair<std::string, std::function<Decision()>>> decisions = {
      {"Decide", [&] { return limiter->Decide("k", kT0, 1); }},
      {"DecideAsync",
       [&] {
         Decision out;
         limiter->DecideAsync("k", kT0, 1, [&out](const Decision& d) { out = d; });
         return out;
       }},
      {"DecideBatch",
       [&] {
         const DecideRequest requests[1] = {{"k", kT0, 1}};
         Decision out[1];
         limiter->DecideBatch(requests, out);
         return out[0];
       }},
      {"DecideAll", [&] { return DecideAllOne(**store, *limiter, "k", kT0, false); }},
      {"DecideAllAsync", [&] { return DecideAllOne(**store, *limiter, "k", kT0, true); }},
  };
  for (const auto& [name, decide] : decisions) {
    const uint64_t cached = (*store)->Stats().cached_decisions;
    rec.Take();
    EXPECT_FALSE(decide().allowed) << name;
    EXPECT_TRUE(rec.Take().empty()) << name;
    EXPECT_EQ((*store)->Stats().cached_decisions, cached + 1) << name;
  }
  // Units given back may end the refusal: the next decision asks the inner store again.
  limiter->GiveBack("k", ToNanos(kT0) / 1000, kT0, 1);
  rec.Take();
  EXPECT_TRUE(limiter->Decide("k", kT0, 1).allowed);
  EXPECT_EQ(rec.Take(), Calls{"limiter.Decide"});
}

// --- The region layer ---

struct Region {
  Recorder rec;
  std::shared_ptr<Store> inner = std::make_shared<RecordingStore>(rec);
  ManualClock clock{kT0};
  // Never advanced: the test refreshes itself (RefreshDue).
  std::shared_ptr<ManualScheduler> scheduler = std::make_shared<ManualScheduler>(clock);
  // Nothing listens on port 1: every exchange with the global store fails at once.
  std::shared_ptr<RegionStore> store = *OpenRegionStore(inner, Options(scheduler));

  // Built field by field: GCC 12 at -O3 takes a designated-initializer temporary's string
  // members for uninitialized (-Wmaybe-uninitialized).
  static RegionStoreOptions Options(std::shared_ptr<ManualScheduler> scheduler) {
    RegionStoreOptions o;
    o.region = "a";
    o.global_store = "redis://127.0.0.1:1";
    o.node = "n1";
    o.global_timeout = milliseconds(500);
    o.scheduler = std::move(scheduler);
    return o;
  }
};

TEST(ForwardingConformance, RegionLayerPassesOtherLimitsThrough) {
  Region r;
  auto limiter = Make(*r.store, kSpec, {.id = "local"});
  ASSERT_NE(limiter, nullptr);
  EXPECT_EQ(r.rec.Take(), Calls{"store.MakeLimiter"});
  ExpectPassesThrough(*r.store, *limiter, r.rec);
  ExpectStoreForwards(*r.store, r.rec);
}

TEST(ForwardingConformance, RegionLayerCountsTheDemandOfLeasedLimitsOnEveryPath) {
  Region r;
  LimiterOptions o{.id = "world"};
  o.region.global = true;
  o.region.mode = RegionMode::kLeased;
  o.region.shares = {{"a", kWholeShare / 2}, {"b", kWholeShare / 2}};
  o.region.region = "a";
  o.region.global_spec = kSpec;
  auto part = RegionPart(kSpec, SharedUnits(kSpec.limit, o.region.OwnShare()));
  ASSERT_TRUE(part.has_value());
  auto limiter = Make(*r.store, *part, o);
  ASSERT_NE(limiter, nullptr);
  r.store->RefreshDue(kT0, /*force=*/true);  // fails: the layer decides cut off from now on
  r.rec.Take();
  for (const LimiterCall& c : EveryLimiterVirtual()) {
    const double counted = Reported(*limiter, "sluice_region_cutoff_decisions_total");
    r.rec.Take();
    c.call(*limiter, "k", kT0);
    const Calls calls = r.rec.Take(/*with_reads=*/IsRead(c.name));
    if (c.name == "spec") {
      EXPECT_EQ(limiter->spec(), *part);  // the static part, the layer's own
      EXPECT_TRUE(calls.empty());
      continue;
    }
    EXPECT_EQ(calls, Calls{"limiter." + c.name}) << c.name;
    const double decisions = c.name == "DecideBatch" ? 2
                             : c.name == "Decide" || c.name == "Charge" ||
                                     c.name == "DecideAsync" || c.name == "ChargeAsync"
                                 ? 1
                                 : 0;
    EXPECT_EQ(Reported(*limiter, "sluice_region_cutoff_decisions_total"), counted + decisions)
        << c.name;
  }
  for (const bool async : {false, true}) {
    const double counted = Reported(*limiter, "sluice_region_cutoff_decisions_total");
    r.rec.Take();
    EXPECT_TRUE(DecideAllOne(*r.store, *limiter, "k", kT0, async).allowed);
    EXPECT_EQ(r.rec.Take(), Calls{"store.DecideAllAsync"});
    EXPECT_EQ(Reported(*limiter, "sluice_region_cutoff_decisions_total"), counted + 1);
  }
}

}  // namespace
}  // namespace sluice
