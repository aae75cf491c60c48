// Refunds: giving back what an admitted request took (Alg::Refund). Two kinds of checks:
//  - exact undo: a request admitted and refunded at its own time, with nothing in between, leaves
//    every later decision (every field) as if it had never come;
//  - refunds made later, with other requests in between: the windows and the log decide exactly
//    like brute-force oracles over the history without the refunded requests, and the buckets
//    obey their bound with the refunds' documented allowance.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "support/traffic.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Request;

constexpr int64_t kStart = 1'700'000'000'000'000'000;
constexpr int kSeeds = 8;
constexpr int kRequests = 1500;

LimitSpec Spec(Algorithm a, int64_t limit, int64_t period_ns, int64_t burst, bool shaper = false) {
  return LimitSpec{a, limit, Duration(period_ns), HasBurst(a) ? burst : 0, shaper};
}

// Random limits and traffic that hits them often; bursts share timestamps (spread 0 sometimes),
// so refunds at the request's own time with other requests in between happen too.
struct Case {
  int64_t limit;
  int64_t period_ns;
  int64_t burst;
  std::vector<Request> traffic;
};

Case MakeCase(int seed) {
  std::mt19937_64 rng(0x4ef0 + seed);
  static constexpr int64_t kPeriods[] = {1'000'000, 100'000'000, 1'000'000'000, 3'000'000'000};
  Case c;
  c.limit = std::uniform_int_distribution<int64_t>(2, 20)(rng);
  c.period_ns = kPeriods[std::uniform_int_distribution<size_t>(0, std::size(kPeriods) - 1)(rng)];
  c.burst = std::uniform_int_distribution<int64_t>(2, 2 * c.limit)(rng);
  const int64_t per_hit = c.period_ns / c.limit;
  c.traffic =
      seed % 2 == 0
          ? testing::RandomTraffic(rng, kRequests, kStart, per_hit / 2 + 10, 10, 3)
          : testing::BurstyTraffic(rng, kRequests, kStart, static_cast<int>(2 * c.limit + 2),
                                   seed % 4 == 1 ? 0 : per_hit / 20 + 10, 3 * c.period_ns, 10, 3);
  return c;
}

void ExpectSameDecision(const Decision& got, const Decision& want, size_t i) {
  EXPECT_EQ(got.allowed, want.allowed) << "request " << i;
  EXPECT_EQ(got.reason, want.reason) << "request " << i;
  EXPECT_EQ(got.remaining, want.remaining) << "request " << i;
  EXPECT_EQ(got.retry_after, want.retry_after) << "request " << i;
  EXPECT_EQ(got.reset_after, want.reset_after) << "request " << i;
  EXPECT_EQ(got.delay, want.delay) << "request " << i;
}

// `with` decides every request and refunds about a third of the admitted ones at once, at their
// own time; `without` never sees those. Every other decision must be identical on every field,
// and both states must be replenished at the same instants (what the memory store relies on to
// drop them).
template <typename Alg>
void ExpectImmediateRefundIsAnExactUndo(const LimitSpec& spec, const std::vector<Request>& trace,
                                        uint64_t seed) {
  auto alg = Alg::Create(spec);
  ASSERT_TRUE(alg.has_value()) << alg.error().message;
  std::mt19937_64 rng(seed);
  typename Alg::State with = alg->Initial(FromNanos(trace.front().t_ns));
  typename Alg::State without = with;
  int refunded = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const Timestamp t = FromNanos(trace[i].t_ns);
    const Decision got = alg->Decide(with, t, trace[i].cost);
    if (got.allowed && rng() % 3 == 0) {
      alg->Refund(with, t, t, trace[i].cost);
      ++refunded;
    } else {
      ExpectSameDecision(got, alg->Decide(without, t, trace[i].cost), i);
    }
    ASSERT_EQ(std::max(alg->ReplenishedAt(with), t), std::max(alg->ReplenishedAt(without), t))
        << AlgorithmName(spec.algorithm) << " request " << i;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << AlgorithmName(spec.algorithm) << " diverged at request " << i;
      return;
    }
  }
  EXPECT_GT(refunded, 20) << AlgorithmName(spec.algorithm);
}

