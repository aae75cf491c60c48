// The store suite's tests (store_suite.h says how a store joins). The oracle is always
// independent of the store under test: the pure algorithms (include/sluice/*.h) on a state per
// key that is never dropped, or values computed by hand.
#include "store/store_suite.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/memory_store.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "store/traffic_time.h"

namespace sluice::testing {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

void PrintTo(const StoreUnderTest& store, std::ostream* os) { *os << store.name; }

std::string StoreSuiteName(const ::testing::TestParamInfo<StoreUnderTest>& info) {
  return info.param.name;
}

std::string UniqueName(std::string_view stem) {
  // The pid alone names a process only while it runs: pids come round again (pid_max 32768 on a
  // busy CI machine: minutes), and the Redis Cluster of the cluster tests outlives the processes
  // with keys of theirs that stay for decades (a leased limiter, destroyed, gives its units back
  // at the leased store's clock, which the suite leaves at 0: decades before the traffic's time,
  // so the key's TTL, the time it takes to replenish from then, is that long). A later process
  // with the same pid found them under its first store's prefix (request 0 refused). A random
  // tag, drawn once per process, tells the two apart.
  static const std::string tag = [] {
    std::random_device random;
    return std::to_string(random()) + std::to_string(random());
  }();
  static std::atomic<int> next{0};
  return std::string(stem) + std::to_string(getpid()) + "." + tag + "-" +
         std::to_string(next.fetch_add(1));
}

void StoreSuite::SetUp() {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  // "<Test>/<n>": the test's own name is before the slash.
  if (auto it = GetParam().skip.find(std::string_view(test).substr(0, test.find('/')));
      it != GetParam().skip.end()) {
    GTEST_SKIP() << GetParam().name << ": " << it->second;
  }
  if (GetParam().set_up) GetParam().set_up();
}

bool StoreSuite::Serves(const LimitSpec& spec) {
  return GetParam().sync.mode == SyncMode::kExact || SharedSyncCanServe(spec);
}

void StoreSuite::RunDue(Store& store, Timestamp now) {
  if (GetParam().run_due) GetParam().run_due(store, now);
}

void StoreSuite::TearDown() {
  for (const auto& calls : callbacks_) {
    EXPECT_EQ(calls->load(), 1) << "an asynchronous `done` was not called exactly once";
  }
}

std::shared_ptr<Store> StoreSuite::Open() {
  std::shared_ptr<Store> store = GetParam().open();
  EXPECT_NE(store, nullptr) << GetParam().name << ": open failed";
  return store;
}

std::unique_ptr<Limiter> StoreSuite::Make(Store& store, const LimitSpec& spec,
                                          const std::string& id, bool fail_open) {
  auto limiter = store.MakeLimiter(
      spec, LimiterOptions{.id = id, .fail_open = fail_open, .sync = GetParam().sync});
  EXPECT_TRUE(limiter.has_value())
      << DescribeLimitSpec(spec) << ": " << (limiter ? "" : limiter.error().message);
  return limiter ? std::move(*limiter) : nullptr;
}

// Waits for an asynchronous answer, bounded: a store that never answers fails the test instead of
// hanging it.
template <typename T>
bool Answered(std::future<T>& answer, const char* what) {
  if (answer.wait_for(seconds(30)) == std::future_status::ready) return true;
  ADD_FAILURE() << what << " did not answer within 30 s";
  return false;
}

std::vector<Decision> StoreSuite::DecideAll(Store& store, std::span<const LimitCheck> checks,
                                            Timestamp now, bool async,
                                            const std::function<void()>& after_return) {
  std::vector<Decision> out(checks.size());
  if (!async) {
    store.DecideAll(checks, now, out);
    if (after_return) after_return();
    return out;
  }
  auto calls = std::make_shared<std::atomic<int>>(0);
  callbacks_.push_back(calls);
  auto promise = std::make_shared<std::promise<std::vector<Decision>>>();
  std::future<std::vector<Decision>> answer = promise->get_future();
  store.DecideAllAsync(checks, now, [calls, promise](std::span<const Decision> decisions) {
    if (calls->fetch_add(1) != 0) return;  // counted: TearDown reports it
    promise->set_value(std::vector<Decision>(decisions.begin(), decisions.end()));
  });
  if (after_return) after_return();
  if (!Answered(answer, "DecideAllAsync")) return out;
  std::vector<Decision> got = answer.get();
  EXPECT_EQ(got.size(), checks.size()) << "one decision per check";
  got.resize(checks.size());
  return got;
}

Decision StoreSuite::Decide(Limiter& limiter, std::string_view key, Timestamp now, int64_t cost,
                            bool async) {
  if (!async) return limiter.Decide(key, now, cost);
  auto calls = std::make_shared<std::atomic<int>>(0);
  callbacks_.push_back(calls);
  auto promise = std::make_shared<std::promise<Decision>>();
  std::future<Decision> answer = promise->get_future();
  limiter.DecideAsync(key, now, cost, [calls, promise](const Decision& d) {
    if (calls->fetch_add(1) == 0) promise->set_value(d);
  });
  return Answered(answer, "DecideAsync") ? answer.get() : Decision{};
}

Duration StoreSuite::Resolved(Duration d) const {
  const int64_t r = GetParam().resolution.count();
  if (d == kNever || r <= 1) return d;
  return Duration((d.count() + r - 1) / r * r);
}

std::string Describe(const Decision& d) {
  std::ostringstream s;
  s << "{allowed " << d.allowed << ", reason " << static_cast<int>(d.reason) << ", degraded "
    << d.degraded << ", limit " << d.limit << ", remaining " << d.remaining << ", reset_after "
    << d.reset_after.count() << ", retry_after " << d.retry_after.count() << ", delay "
    << d.delay.count() << "}";
  return s.str();
}

::testing::AssertionResult StoreSuite::Same(const Decision& got, const Decision& want) const {
  const bool verdict = got.allowed == want.allowed && got.reason == want.reason &&
                       got.degraded == want.degraded && got.limit == want.limit;
  if (verdict && !GetParam().same_in_every_field) return ::testing::AssertionSuccess();
  if (verdict && got.remaining == want.remaining &&
      Resolved(got.reset_after) == Resolved(want.reset_after) &&
      Resolved(got.retry_after) == Resolved(want.retry_after) &&
      Resolved(got.delay) == Resolved(want.delay)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "the store said " << Describe(got) << ", the pure algorithm " << Describe(want);
}

bool StoreSuite::MayRefuse(const LimitSpec& spec) {
  return GetParam().strict_within > Duration(0) && spec.algorithm != Algorithm::kFixedWindow;
}

::testing::AssertionResult StoreSuite::Within(Store& store, const Decision& got,
                                              const Decision& want, const LimitSpec& spec) const {
  if (!MayRefuse(spec)) return Same(got, want);
  if (got.allowed && !want.allowed) {
    return ::testing::AssertionFailure()
           << "one node over-admitted: the store said " << Describe(got) << ", the pure algorithm "
           << Describe(want);
  }
  const bool verdict = got.degraded == want.degraded && got.limit == want.limit &&
                       (got.allowed != want.allowed || got.reason == want.reason);
  const Duration late = Resolved(got.reset_after) - Resolved(want.reset_after);
  const Duration res = std::max(GetParam().resolution, Duration(1));
  const Duration bound = GetParam().strict_within +
                         (GetParam().late_syncs ? GetParam().late_syncs(store) : Duration(0));
  if (verdict && late >= -res && late <= Resolved(bound) + res) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "beyond the bound (" << bound.count() << " ns of refill): the store said "
         << Describe(got) << ", the pure algorithm " << Describe(want) << " (reset_after "
         << late.count() << " ns later)";
}

namespace {

constexpr int64_t kStartMs = 1'700'000'000'000;
Timestamp AtMs(int64_t ms) { return FromNanos(ms * 1'000'000); }

// The oracle: one limit's pure algorithm with a state per key, kept forever (a replenished state
// decides like a fresh one, so a store may drop it; the oracle never does).
class PureLimit {
 public:
  explicit PureLimit(const LimitSpec& spec) : model_(MakeModel(spec)) {}
  PureLimit(const PureLimit& other) : model_(other.model_->Clone()) {}
  PureLimit& operator=(const PureLimit& other) {
    model_ = other.model_->Clone();
    return *this;
  }
  PureLimit(PureLimit&&) noexcept = default;
  PureLimit& operator=(PureLimit&&) noexcept = default;

  // Decides and keeps the new state.
  Decision Decide(const std::string& key, Timestamp now, int64_t cost) {
    return model_->Decide(key, now, cost, /*keep=*/true);
  }
  // Charges (Alg::Charge) and keeps the new state.
  Decision Charge(const std::string& key, Timestamp now, int64_t cost) {
    return model_->Decide(key, now, cost, /*keep=*/true, /*charge=*/true);
  }
  // What Decide would say, changing nothing.
  Decision Ask(const std::string& key, Timestamp now, int64_t cost) const {
    return model_->Decide(key, now, cost, /*keep=*/false);
  }
  // Alg::Refund on the key's state, if it has one (no state: never admitted, nothing to give).
  void Refund(const std::string& key, Timestamp at, Timestamp now, int64_t cost) {
    model_->Refund(key, at, now, cost);
  }
  void Forget(const std::string& key) { model_->Forget(key); }

 private:
  struct Model {
    virtual ~Model() = default;
    virtual std::unique_ptr<Model> Clone() const = 0;
    virtual Decision Decide(const std::string& key, Timestamp now, int64_t cost, bool keep,
                            bool charge = false) const = 0;
    virtual void Refund(const std::string& key, Timestamp at, Timestamp now, int64_t cost) = 0;
    virtual void Forget(const std::string& key) = 0;
  };

  template <typename Alg>
  struct AlgModel final : Model {
    explicit AlgModel(Alg a) : alg(std::move(a)) {}
    std::unique_ptr<Model> Clone() const override { return std::make_unique<AlgModel>(*this); }
    Decision Decide(const std::string& key, Timestamp now, int64_t cost, bool keep,
                    bool charge) const override {
      auto it = states.find(key);
      typename Alg::State state = it != states.end() ? it->second : alg.Initial(now);
      const Decision d = charge ? alg.Charge(state, now, cost) : alg.Decide(state, now, cost);
      if (keep) states.insert_or_assign(key, std::move(state));
      return d;
    }
    void Refund(const std::string& key, Timestamp at, Timestamp now, int64_t cost) override {
      if (auto it = states.find(key); it != states.end()) alg.Refund(it->second, at, now, cost);
    }
    void Forget(const std::string& key) override { states.erase(key); }

    Alg alg;
    mutable std::map<std::string, typename Alg::State> states;
  };

  template <typename Alg>
  static std::unique_ptr<Model> Made(const LimitSpec& spec) {
    auto alg = Alg::Create(spec);
    if (!alg) throw std::invalid_argument(alg.error().message);
    return std::make_unique<AlgModel<Alg>>(std::move(*alg));
  }

  static std::unique_ptr<Model> MakeModel(const LimitSpec& spec) {
    const bool wide = NeedsWideArithmetic(spec);  // the 128-bit buckets, as the memory store
    switch (spec.algorithm) {
      case Algorithm::kTokenBucket:
        return wide ? Made<WideTokenBucket>(spec) : Made<TokenBucket>(spec);
      case Algorithm::kLeakyBucket:
        return wide ? Made<WideLeakyBucket>(spec) : Made<LeakyBucket>(spec);
      case Algorithm::kFixedWindow:
        return Made<FixedWindow>(spec);
      case Algorithm::kSlidingWindowLog:
        return Made<SlidingWindowLog>(spec);
      case Algorithm::kSlidingWindowCounter:
        return Made<SlidingWindowCounter>(spec);
      case Algorithm::kGcra:
        return Made<Gcra>(spec);
    }
    throw std::invalid_argument("unknown algorithm");
  }

  std::unique_ptr<Model> model_;
};

// A spec per algorithm, `limit` per `period` (buckets: burst `burst`).
LimitSpec SpecFor(Algorithm a, int64_t limit, Duration period, int64_t burst) {
  return LimitSpec{a, limit, period, HasBurst(a) ? burst : 0, false};
}

std::string Name(Algorithm a) { return std::string(AlgorithmName(a)); }

// The specs the store under test serves in its sync mode (StoreSuite::Serves), in order.
std::vector<LimitSpec> Served(const std::vector<LimitSpec>& specs) {
  std::vector<LimitSpec> out;
  std::copy_if(specs.begin(), specs.end(), std::back_inserter(out), StoreSuite::Serves);
  return out;
}

// Random millisecond traffic over five keys, with bursts and idle gaps: about two hits per key
// per limit-share of the period, so limits both admit and refuse.
struct Hit {
  int64_t gap_ms;  // since the previous hit
  std::string key;
  int64_t cost;
};
std::vector<Hit> Traffic(uint64_t seed, int n, const LimitSpec& spec) {
  const int64_t period_ms = spec.period.count() / 1'000'000;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> key(0, 4), cost(1, 3), idle(0, 300);
  std::uniform_int_distribution<int64_t> gap(0, period_ms / (spec.limit * 4) + 1);
  std::vector<Hit> out;
  for (int i = 0; i < n; ++i) {
    int64_t t = gap(rng);
    if (idle(rng) == 0) t += 2 * period_ms;
    out.push_back({t, "client-" + std::to_string(key(rng)), cost(rng)});
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// DecideAll and DecideAllAsync: all or nothing.

// Six limits, one per algorithm (the leaky bucket a shaper).
const std::vector<LimitSpec>& SixLimits() {
  static const std::vector<LimitSpec> specs = {
      {Algorithm::kTokenBucket, 10, seconds(1), 6, false},
      {Algorithm::kFixedWindow, 8, seconds(1), 0, false},
      {Algorithm::kSlidingWindowLog, 9, seconds(1), 0, false},
      {Algorithm::kGcra, 7, seconds(1), 5, false},
      {Algorithm::kSlidingWindowCounter, 12, seconds(1), 0, false},
      {Algorithm::kLeakyBucket, 6, seconds(1), 4, true},
  };
  return specs;
}

// Whether a leased bucket's `remaining` one below the pure algorithm's `want` is Redis's rounding,
// not quota kept. A leased bucket decides from the units it holds and reports its level as the
// shared bucket's, read back from Redis's last answer and refilled since, plus the units
// (LeaseBook::LocalDecision). Redis rounds that answer's reset_after up to its microsecond, so
// the level read back is low by less than a microsecond's refill, and where the pure bucket's
// level lies that close above a whole token -- or on it, as 1.0 token of GCRA 7/s, burst 5, four
// emission intervals (4/7 s) before full -- the leased decision counts that token as not yet
// there. One below, on the safe side (the verdict is the units', exact); the decisions that
// follow show whether anything was kept. `want.reset_after` is itself rounded up to the
// nanosecond, which puts its level below the true one by less than a nanosecond's refill.
bool LeasedLevelReadsOneLow(const Decision& want, const LimitSpec& spec) {
  if (spec.algorithm == Algorithm::kFixedWindow || spec.algorithm == Algorithm::kSlidingWindowLog ||
      spec.algorithm == Algorithm::kSlidingWindowCounter) {
    return false;
  }
  // In units of 1/period of a token: a token is `period` of them, a nanosecond refills `limit`.
  const __int128 period = spec.period.count(), limit = spec.limit;
  const __int128 level = static_cast<__int128>(want.limit) * period -
                         static_cast<__int128>(want.reset_after.count()) * limit;
  const __int128 above = level - static_cast<__int128>(want.remaining) * period;
  return above < 1001 * limit;
}

// Requests checked against random subsets of the six limits, over three users, against the pure
// algorithms: a request is admitted iff each of its limits, decided in turn, admits it, and only
// then does the oracle keep anything. A refused request's admitting limits report `remaining` as
// the oracle's untouched state has it (as after the give-back); its refusing ones are each limit's
// own verdict. Every later decision shows whether a refused request kept anything.
void ExpectAllOrNothing(StoreSuite& suite, bool async) {
  const StoreUnderTest& param = StoreSuite::GetParam();
  auto store = suite.Open();
  ASSERT_NE(store, nullptr);
  const std::vector<LimitSpec> specs = Served(SixLimits());
  std::vector<std::string> ids;
  std::vector<std::unique_ptr<Limiter>> limiters;
  std::vector<PureLimit> oracle;
  for (size_t i = 0; i < specs.size(); ++i) {
    ids.push_back("all" + std::to_string(i));
    limiters.push_back(suite.Make(*store, specs[i], ids.back()));
    ASSERT_NE(limiters.back(), nullptr);
    oracle.emplace_back(specs[i]);
  }
  std::mt19937_64 rng(3);
  TrafficTime time(kStartMs * 1'000'000, 1'000'000);
  int admitted = 0, partly_admitted = 0, spanning = 0, several = 0, outran = 0, rounded = 0;
  bool resync = false;
  const int requests = 1500 * param.traffic_scale;
  for (int n = 0; n < requests; ++n) {
    // After a request the store's own clock outran, a pause every limit replenishes in (the
    // longest takes two 1 s windows), in the store and in the oracle: they agree again.
    const int64_t pause_ns = resync ? int64_t{5'000'000'000} : 0;
    const Timestamp now =
        time.Advance(static_cast<int64_t>(rng() % 60) * 1'000'000 + pause_ns, *store);
    const std::string user = "u" + std::to_string(rng() % 3);
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 2);
    std::vector<size_t> chosen;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (rng() % 2 == 0) chosen.push_back(i);
    }
    if (chosen.empty()) chosen.push_back(rng() % specs.size());

    std::map<size_t, PureLimit> scratch;  // the oracle decides on copies
    std::vector<Decision> want, before, asked;
    for (size_t i : chosen) {
      PureLimit& limit = scratch.try_emplace(i, oracle[i]).first->second;
      before.push_back(limit.Ask(user, now, 0));
      asked.push_back(limit.Ask(user, now, cost));
      asked.back().reset_after = before.back().reset_after;  // of the state, nothing taken
      want.push_back(limit.Decide(user, now, cost));
    }
    const bool all =
        std::all_of(want.begin(), want.end(), [](const Decision& d) { return d.allowed; });

    // The keys are overwritten as soon as the call returns: a store reads them before it returns.
    std::vector<std::string> keys(chosen.size(), user);
    std::vector<LimitCheck> checks;
    for (size_t k = 0; k < chosen.size(); ++k) {
      checks.push_back({limiters[chosen[k]].get(), keys[k], cost});
    }
    const std::vector<Decision> out = suite.DecideAll(*store, checks, now, async, [&keys] {
      for (std::string& key : keys) key.assign(key.size(), '#');
    });
    // A key may have expired in real time mid-request (TrafficTime): the store's answer is then
    // right for the state it had, which the oracle's is not. Not compared; counted below.
    resync = time.Outran();
    if (resync) {
      ++outran;
      continue;
    }
    // Where the store may be stricter (StoreUnderTest::strict_within), a limit may refuse what
    // the oracle admits, within the bound: the request is then refused, and the oracle keeps
    // nothing either.
    const bool admitted_here =
        std::all_of(out.begin(), out.end(), [](const Decision& d) { return d.allowed; });
    ASSERT_TRUE(admitted_here == all || (all && param.strict_within > Duration(0)))
        << "request " << n << (async ? " (async)" : "") << ": the store "
        << (admitted_here ? "admitted" : "refused") << " it, the pure algorithms did not";
    if (all && admitted_here) {
      for (auto& [i, limit] : scratch) oracle[i] = std::move(limit);
    }
    bool some = false;
    for (size_t k = 0; k < checks.size(); ++k) {
      const std::string where = "request " + std::to_string(n) + ", limit " +
                                std::to_string(chosen[k]) + (async ? " (async)" : "");
      const LimitSpec& spec = specs[chosen[k]];
      ASSERT_FALSE(out[k].degraded) << where;
      if (out[k].allowed != want[k].allowed) {
        ASSERT_TRUE(StoreSuite::MayRefuse(spec)) << where << ": the store said " << Describe(out[k])
                                                 << ", the pure algorithm " << Describe(want[k]);
        ASSERT_TRUE(suite.Within(*store, out[k], asked[k], spec)) << where;
        continue;
      }
      some = some || want[k].allowed;
      if (admitted_here || !want[k].allowed) {
        ASSERT_TRUE(suite.Within(*store, out[k], want[k], spec)) << where;
      } else if (StoreSuite::MayRefuse(spec)) {
        // Its durations as decided (before the give-back), its remaining maybe behind.
        ASSERT_TRUE(suite.Within(*store, out[k], want[k], spec)) << where << ": given back";
        ASSERT_LE(out[k].remaining, before[k].remaining) << where << ": as after the give-back";
      } else if (!param.same_in_every_field && out[k].remaining + 1 == before[k].remaining &&
                 LeasedLevelReadsOneLow(want[k], spec)) {
        ++rounded;  // the level as Redis's microsecond shows it (LeasedLevelReadsOneLow)
      } else {
        ASSERT_EQ(out[k].remaining, before[k].remaining)
            << where << ": as after the give-back, " << Describe(out[k]) << "; before "
            << Describe(before[k]) << ", decided " << Describe(want[k]);
      }
    }
    if (param.partition_of) {
      std::set<int> partitions;
      for (size_t i : chosen) partitions.insert(param.partition_of(ids[i], user));
      spanning += partitions.size() > 1 ? 1 : 0;
      several += chosen.size() > 1 ? 1 : 0;
    }
    admitted += admitted_here ? 1 : 0;
    partly_admitted += !admitted_here && some ? 1 : 0;
  }
  // Only a machine far too slow for the traffic's pace leaves few requests to compare (one core
  // shared with a busy loop and other tests skipped about a tenth).
  const int compared = requests - outran;
  EXPECT_LT(outran, requests / 2)
      << outran << " of " << requests
      << " requests ran slower than the traffic's time (TrafficTime::Outran): not compared";
  // The case that matters -- some limits admitted and must not keep the quota -- was common.
  EXPECT_GT(admitted, compared / 8);
  EXPECT_GT(partly_admitted, compared / 15);
  if (param.partition_of) {
    // Most of the requests that check more than one limit span partitions. (Not most of
    // all those compared: with the three limits a leased or batched store serves, half the
    // requests check one limit, and requests skipped as outran could tip that half either way.)
    EXPECT_GT(spanning, several / 2) << "the requests should span the store's partitions";
  }
  if (rounded > 0) {
    std::printf("%d given-back leased decisions read one token low (Redis's microsecond)\n",
                rounded);
  }
  if (param.check_all_or_nothing) param.check_all_or_nothing(*store, partly_admitted);
}

}  // namespace

TEST_P(StoreSuite, DecideAllIsAllOrNothing) { ExpectAllOrNothing(*this, /*async=*/false); }

TEST_P(StoreSuite, DecideAllAsyncIsAllOrNothing) { ExpectAllOrNothing(*this, /*async=*/true); }

// Hand-computed: seven limits (in a cluster, spread over hash slots), three requests admitted by
// all, the fourth refused by the first: every other limit still has exactly 7 of its 10.
TEST_P(StoreSuite, ARejectedRequestTakesNothingFromAnyLimit) {
  const std::vector<LimitSpec> specs = Served({
      {Algorithm::kFixedWindow, 3, seconds(60), 0, false},  // the one that will say no
      {Algorithm::kTokenBucket, 1, seconds(60), 10, false},
      {Algorithm::kGcra, 1, seconds(60), 10, false},
      {Algorithm::kLeakyBucket, 1, seconds(60), 10, false},
      {Algorithm::kFixedWindow, 10, seconds(60), 0, false},
      {Algorithm::kSlidingWindowCounter, 10, seconds(60), 0, false},
      {Algorithm::kSlidingWindowLog, 10, seconds(60), 0, false},
  });
  // Minute-aligned, so every request is in one fixed window.
  const Timestamp now = FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000);
  for (bool async : {false, true}) {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    std::vector<std::unique_ptr<Limiter>> limiters;
    std::vector<LimitCheck> checks;
    std::set<int> partitions;
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string id = "back" + std::to_string(i);
      limiters.push_back(Make(*store, specs[i], id));
      ASSERT_NE(limiters.back(), nullptr);
      checks.push_back({limiters.back().get(), "alice", 1});
      if (GetParam().partition_of) partitions.insert(GetParam().partition_of(id, "alice"));
    }
    if (GetParam().partition_of) {
      ASSERT_GT(partitions.size(), 3u) << "the limits should spread over partitions";
    }
    for (int n = 0; n < 3; ++n) {
      for (const Decision& d : DecideAll(*store, checks, now, async)) {
        ASSERT_TRUE(d.allowed && !d.degraded) << "request " << n;
      }
    }
    const std::vector<Decision> out = DecideAll(*store, checks, now, async);
    EXPECT_FALSE(out[0].allowed);
    for (size_t i = 1; i < out.size(); ++i) {
      EXPECT_TRUE(out[i].allowed) << i;
      EXPECT_EQ(out[i].remaining, 7) << "reported as after the give-back, limit " << i;
      EXPECT_EQ(limiters[i]->Decide("alice", now, 0).remaining, 7)
          << AlgorithmName(specs[i].algorithm) << ": the rejected request kept quota"
          << (async ? " (async)" : "");
    }
    if (GetParam().check_all_or_nothing) GetParam().check_all_or_nothing(*store, 1);
  }
}

// The same limiter and key twice in one request: each check takes its own cost, so the request
// takes both or neither -- also when a third limit refuses it, whatever the order of the costs.
TEST_P(StoreSuite, ALimitCheckedTwiceTakesBothCostsOrNeither) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoreUnderTest& param = GetParam();
  const Timestamp now = AtMs(kStartMs);
  for (bool async : {false, true}) {
    for (Algorithm a : kAllAlgorithms) {
      if (!Serves(SpecFor(a, 3, hours(1), 3))) continue;
      const std::string at = Name(a) + (async ? "-async" : "-sync");
      // Room for one of the two: the first admits, the second refuses, the first gives back.
      auto three = Make(*store, SpecFor(a, 3, hours(1), 3), "three-" + at);
      ASSERT_NE(three, nullptr);
      std::vector<LimitCheck> checks = {{three.get(), "k", 2}, {three.get(), "k", 2}};
      std::vector<Decision> out = DecideAll(*store, checks, now, async);
      EXPECT_TRUE(out[0].allowed) << at;
      EXPECT_EQ(out[0].remaining, 3) << at << ": as after the give-back";
      EXPECT_FALSE(out[1].allowed) << at;
      EXPECT_EQ(out[1].reason, DecisionReason::kOverLimit) << at;
      EXPECT_EQ(three->Decide("k", now, 0).remaining, 3) << at << ": neither cost was kept";
      if (param.counts_keys) {
        EXPECT_EQ(three->Stats().keys, 0u) << at << ": refunded to fresh, so not held";
      }

      // Room for both: both are taken.
      auto four = Make(*store, SpecFor(a, 4, hours(1), 4), "four-" + at);
      ASSERT_NE(four, nullptr);
      checks = {{four.get(), "k", 2}, {four.get(), "k", 2}};
      out = DecideAll(*store, checks, now, async);
      EXPECT_TRUE(out[0].allowed && out[1].allowed) << at;
      EXPECT_EQ(out[0].remaining, 2) << at;
      EXPECT_EQ(out[1].remaining, 0) << at;
      EXPECT_EQ(four->Decide("k", now, 0).remaining, 0) << at;

      // Room for both, but a full limit (in another partition, if the store has them) refuses.
      const std::string five_id = "five-" + at, full_id = "full-" + at;
      auto five = Make(*store, SpecFor(a, 5, hours(1), 5), five_id);
      auto full = Make(*store, {Algorithm::kFixedWindow, 1, hours(1), 0, false}, full_id);
      ASSERT_TRUE(five != nullptr && full != nullptr);
      std::string other = "r";
      for (int i = 0; param.partition_of &&
                      param.partition_of(full_id, other) == param.partition_of(five_id, "k");
           ++i) {
        other = "r" + std::to_string(i);
      }
      ASSERT_TRUE(full->Decide(other, now, 1).allowed);
      // Then a null limiter refuses: decided before the store is asked, the others given back.
      for (Limiter* refuser : {full.get(), static_cast<Limiter*>(nullptr)}) {
        const std::string by =
            at + (refuser != nullptr ? ", refused by a full limit" : ", refused by a null limiter");
        checks = {{five.get(), "k", 1}, {five.get(), "k", 2}, {refuser, other, 1}};
        out = DecideAll(*store, checks, now, async);
        EXPECT_TRUE(out[0].allowed && out[1].allowed) << by;
        EXPECT_FALSE(out[2].allowed) << by;
        EXPECT_EQ(out[0].remaining, 5) << by << ": as after the give-back";
        EXPECT_EQ(five->Decide("k", now, 0).remaining, 5) << by << ": a cost was kept";
      }
    }
  }
}