class Refund : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { case_ = MakeCase(GetParam()); }
  LimitSpec SpecFor(Algorithm a, bool shaper = false) const {
    return Spec(a, case_.limit, case_.period_ns, case_.burst, shaper);
  }
  Case case_;
};

TEST_P(Refund, AtTheRequestsOwnTimeIsAnExactUndo) {
  const auto& t = case_.traffic;
  const uint64_t seed = GetParam();
  ExpectImmediateRefundIsAnExactUndo<TokenBucket>(SpecFor(Algorithm::kTokenBucket), t, seed);
  ExpectImmediateRefundIsAnExactUndo<Gcra>(SpecFor(Algorithm::kGcra), t, seed);
  ExpectImmediateRefundIsAnExactUndo<LeakyBucket>(SpecFor(Algorithm::kLeakyBucket), t, seed);
  ExpectImmediateRefundIsAnExactUndo<LeakyBucket>(SpecFor(Algorithm::kLeakyBucket, true), t, seed);
  ExpectImmediateRefundIsAnExactUndo<FixedWindow>(SpecFor(Algorithm::kFixedWindow), t, seed);
  ExpectImmediateRefundIsAnExactUndo<SlidingWindowLog>(SpecFor(Algorithm::kSlidingWindowLog), t,
                                                       seed);
  ExpectImmediateRefundIsAnExactUndo<SlidingWindowCounter>(
      SpecFor(Algorithm::kSlidingWindowCounter), t, seed);
}

// A request and, once decided, whether it is still counted.
struct Event {
  int64_t t_ns;
  int64_t cost;
  bool kept;
};

// The windows' and the log's semantics restated over the kept history (no incremental state).
int64_t KeptIn(const std::vector<Event>& history, int64_t from_excl, int64_t to_incl) {
  int64_t sum = 0;
  for (const Event& e : history) {
    if (e.kept && e.t_ns > from_excl && e.t_ns <= to_incl) sum += e.cost;
  }
  return sum;
}

bool FixedWindowAdmits(const std::vector<Event>& h, int64_t n, int64_t d, int64_t t, int64_t c) {
  const int64_t start = t / d * d;
  return KeptIn(h, start - 1, t) + c <= n;
}

bool SlidingLogAdmits(const std::vector<Event>& h, int64_t n, int64_t d, int64_t t, int64_t c) {
  return KeptIn(h, t - d, t) + c <= n;
}

bool SlidingCounterAdmits(const std::vector<Event>& h, int64_t n, int64_t d, int64_t t, int64_t c) {
  const int64_t start = t / d * d;
  const int64_t current = KeptIn(h, start - 1, t);
  const int64_t previous = KeptIn(h, start - d - 1, start - 1);
  const __int128 estimate =
      static_cast<__int128>(current) * d + static_cast<__int128>(previous) * (d - (t - start));
  return estimate + static_cast<__int128>(c) * d <= static_cast<__int128>(n) * d;
}

// Admitted requests are refunded a few requests later, at the time reached by then (often the
// same timestamp inside a burst). `admits` is the oracle over the kept history.
template <typename Alg, typename Oracle>
void ExpectLaterRefundsMatchTheKeptHistory(const LimitSpec& spec, const std::vector<Request>& trace,
                                           uint64_t seed, Oracle admits) {
  auto alg = Alg::Create(spec);
  ASSERT_TRUE(alg.has_value()) << alg.error().message;
  std::mt19937_64 rng(seed);
  typename Alg::State s = alg->Initial(FromNanos(trace.front().t_ns));
  std::vector<Event> history;
  struct Due {
    size_t event;
    size_t at_request;
  };
  std::vector<Due> due;
  int refunded = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const int64_t t = trace[i].t_ns;
    for (auto it = due.begin(); it != due.end();) {
      if (it->at_request != i) {
        ++it;
        continue;
      }
      Event& e = history[it->event];
      alg->Refund(s, FromNanos(e.t_ns), FromNanos(t), e.cost);
      e.kept = false;
      ++refunded;
      it = due.erase(it);
    }
    const bool want = admits(history, spec.limit, spec.period.count(), t, trace[i].cost);
    const Decision d = alg->Decide(s, FromNanos(t), trace[i].cost);
    ASSERT_EQ(d.allowed, want) << AlgorithmName(spec.algorithm) << " request " << i;
    if (!d.allowed) continue;
    history.push_back({t, trace[i].cost, true});
    if (rng() % 3 == 0) due.push_back({history.size() - 1, i + 1 + rng() % 6});
  }
  EXPECT_GT(refunded, 20) << AlgorithmName(spec.algorithm);
}

TEST_P(Refund, LaterRefundsLeaveTheWindowsExactlyAsWithoutTheRequest) {
  const auto& t = case_.traffic;
  const uint64_t seed = GetParam() + 100;
  ExpectLaterRefundsMatchTheKeptHistory<FixedWindow>(SpecFor(Algorithm::kFixedWindow), t, seed,
                                                     FixedWindowAdmits);
  ExpectLaterRefundsMatchTheKeptHistory<SlidingWindowLog>(SpecFor(Algorithm::kSlidingWindowLog), t,
                                                          seed, SlidingLogAdmits);
  ExpectLaterRefundsMatchTheKeptHistory<SlidingWindowCounter>(
      SpecFor(Algorithm::kSlidingWindowCounter), t, seed, SlidingCounterAdmits);
}

// The buckets with refunds made later: the token bucket, GCRA and the leaky meter agree with each
// other on every decision, and the kept traffic obeys the bucket bound with the refunds'
// allowance: kept hits in any [a, b] <= B + r*(b - a) + the cost refunded during [a, b] for
// requests admitted before a (docs/algorithms.md, "Refunds").
TEST_P(Refund, LaterRefundsKeepTheBucketsBoundAndAgreement) {
  const auto& trace = case_.traffic;
  auto tb = TokenBucket::Create(SpecFor(Algorithm::kTokenBucket));
  auto g = Gcra::Create(SpecFor(Algorithm::kGcra));
  auto lb = LeakyBucket::Create(SpecFor(Algorithm::kLeakyBucket));
  ASSERT_TRUE(tb.has_value() && g.has_value() && lb.has_value());
  TokenBucket::State ts = tb->Initial(FromNanos(trace.front().t_ns));
  Gcra::State gs = g->Initial(FromNanos(trace.front().t_ns));
  LeakyBucket::State ls = lb->Initial(FromNanos(trace.front().t_ns));
  std::mt19937_64 rng(GetParam() + 200);
  struct Kept {
    int64_t t_ns;
    int64_t cost;
    int64_t refunded_at = -1;  // -1: kept
  };
  std::vector<Kept> admitted;
  std::vector<std::pair<size_t, size_t>> due;  // (admitted index, request index)
  for (size_t i = 0; i < trace.size(); ++i) {
    const int64_t t = trace[i].t_ns;
    for (auto it = due.begin(); it != due.end();) {
      if (it->second != i) {
        ++it;
        continue;
      }
      Kept& k = admitted[it->first];
      tb->Refund(ts, FromNanos(k.t_ns), FromNanos(t), k.cost);
      g->Refund(gs, FromNanos(k.t_ns), FromNanos(t), k.cost);
      lb->Refund(ls, FromNanos(k.t_ns), FromNanos(t), k.cost);
      k.refunded_at = t;
      it = due.erase(it);
    }
    const Decision a = tb->Decide(ts, FromNanos(t), trace[i].cost);
    const Decision b = g->Decide(gs, FromNanos(t), trace[i].cost);
    const Decision c = lb->Decide(ls, FromNanos(t), trace[i].cost);
    ASSERT_EQ(a.allowed, b.allowed) << "request " << i;
    ASSERT_EQ(a.remaining, b.remaining) << "request " << i;
    ASSERT_EQ(a.retry_after, b.retry_after) << "request " << i;
    ASSERT_EQ(a.reset_after, b.reset_after) << "request " << i;
    ASSERT_EQ(a.allowed, c.allowed) << "request " << i;
    ASSERT_EQ(a.remaining, c.remaining) << "request " << i;
    ASSERT_LE(a.remaining, a.limit) << "a refund never fills above B";
    if (!a.allowed) continue;
    admitted.push_back({t, trace[i].cost});
    if (rng() % 3 == 0) due.emplace_back(admitted.size() - 1, i + 1 + rng() % 6);
  }
  // The bound, by brute force over every interval starting and ending at an admission.
  const __int128 D = case_.period_ns;
  int late_refunds = 0;
  for (const Kept& k : admitted) late_refunds += k.refunded_at > k.t_ns;
  EXPECT_GT(late_refunds, 10) << "the refunds must not all be at their request's own time";
  for (size_t i = 0; i < admitted.size(); ++i) {
    const int64_t a = admitted[i].t_ns;
    __int128 hits = 0;
    for (size_t j = i; j < admitted.size(); ++j) {
      const int64_t b = admitted[j].t_ns;
      if (admitted[j].refunded_at < 0) hits += admitted[j].cost;
      __int128 given_back = 0;  // refunds during [a, b] of requests admitted before a
      for (size_t k = 0; k < i; ++k) {
        const Kept& r = admitted[k];
        if (r.t_ns < a && r.refunded_at >= a && r.refunded_at <= b) given_back += r.cost;
      }
      const __int128 allowance = (static_cast<__int128>(case_.burst) + given_back) * D +
                                 static_cast<__int128>(case_.limit) * (b - a);
      ASSERT_LE(hits * D, allowance) << "interval " << i << ".." << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, Refund, ::testing::Range(0, kSeeds));

TEST(RefundEdges, NothingForCostsThatCannotHaveBeenAdmitted) {
  auto tb = TokenBucket::Create(Spec(Algorithm::kTokenBucket, 10, 1'000'000'000, 10));
  ASSERT_TRUE(tb.has_value());
  const Timestamp t = FromNanos(kStart);
  TokenBucket::State s = tb->Initial(t);
  ASSERT_TRUE(tb->Decide(s, t, 4).allowed);
  for (int64_t cost : {int64_t{0}, int64_t{-3}, int64_t{11}}) {
    tb->Refund(s, t, t, cost);
    EXPECT_EQ(tb->Decide(s, t, 0).remaining, 6) << cost;
  }
  tb->Refund(s, t, t, 4);
  tb->Refund(s, t, t, 4);  // refunded twice: still never above full
  EXPECT_EQ(tb->Decide(s, t, 0).remaining, 10);
}

TEST(RefundEdges, FixedWindowForgetsRefundsForAReplacedWindow) {
  auto fw = FixedWindow::Create(Spec(Algorithm::kFixedWindow, 3, 1'000'000'000, 0));
  ASSERT_TRUE(fw.has_value());
  const Timestamp t = FromNanos(kStart);
  FixedWindow::State s = fw->Initial(t);
  ASSERT_TRUE(fw->Decide(s, t, 3).allowed);
  ASSERT_TRUE(fw->Decide(s, t + seconds(1), 2).allowed);
  fw->Refund(s, t, t + seconds(1), 3);  // counted in the window before: nothing to take back
  EXPECT_EQ(fw->Decide(s, t + seconds(1), 0).remaining, 1);
}

TEST(RefundEdges, SlidingCounterTakesFromThePreviousWindowWhileItWeighs) {
  auto swc =
      SlidingWindowCounter::Create(Spec(Algorithm::kSlidingWindowCounter, 10, 1'000'000'000, 0));
  ASSERT_TRUE(swc.has_value());
  const Timestamp t = FromNanos(kStart);  // aligned: the start of a window
  SlidingWindowCounter::State s = swc->Initial(t);
  ASSERT_TRUE(swc->Decide(s, t, 10).allowed);
  // Half way into the next window the previous 10 weigh 5.
  const Timestamp half = t + seconds(1) + milliseconds(500);
  EXPECT_EQ(swc->Decide(s, half, 0).remaining, 5);
  swc->Refund(s, t, half, 4);
  EXPECT_EQ(swc->Decide(s, half, 0).remaining, 7);  // 6 weigh 3
  ASSERT_TRUE(swc->Decide(s, half, 3).allowed);
  // One window later those 3 are the previous window; the first request's window no longer
  // weighs, so refunding it changes nothing.
  EXPECT_EQ(swc->Decide(s, half + seconds(1), 0).remaining, 8);  // 3 weigh 1.5
  swc->Refund(s, t, half + seconds(1), 4);
  EXPECT_EQ(s.previous, 3u);
  EXPECT_EQ(swc->Decide(s, half + seconds(1), 0).remaining, 8);
}

TEST(RefundEdges, SlidingLogRemovesExactlyTheRequestsHitsFromTheMiddle) {
  auto log = SlidingWindowLog::Create(Spec(Algorithm::kSlidingWindowLog, 10, 1'000'000'000, 0));
  ASSERT_TRUE(log.has_value());
  const Timestamp t = FromNanos(kStart);
  SlidingWindowLog::State s = log->Initial(t);
  ASSERT_TRUE(log->Decide(s, t, 2).allowed);
  ASSERT_TRUE(log->Decide(s, t + milliseconds(100), 3).allowed);  // to be refunded
  ASSERT_TRUE(log->Decide(s, t + milliseconds(200), 4).allowed);
  log->Refund(s, t + milliseconds(100), t + milliseconds(300), 3);
  ASSERT_EQ(s.stamps.size(), 6u);
  // The first two hits leave at t + 1s, the last four at t + 1.2s; the middle three are gone.
  EXPECT_EQ(log->Decide(s, t + milliseconds(999), 0).remaining, 4);
  EXPECT_EQ(log->Decide(s, t + milliseconds(1000), 0).remaining, 6);
  EXPECT_FALSE(log->Decide(s, t + milliseconds(1000), 7).allowed);
  EXPECT_TRUE(log->Decide(s, t + milliseconds(1000), 6).allowed);
}

TEST(RefundEdges, SlidingLogAfterAClockStepBackRemovesOlderHitsNeverNewer) {
  auto log = SlidingWindowLog::Create(Spec(Algorithm::kSlidingWindowLog, 10, 1'000'000'000, 0));
  ASSERT_TRUE(log.has_value());
  const Timestamp t = FromNanos(kStart);
  SlidingWindowLog::State s = log->Initial(t);
  ASSERT_TRUE(log->Decide(s, t + milliseconds(10), 1).allowed);  // A
  ASSERT_TRUE(log->Decide(s, t + milliseconds(50), 1).allowed);  // C
  ASSERT_TRUE(log->Decide(s, t, 1).allowed);  // B: the clock stepped back; stamped at C's time
  const Timestamp replenished = log->ReplenishedAt(s);
  log->Refund(s, t, t + milliseconds(50), 1);
  // B's own stamp cannot be told from C's; A's older one goes instead: the log only gets stricter.
  ASSERT_EQ(s.stamps.size(), 2u);
  EXPECT_EQ(log->ReplenishedAt(s), replenished);
  EXPECT_EQ(log->Decide(s, t + milliseconds(1010), 0).remaining, 8) << "A's hit already left";
}

TEST(RefundEdges, SlidingLogIgnoresRefundsForHitsThatLeftTheWindow) {
  auto log = SlidingWindowLog::Create(Spec(Algorithm::kSlidingWindowLog, 10, 1'000'000'000, 0));
  ASSERT_TRUE(log.has_value());
  const Timestamp t = FromNanos(kStart);
  SlidingWindowLog::State s = log->Initial(t);
  ASSERT_TRUE(log->Decide(s, t, 3).allowed);
  ASSERT_TRUE(log->Decide(s, t + milliseconds(1500), 2).allowed);
  log->Refund(s, t, t + milliseconds(1500), 3);  // its hits left at t + 1s
  EXPECT_EQ(s.stamps.size(), 2u);
  log->Refund(s, t + milliseconds(1500), t + milliseconds(1500), 2);
  EXPECT_TRUE(s.stamps.empty());
  EXPECT_EQ(SlidingWindowLog::HeapBytes(s), 0u) << "an emptied log frees its ring";
}

}  // namespace
}  // namespace sluice