// A null limiter, one made by another instance of the same kind of store, and one made by no
// store are each kInvalidRequest, and refuse the request: the store's own limit keeps nothing.
TEST_P(StoreSuite, NullAndForeignLimitersAreInvalidAndRejectTheRequest) {
  auto store = Open();
  auto other = Open();
  ASSERT_TRUE(store != nullptr && other != nullptr);
  const LimitSpec spec{Algorithm::kTokenBucket, 10, seconds(1), 10, false};
  auto mine = Make(*store, spec, "mine");
  auto theirs = Make(*other, spec, "mine");  // the same id, in the other instance
  auto bare = MakeMemoryLimiter(spec);
  ASSERT_TRUE(mine != nullptr && theirs != nullptr && bare.has_value());
  struct Intruder {
    const char* what;
    Limiter* limiter;
  };
  const Intruder intruders[] = {{"a null limiter", nullptr},
                                {"another instance's limiter", theirs.get()},
                                {"a limiter of no store", bare->get()}};
  const Timestamp now = AtMs(kStartMs);
  int n = 0;
  for (bool async : {false, true}) {
    for (const Intruder& intruder : intruders) {
      for (bool intruder_first : {false, true}) {
        const std::string key = "k" + std::to_string(n++);
        const std::string where = std::string(intruder.what) +
                                  (intruder_first ? " first" : " last") + (async ? " (async)" : "");
        const LimitCheck own{mine.get(), key, 1}, foreign{intruder.limiter, key, 1};
        const std::vector<LimitCheck> checks =
            intruder_first ? std::vector{foreign, own} : std::vector{own, foreign};
        const std::vector<Decision> out = DecideAll(*store, checks, now, async);
        const Decision& bad = out[intruder_first ? 0 : 1];
        const Decision& good = out[intruder_first ? 1 : 0];
        EXPECT_FALSE(bad.allowed) << where;
        EXPECT_EQ(bad.reason, DecisionReason::kInvalidRequest) << where;
        EXPECT_EQ(bad.retry_after, kNever) << where;
        EXPECT_TRUE(good.allowed) << where;
        EXPECT_EQ(good.remaining, 10) << where << ": as after the give-back";
        EXPECT_EQ(mine->Decide(key, now, 0).remaining, 10) << where << ": the request kept quota";
        if (intruder.limiter != nullptr) {
          EXPECT_EQ(intruder.limiter->Decide(key, now, 0).remaining, 10)
              << where << ": decided by a store that did not make it";
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Parity with the pure algorithms.

namespace {

// The oracle's decision for what the store decided `got`: where the store may be stricter
// (StoreSuite::MayRefuse) and refused what the pure algorithm admits, the oracle keeps nothing
// either and says what it would have decided, with its state's reset_after (as a refusal
// reports it); otherwise it decides.
Decision Follow(PureLimit& oracle, const LimitSpec& spec, const std::string& key, Timestamp now,
                int64_t cost, const Decision& got) {
  Decision asked = oracle.Ask(key, now, cost);
  if (!got.allowed && asked.allowed && StoreSuite::MayRefuse(spec)) {
    asked.reset_after = oracle.Ask(key, now, 0).reset_after;  // of the state, nothing taken
    return asked;
  }
  return oracle.Decide(key, now, cost);
}

// Every decision for `spec`'s traffic equals the pure algorithm's on a state per key, on every
// field; now and then a key is reset (the oracle forgets it too).
void ExpectParity(StoreSuite& suite, Store& store, const LimitSpec& spec, const std::string& id,
                  uint64_t seed, int n, bool async) {
  const StoreUnderTest& param = StoreSuite::GetParam();
  auto limiter = suite.Make(store, spec, id);
  ASSERT_NE(limiter, nullptr);
  PureLimit oracle(spec);
  int admitted = 0, refused = 0;
  n *= param.traffic_scale;
  const std::vector<Hit> traffic = Traffic(seed, n, spec);
  TrafficTime time(kStartMs * 1'000'000, 1'000'000);
  for (size_t i = 0; i < traffic.size(); ++i) {
    const Hit& hit = traffic[i];
    const Timestamp now = time.Advance(hit.gap_ms * 1'000'000, store);
    const std::string& key = hit.key;
    if (i % 150 == 149) {
      limiter->Reset(key);
      oracle.Forget(key);
    }
    if (param.drop_replenished && i % 100 == 0) param.drop_replenished(*limiter, now);
    const Decision got = suite.Decide(*limiter, key, now, hit.cost, async);
    // After a request that outran (TrafficTime), the key may have expired in real time: the
    // store's answer is then right for a fresh state, and the oracle takes that state.
    std::optional<PureLimit> fresh;
    if (time.Outran()) {
      fresh.emplace(oracle);
      fresh->Forget(key);
    }
    const Decision want = Follow(oracle, spec, key, now, hit.cost, got);
    if (fresh && !suite.Within(store, got, want, spec)) {
      const Decision fresh_want = Follow(*fresh, spec, key, now, hit.cost, got);
      if (suite.Within(store, got, fresh_want, spec)) {
        oracle = std::move(*fresh);
        (fresh_want.allowed ? admitted : refused)++;
        continue;
      }
    }
    ASSERT_TRUE(suite.Within(store, got, want, spec))
        << DescribeLimitSpec(spec) << ", request " << i << (async ? " (async)" : "");
    (want.allowed ? admitted : refused)++;
  }
  EXPECT_GT(admitted, n / 10) << DescribeLimitSpec(spec);
  EXPECT_GT(refused, n / 50) << DescribeLimitSpec(spec);
}

}  // namespace

TEST_P(StoreSuite, DecidesAsThePureAlgorithm) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::vector<LimitSpec> specs = {
      {Algorithm::kTokenBucket, 10, seconds(1), 20, false},
      {Algorithm::kTokenBucket, 3, seconds(1), 5, false},  // a rate that does not divide
      {Algorithm::kTokenBucket, 100, std::chrono::minutes(1), 100, false},
      {Algorithm::kGcra, 10, seconds(1), 20, false},
      {Algorithm::kGcra, 3, seconds(1), 5, false},
      {Algorithm::kLeakyBucket, 10, seconds(1), 20, false},
      {Algorithm::kLeakyBucket, 3, seconds(1), 5, true},  // shaper: delays must match too
      // A shaper that refuses what would wait over 1.5s though the queue holds 3s.
      {Algorithm::kLeakyBucket, 3, seconds(1), 9, true, milliseconds(1500)},
      {Algorithm::kFixedWindow, 10, seconds(1), 0, false},
      {Algorithm::kFixedWindow, 7, milliseconds(250), 0, false},
      {Algorithm::kSlidingWindowCounter, 10, seconds(1), 0, false},
      {Algorithm::kSlidingWindowCounter, 7, milliseconds(300), 0, false},
      {Algorithm::kSlidingWindowLog, 10, seconds(1), 0, false},
      {Algorithm::kSlidingWindowLog, 7, milliseconds(300), 0, false},
  };
  for (size_t n = 0; n < specs.size(); ++n) {
    if (!Serves(specs[n])) continue;
    ExpectParity(*this, *store, specs[n], "parity" + std::to_string(n), 100 + n, 1000, false);
  }
  if (GetParam().check_parity) GetParam().check_parity(*store);
}

TEST_P(StoreSuite, DecideAsyncDecidesAsThePureAlgorithm) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (Algorithm a : kAllAlgorithms) {
    LimitSpec spec = SpecFor(a, 3, seconds(1), 5);
    spec.shaper = a == Algorithm::kLeakyBucket;
    if (!Serves(spec)) continue;
    ExpectParity(*this, *store, spec, "async-" + Name(a), 21, 300, true);
  }
  if (GetParam().check_parity) GetParam().check_parity(*store);
}

// Rates past 64-bit arithmetic (issue 25, "The whole range"): rates that do not divide their
// unit, limits and bursts up to 2^32-1, per second to per year, with costs up to the capacity
// and gaps up to the fill time, decide as the pure algorithm (itself checked against exact
// oracles in tests/core/range_property_test.cc), on every store: Redis's wide scripts too.
TEST_P(StoreSuite, WideRatesDecideAsThePureAlgorithm) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  using std::chrono::hours;
  const std::vector<LimitSpec> specs = {
      {Algorithm::kTokenBucket, 30001, hours(24), 0, false},
      {Algorithm::kTokenBucket, 7, hours(24), 100'000, false},
      {Algorithm::kGcra, 999999, hours(24 * 30), 0, false},
      {Algorithm::kGcra, 4294967291, hours(24 * 365), 4294967295, false},
      {Algorithm::kLeakyBucket, 4294967295, hours(24 * 365), 0, false},
      {Algorithm::kLeakyBucket, 999999, hours(24 * 30), 0, true},
      {Algorithm::kFixedWindow, 4294967295, hours(24 * 7), 0, false},
      {Algorithm::kSlidingWindowCounter, 2147483647, seconds(1), 0, false},
      {Algorithm::kSlidingWindowCounter, 30001, hours(24 * 365), 0, false},
  };
  for (size_t n = 0; n < specs.size(); ++n) {
    const LimitSpec& spec = specs[n];
    if (!Serves(spec)) continue;
    auto limiter = Make(*store, spec, "wide" + std::to_string(n));
    ASSERT_NE(limiter, nullptr) << DescribeLimitSpec(spec);
    PureLimit oracle(spec);
    std::mt19937_64 rng(500 + n);
    const int64_t capacity = spec.Capacity();
    const int64_t fill_ms = static_cast<int64_t>(static_cast<__int128>(capacity) *
                                                 spec.period.count() / spec.limit / 1'000'000);
    // Gaps of at most half a year: 300 requests then span at most 100 years, inside the stated
    // time bound (docs/algorithms.md, "The exact range": times below 2^53 us), even for a
    // 39-year fill (7/1d burst 100000), where half-fill gaps would run past the year 2262.
    constexpr int64_t kHalfYearMs = int64_t{365} * 24 * 3600 * 1000 / 2;
    std::uniform_int_distribution<int64_t> gap(0, std::min(fill_ms / 2 + 1, kHalfYearMs)),
        any_cost(1, capacity);
    TrafficTime time(kStartMs * 1'000'000, 1'000'000);
    int admitted = 0, refused = 0;
    for (int i = 0; i < 300; ++i) {
      const Timestamp now = time.Advance(rng() % 3 == 0 ? 0 : gap(rng) * 1'000'000);
      RunDue(*store, now);
      const int64_t costs[] = {1, capacity / 2 + 1, capacity, any_cost(rng)};
      const int64_t cost = costs[rng() % 4];
      const std::string key = "client-" + std::to_string(rng() % 3);
      const Decision got = Decide(*limiter, key, now, cost);
      // As in ExpectParity: after a request that outran, a fresh state may be the store's.
      std::optional<PureLimit> fresh;
      if (time.Outran()) {
        fresh.emplace(oracle);
        fresh->Forget(key);
      }
      const Decision want = oracle.Decide(key, now, cost);
      if (fresh && !Same(got, want)) {
        const Decision fresh_want = fresh->Decide(key, now, cost);
        if (Same(got, fresh_want)) {
          oracle = std::move(*fresh);
          (fresh_want.allowed ? admitted : refused)++;
          continue;
        }
      }
      ASSERT_TRUE(Same(got, want)) << DescribeLimitSpec(spec) << ", request " << i;
      (want.allowed ? admitted : refused)++;
    }
    EXPECT_GT(admitted, 30) << DescribeLimitSpec(spec);
    EXPECT_GT(refused, 30) << DescribeLimitSpec(spec);
  }
}

// ------------------------------------------------------------------------------------------------
// Charges (Limiter::Charge, LimitCheck::charge).

// Decisions and charges mixed -- a third charges, some of several capacities -- through
// Limiter::Charge and through DecideAll's charge checks: every field is the pure algorithm's.
TEST_P(StoreSuite, ChargesMatchThePureAlgorithm) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (Algorithm a : kAllAlgorithms) {
    for (int64_t period_ms : {1000, 300}) {
      const LimitSpec spec = SpecFor(a, 4, milliseconds(period_ms), 6);
      if (!Serves(spec)) continue;
      const std::string id = "charge-" + Name(a) + std::to_string(period_ms);
      auto limiter = Make(*store, spec, id);
      ASSERT_NE(limiter, nullptr);
      PureLimit oracle(spec);
      const std::vector<Hit> traffic = Traffic(7 + period_ms, 300 * GetParam().traffic_scale, spec);
      TrafficTime time(kStartMs * 1'000'000, 1'000'000);
      int in_debt = 0;
      for (size_t i = 0; i < traffic.size(); ++i) {
        const Timestamp now = time.Advance(traffic[i].gap_ms * 1'000'000, *store);
        const std::string key = time.Key(traffic[i].key);
        const int kind = static_cast<int>(i % 6);  // 0, 1: charge; 2: big charge; else decide
        const int64_t cost = kind == 2 ? 5 * spec.Capacity() : traffic[i].cost;
        Decision got;
        if (kind == 0 || kind == 2) {
          got = limiter->Charge(key, now, cost);
        } else if (kind == 1) {
          const LimitCheck check{limiter.get(), key, cost, /*charge=*/true};
          got = DecideAll(*store, std::span(&check, 1), now, i % 4 == 1).front();
        } else {
          got = Decide(*limiter, key, now, cost);
        }
        if (time.Renew()) continue;
        // A charge is taken whatever the verdict: only its `allowed` may be stricter.
        const Decision want =
            kind < 3 ? oracle.Charge(key, now, cost) : Follow(oracle, spec, key, now, cost, got);
        ASSERT_TRUE(Within(*store, got, want, spec))
            << DescribeLimitSpec(spec) << ", request " << i;
        in_debt += !oracle.Ask(key, now, 0).allowed;
      }
      EXPECT_LT(time.renewals(), 30) << DescribeLimitSpec(spec) << ": requests that outran";
      EXPECT_GT(in_debt, 10) << DescribeLimitSpec(spec) << ": the traffic should go into debt";
    }
  }
  if (GetParam().check_parity) GetParam().check_parity(*store);
}

// A request with a charge and a decision: when the decision refuses, the charge stays taken (it
// is for work already done); when the charge does not fit, the request is refused and the
// decision's admission is given back.
TEST_P(StoreSuite, AChargeIsNeverGivenBack) {
  const Timestamp now = FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000);  // minute-aligned
  for (bool async : {false, true}) {
    for (Algorithm a : kAllAlgorithms) {
      if (!Serves(SpecFor(a, 3, seconds(60), 3))) continue;
      auto store = Open();
      ASSERT_NE(store, nullptr);
      const std::string where = Name(a) + (async ? " (async)" : "");
      auto charged = Make(*store, SpecFor(a, 3, seconds(60), 3), "charged");
      auto strict = Make(*store, SpecFor(Algorithm::kFixedWindow, 1, seconds(60), 0), "strict");
      ASSERT_TRUE(charged != nullptr && strict != nullptr);
      ASSERT_TRUE(strict->Decide("bob", now, 1).allowed);  // strict is now full
      const LimitCheck first[] = {{charged.get(), "bob", 2, true}, {strict.get(), "bob", 1}};
      std::vector<Decision> out = DecideAll(*store, first, now, async);
      EXPECT_TRUE(out[0].allowed) << where;
      EXPECT_EQ(out[0].remaining, 1) << where << ": a charge is not reported as given back";
      EXPECT_FALSE(out[1].allowed) << where;
      EXPECT_EQ(charged->Decide("bob", now, 0).remaining, 1) << where << ": the charge stayed";

      auto other = Make(*store, SpecFor(Algorithm::kTokenBucket, 5, seconds(60), 5), "other");
      ASSERT_NE(other, nullptr);
      const LimitCheck second[] = {{other.get(), "bob", 1}, {charged.get(), "bob", 4, true}};
      out = DecideAll(*store, second, now, async);
      EXPECT_TRUE(out[0].allowed) << where;
      EXPECT_EQ(out[0].remaining, 5) << where << ": reported as after the give-back";
      EXPECT_FALSE(out[1].allowed) << where << ": 4 did not fit in 1";
      EXPECT_EQ(out[1].reason, DecisionReason::kCostExceedsCapacity) << where;
      EXPECT_EQ(other->Decide("bob", now, 0).remaining, 5) << where << ": given back";
      // The charge went into debt: 1 - 4 = -3, capped at one capacity (-3).
      const Decision zero = charged->Decide("bob", now, 0);
      EXPECT_FALSE(zero.allowed) << where << ": in debt, a cost-0 check is over the limit";
      EXPECT_EQ(zero.remaining, 0) << where;
    }
  }
}

// Quota checks (LimitCheck::quota, envoyproxy/ratelimit's quota_mode) refuse a request only
// together: one of two refusing leaves the request admitted and every admission kept; both
// refusing refuse it, and the other limit's admission is given back.
TEST_P(StoreSuite, QuotaChecksRefuseTheRequestOnlyTogether) {
  const Timestamp now = FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000);  // minute-aligned
  for (bool async : {false, true}) {
    for (bool charge : {false, true}) {
      auto store = Open();
      ASSERT_NE(store, nullptr);
      const std::string where =
          std::string(charge ? "charged" : "decided") + (async ? " (async)" : "");
      auto plain = Make(*store, SpecFor(Algorithm::kTokenBucket, 10, seconds(60), 10), "plain");
      auto q1 = Make(*store, SpecFor(Algorithm::kFixedWindow, 1, seconds(60), 0), "q1");
      // Three in a minute: a sliding log where the mode serves it, else a fixed window.
      const LimitSpec log = SpecFor(Algorithm::kSlidingWindowLog, 3, seconds(60), 0);
      auto q2 = Make(*store,
                     Serves(log) ? log : SpecFor(Algorithm::kFixedWindow, 3, seconds(60), 0), "q2");
      ASSERT_TRUE(plain != nullptr && q1 != nullptr && q2 != nullptr);
      const LimitCheck checks[] = {{plain.get(), "ann", 1},
                                   {q1.get(), "ann", 1, charge, /*quota=*/true},
                                   {q2.get(), "ann", 1, charge, /*quota=*/true}};
      // 1: all fit. 2 and 3: q1 refuses, q2 fits: admitted.
      for (int n = 1; n <= 3; ++n) {
        const std::vector<Decision> out = DecideAll(*store, checks, now, async);
        EXPECT_TRUE(out[0].allowed) << where << " request " << n;
        EXPECT_EQ(out[1].allowed, n == 1) << where << " request " << n;
        EXPECT_TRUE(out[2].allowed) << where << " request " << n;
        EXPECT_EQ(plain->Decide("ann", now, 0).remaining, 10 - n) << where << ": kept";
      }
      // 4: both quota checks refuse: refused, plain's admission given back.
      const std::vector<Decision> out = DecideAll(*store, checks, now, async);
      EXPECT_TRUE(out[0].allowed) << where;
      EXPECT_FALSE(out[1].allowed || out[2].allowed) << where;
      EXPECT_EQ(out[0].remaining, 7) << where << ": reported as after the give-back";
      EXPECT_EQ(plain->Decide("ann", now, 0).remaining, 7) << where << ": given back";
      // Charged quota limits counted every hit (into debt); decided ones only what fitted.
      EXPECT_EQ(q1->Decide("ann", now, 0).allowed, !charge) << where;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Refunds.

namespace {

LimitSpec RefundSpec(Algorithm a) {
  return LimitSpec{a, 5, milliseconds(200), HasBurst(a) ? 8 : 0, a == Algorithm::kLeakyBucket};
}

}  // namespace

// Random keys and microsecond times with idle gaps (so counters replenish, and a store may drop
// them). A third of the admitted requests are refunded at once, at their own time: the oracle
// never sees them, and no later decision may tell.
TEST_P(StoreSuite, RefundAtTheRequestsOwnTimeIsAnExactUndo) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoreUnderTest& param = GetParam();
  uint64_t seed = 1;
  for (Algorithm a : kAllAlgorithms) {
    const LimitSpec spec = RefundSpec(a);
    if (!Serves(spec)) continue;
    auto limiter = Make(*store, spec, "undo-" + Name(a));
    ASSERT_NE(limiter, nullptr);
    PureLimit oracle(spec);
    std::mt19937_64 rng(seed++);
    const int64_t D = spec.period.count();
    TrafficTime time(kStartMs * 1'000'000, 1'000);
    int undone = 0;
    const int requests = 1500 * param.traffic_scale;
    for (int i = 0; i < requests; ++i) {
      int64_t gap = static_cast<int64_t>(rng() % static_cast<uint64_t>(D / 8));
      if (rng() % 40 == 0) gap += 3 * D;
      const Timestamp now = time.Advance(gap, *store);
      if (param.drop_replenished && i % 100 == 0) param.drop_replenished(*limiter, now);
      const std::string key = time.Key("key-" + std::to_string(rng() % 20));
      const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
      const Decision got = limiter->Decide(key, now, cost);
      const bool undo = got.allowed && rng() % 3 == 0;
      if (time.Renew()) {
        if (undo) limiter->Refund(key, now, now, cost);
        continue;
      }
      const Decision want =
          undo ? oracle.Ask(key, now, cost) : Follow(oracle, spec, key, now, cost, got);
      ASSERT_TRUE(Within(*store, got, want, spec)) << Name(a) << ", request " << i;
      if (undo) {
        limiter->Refund(key, now, now, cost);
        ++undone;
      }
    }
    EXPECT_GT(undone, requests / 10) << Name(a);
  }
}

// Refunds made one to three requests later (other keys and this one decided in between), against
// the pure algorithm's own Refund; keys now and then reset. Where a store cannot refund a
// sliding-log entry that is no longer the newest (Redis), the log is left out.
TEST_P(StoreSuite, LaterRefundsMatchThePureAlgorithm) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoreUnderTest& param = GetParam();
  uint64_t seed = 11;
  for (Algorithm a : kAllAlgorithms) {
    if (a == Algorithm::kSlidingWindowLog && !param.exact_late_log_refunds) continue;
    const LimitSpec spec = RefundSpec(a);
    if (!Serves(spec)) continue;
    auto limiter = Make(*store, spec, "later-" + Name(a));
    ASSERT_NE(limiter, nullptr);
    PureLimit oracle(spec);
    std::mt19937_64 rng(seed++);
    const int64_t D = spec.period.count();
    struct Due {
      std::string key;
      int64_t at_ns;
      int64_t cost;
      int after;  // requests to go
    };
    std::vector<Due> due;
    TrafficTime time(kStartMs * 1'000'000, 1'000);
    int refunds = 0;
    const int requests = 1500 * param.traffic_scale;
    for (int i = 0; i < requests; ++i) {
      int64_t gap = static_cast<int64_t>(rng() % static_cast<uint64_t>(D / 8));
      if (rng() % 40 == 0) gap += 3 * D;
      const Timestamp now = time.Advance(gap, *store);
      const int64_t t = ToNanos(now);
      for (auto it = due.begin(); it != due.end();) {
        if (--it->after > 0) {
          ++it;
          continue;
        }
        limiter->Refund(it->key, FromNanos(it->at_ns), now, it->cost);
        oracle.Refund(it->key, FromNanos(it->at_ns), now, it->cost);
        ++refunds;
        it = due.erase(it);
      }
      if (param.drop_replenished && i % 100 == 0) param.drop_replenished(*limiter, now);
      const std::string key = time.Key("key-" + std::to_string(rng() % 20));
      if (rng() % 200 == 0) {
        limiter->Reset(key);
        oracle.Forget(key);
      }
      const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
      const Decision got = limiter->Decide(key, now, cost);
      if (time.Renew()) continue;  // a refund due for a key left behind still runs, unread
      const Decision want = Follow(oracle, spec, key, now, cost, got);
      ASSERT_TRUE(Within(*store, got, want, spec)) << Name(a) << ", request " << i;
      if (got.allowed && rng() % 3 == 0) {
        due.push_back({key, t, cost, 1 + static_cast<int>(rng() % 3)});
      }
    }
    EXPECT_GT(refunds, requests / 10) << Name(a);
  }
}

// Refunds of what no request took (an unknown key, cost 0, a negative cost, more than the
// capacity, an over-long key) and resets of unknown keys change nothing.
TEST_P(StoreSuite, RefundsOfWhatWasNeverAdmittedChangeNothing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string too_long(70'000, 'x');  // longer than any store takes
  const Timestamp t = AtMs(kStartMs);
  for (Algorithm a : kAllAlgorithms) {
    if (!Serves(SpecFor(a, 10, hours(1), 10))) continue;
    auto limiter = Make(*store, SpecFor(a, 10, hours(1), 10), "never-" + Name(a));
    ASSERT_NE(limiter, nullptr);
    limiter->Refund("nobody", t, t, 1);
    limiter->Refund(too_long, t, t, 1);
    limiter->Reset("nobody");
    limiter->Reset(too_long);
    if (GetParam().counts_keys) {
      EXPECT_EQ(limiter->Stats().keys, 0u) << Name(a);
    }
    EXPECT_EQ(limiter->Decide(too_long, t, 1).reason, DecisionReason::kInvalidRequest) << Name(a);
    EXPECT_EQ(limiter->Decide("nobody", t, 0).remaining, 10) << Name(a) << ": no credit";
    ASSERT_TRUE(limiter->Decide("k", t, 4).allowed) << Name(a);
    limiter->Refund("k", t, t, 0);
    limiter->Refund("k", t, t, -2);
    limiter->Refund("k", t, t, 11);
    EXPECT_EQ(limiter->Decide("k", t, 0).remaining, 6) << Name(a);
  }
}

// ------------------------------------------------------------------------------------------------
// Ready() and Stats().

// A store that counts keys counts those of every limiter it made that is alive (not another
// instance's); a limiter destroyed takes its keys out. No store counts a failure while it answers.
TEST_P(StoreSuite, IsReadyAndItsStatsCountItsLiveLimiters) {
  auto store = Open();
  auto other = Open();
  ASSERT_TRUE(store != nullptr && other != nullptr);
  EXPECT_TRUE(store->Ready());
  const LimitSpec spec{Algorithm::kTokenBucket, 10, hours(1), 10, false};
  const Timestamp t = AtMs(kStartMs);
  const auto take = [&](Limiter& limiter, int keys) {
    for (int i = 0; i < keys; ++i)
      ASSERT_TRUE(limiter.Decide("k" + std::to_string(i), t, 1).allowed);
  };
  auto a = Make(*store, spec, "stats-a");
  auto b = Make(*store, spec, "stats-b");
  auto c = Make(*store, spec, "stats-c");
  auto elsewhere = Make(*other, spec, "stats-a");
  ASSERT_TRUE(a && b && c && elsewhere);
  take(*a, 2);
  take(*b, 3);
  take(*c, 4);
  take(*elsewhere, 5);
  if (GetParam().counts_keys || GetParam().counts_views_as_keys) {
    // A store's keys, or a layer's views (a view per limiter and key decided, none dropped: no
    // sync runs here), of its live limiters only.
    EXPECT_EQ(store->Stats().keys, 9u);
    b.reset();
    EXPECT_EQ(store->Stats().keys, 6u) << "a destroyed limiter's keys are not held";
    auto d = Make(*store, spec, "stats-d");
    ASSERT_NE(d, nullptr);
    take(*d, 1);
    EXPECT_EQ(store->Stats().keys, 7u);
    EXPECT_EQ(other->Stats().keys, 5u);
  } else {
    EXPECT_EQ(store->Stats().keys, 0u) << "a store that does not count keys says 0";
  }
  EXPECT_EQ(store->Stats().store_errors, 0u);
  EXPECT_EQ(store->Stats().short_circuited, 0u);
}

// ------------------------------------------------------------------------------------------------
// The failure policy.

// A store that answers never degrades, whatever its limits' failure policy: the same traffic gets
// the same decisions from a fail-open and a fail-closed limit, through every way of deciding.
TEST_P(StoreSuite, AStoreThatAnswersNeverDegrades) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Ready());
  const LimitSpec spec{Algorithm::kTokenBucket, 5, seconds(1), 5, false};
  auto open = Make(*store, spec, "policy-open", /*fail_open=*/true);
  auto closed = Make(*store, spec, "policy-closed", /*fail_open=*/false);
  ASSERT_TRUE(open != nullptr && closed != nullptr);
  std::mt19937_64 rng(5);
  TrafficTime time(kStartMs * 1'000'000, 1'000'000);
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    const Timestamp now = time.Advance(static_cast<int64_t>(rng() % 100) * 1'000'000, *store);
    const std::string key = "k" + std::to_string(i % 3);
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
    const auto decide = [&](Limiter& limiter) {
      const bool async = i % 2 == 1;
      if (i % 4 < 2) return Decide(limiter, key, now, cost, async);
      const LimitCheck check[1] = {{&limiter, key, cost}};
      return DecideAll(*store, check, now, async)[0];
    };
    const Decision a = decide(*open);
    const Decision b = decide(*closed);
    ASSERT_FALSE(a.degraded || b.degraded) << "request " << i;
    ASSERT_TRUE(Same(a, b)) << "request " << i;
    refused += a.allowed ? 0 : 1;
  }
  EXPECT_GT(refused, 10);
  EXPECT_EQ(store->Stats().store_errors, 0u);
  EXPECT_EQ(store->Stats().short_circuited, 0u);
}

// A store that cannot answer decides by each limit's policy -- fail-open admits, fail-closed
// refuses, both marked degraded -- through Decide, DecideAsync, DecideAll and DecideAllAsync,
// within bounded time; a degraded admission took nothing and is given nothing back; every
// degraded decision is counted as a failure.
TEST_P(StoreSuite, AStoreThatCannotAnswerAppliesEachLimitsFailurePolicy) {
  if (!GetParam().open_unavailable) {
    GTEST_SKIP() << GetParam().name << " cannot fail (AStoreThatAnswersNeverDegrades covers it)";
  }
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Store> store = GetParam().open_unavailable();
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->Ready());
  const LimitSpec spec{Algorithm::kTokenBucket, 10, seconds(1), 10, false};
  auto open = Make(*store, spec, "open", /*fail_open=*/true);
  auto closed = Make(*store, spec, "closed", /*fail_open=*/false);
  ASSERT_TRUE(open != nullptr && closed != nullptr);
  const Timestamp now = AtMs(kStartMs);
  uint64_t degraded = 0;
  const auto expect_policy = [&](const Decision& d, bool allowed, const std::string& where) {
    EXPECT_TRUE(d.degraded) << where;
    EXPECT_EQ(d.allowed, allowed) << where;
    EXPECT_EQ(d.reason, DecisionReason::kStoreUnavailable) << where;
    degraded += d.degraded ? 1 : 0;
  };
  // Several rounds: the first calls fail, later ones meet an open circuit breaker.
  for (int round = 0; round < 4; ++round) {
    for (bool async : {false, true}) {
      const std::string where = "round " + std::to_string(round) + (async ? " (async)" : "");
      const Decision alone = Decide(*open, "k", now, 1, async);
      expect_policy(alone, true, "fail-open Decide, " + where);
      expect_policy(Decide(*closed, "k", now, 1, async), false, "fail-closed Decide, " + where);
      const LimitCheck open_only[1] = {{open.get(), "k", 1}};
      expect_policy(DecideAll(*store, open_only, now, async)[0], true, "fail-open, " + where);
      const LimitCheck closed_only[1] = {{closed.get(), "k", 1}};
      expect_policy(DecideAll(*store, closed_only, now, async)[0], false, "fail-closed, " + where);
      const LimitCheck both[2] = {{open.get(), "k", 1}, {closed.get(), "k", 1}};
      const std::vector<Decision> out = DecideAll(*store, both, now, async);
      expect_policy(out[0], true, "fail-open with fail-closed, " + where);
      expect_policy(out[1], false, "fail-closed with fail-open, " + where);
      EXPECT_EQ(out[0].remaining, alone.remaining)
          << where << ": a degraded admission took nothing and is given nothing back";
    }
  }
  const StoreStats s = store->Stats();
  EXPECT_GT(s.store_errors, 0u);
  EXPECT_EQ(s.store_errors + s.short_circuited, degraded) << "each degraded decision, once";
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20)) << "it should not hang";
}

}  // namespace sluice::testing
