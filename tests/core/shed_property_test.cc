// Priority shedding in the pure algorithms (docs/load-protection.md, "Priority shedding"): random
// traffic of mixed priorities (low above 0.6, normal above 0.8, critical) on a manual clock,
// against an independent model of each algorithm that only tracks the hits in use. Checked:
//  - every verdict is the model's: admitted iff cost + reserve hits are free (the thresholds hold
//    to the request: after an admission of a priority with threshold a, at most floor(a * C)
//    hits are in use), and `remaining` is the model's free hits;
//  - a refusal's retry_after is the first instant at which the model admits cost + reserve
//    (kNever when cost + reserve exceeds the capacity);
//  - no critical request is refused while capacity remains that only a lower priority was
//    refused from: after every refusal for the reserve alone, a critical request of the same cost
//    at the same instant passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/shed.h"
#include "sluice/calendar_window.h"
#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"

namespace sluice {
namespace {

using i128 = __int128;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1000 * kMs;
constexpr int64_t kDay = 86400 * kSecond;
constexpr int64_t kStart = 20'600 * kDay + 1234 * kMs;  // 2026, not aligned to a window

// The hits in use at a time, as each algorithm defines them (docs/algorithms.md), in exact
// integers. Times only move forward.
class UsedModel {
 public:
  virtual ~UsedModel() = default;
  virtual std::unique_ptr<UsedModel> Clone() const = 0;
  virtual void Advance(int64_t t) = 0;
  // Whether `hits` more fit at the model's time.
  virtual bool Fits(int64_t hits) const = 0;
  virtual void Take(int64_t hits) = 0;
  // Whole hits free at the model's time.
  virtual int64_t Free() const = 0;
};

// Token bucket, GCRA and (non-shaper) leaky bucket alike: hits in use leak out at L per P, at most
// B in use. Kept as U = used * P.
class BucketModel final : public UsedModel {
 public:
  BucketModel(int64_t limit, int64_t period, int64_t burst, int64_t t)
      : L(limit), P(period), B(burst), last_(t) {}
  std::unique_ptr<UsedModel> Clone() const override { return std::make_unique<BucketModel>(*this); }
  void Advance(int64_t t) override {
    U_ = std::max<i128>(0, U_ - static_cast<i128>(t - last_) * L);
    last_ = t;
  }
  bool Fits(int64_t hits) const override { return U_ + static_cast<i128>(hits) * P <= B * P; }
  void Take(int64_t hits) override { U_ += static_cast<i128>(hits) * P; }
  int64_t Free() const override { return static_cast<int64_t>((B * P - U_) / P); }

 private:
  i128 L, P, B;
  i128 U_ = 0;
  int64_t last_;
};

// Fixed windows [k * D, (k + 1) * D): the hits of the current window. A UTC calendar day is the
// same window with D = one day.
class WindowModel final : public UsedModel {
 public:
  WindowModel(int64_t limit, int64_t window) : L(limit), D(window) {}
  std::unique_ptr<UsedModel> Clone() const override { return std::make_unique<WindowModel>(*this); }
  void Advance(int64_t t) override {
    if (t / D != k_) used_ = 0;
    k_ = t / D;
  }
  bool Fits(int64_t hits) const override { return used_ + hits <= L; }
  void Take(int64_t hits) override { used_ += hits; }
  int64_t Free() const override { return L - used_; }

 private:
  int64_t L, D;
  int64_t k_ = 0;
  int64_t used_ = 0;
};

// Sliding window log: the hits stamped in (t - D, t].
class LogModel final : public UsedModel {
 public:
  LogModel(int64_t limit, int64_t window) : L(limit), D(window) {}
  std::unique_ptr<UsedModel> Clone() const override { return std::make_unique<LogModel>(*this); }
  void Advance(int64_t t) override {
    now_ = t;
    while (!log_.empty() && log_.front().first <= t - D) log_.pop_front();
  }
  bool Fits(int64_t hits) const override { return Used() + hits <= L; }
  void Take(int64_t hits) override { log_.emplace_back(now_, hits); }
  int64_t Free() const override { return L - Used(); }

 private:
  int64_t Used() const {
    int64_t n = 0;
    for (const auto& [at, hits] : log_) n += hits;
    return n;
  }
  int64_t L, D;
  int64_t now_ = 0;
  std::deque<std::pair<int64_t, int64_t>> log_;
};

// Sliding window counter: in use = current + previous * (the part of the previous window still
// inside the sliding one), kept as E = used * D.
class CounterModel final : public UsedModel {
 public:
  CounterModel(int64_t limit, int64_t window) : L(limit), D(window) {}
  std::unique_ptr<UsedModel> Clone() const override {
    return std::make_unique<CounterModel>(*this);
  }
  void Advance(int64_t t) override {
    const int64_t k = t / D;
    if (k != k_) {
      prev_ = k == k_ + 1 ? cur_ : 0;
      cur_ = 0;
      k_ = k;
    }
    offset_ = t - k * D;
  }
  bool Fits(int64_t hits) const override { return E() + static_cast<i128>(hits) * D <= L * D; }
  void Take(int64_t hits) override { cur_ += hits; }
  int64_t Free() const override { return static_cast<int64_t>((L * D - E()) / D); }

 private:
  i128 E() const { return static_cast<i128>(cur_) * D + static_cast<i128>(prev_) * (D - offset_); }
  i128 L, D;
  int64_t k_ = 0, offset_ = 0, cur_ = 0, prev_ = 0;
};

// The first time after `t` at which the model admits `hits`: a binary search over a copy.
int64_t FirstFit(const UsedModel& model, int64_t t, int64_t hits, int64_t horizon) {
  int64_t lo = t, hi = t + horizon;  // not at lo; at hi (the model is replenished by then)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto probe = model.Clone();
    probe->Advance(mid);
    (probe->Fits(hits) ? hi : lo) = mid;
  }
  return hi;
}

ShedRule LowNormal() {
  ShedRule rule;
  rule.levels.push_back({"low", {6, 10}});
  rule.levels.push_back({"normal", {8, 10}});
  return rule;
}

// Decides through any algorithm: Alg::Decide with a reserve.
struct Subject {
  virtual ~Subject() = default;
  virtual Decision Decide(int64_t t, int64_t cost, int64_t reserve) = 0;
};

template <typename Alg>
struct AlgSubject final : Subject {
  explicit AlgSubject(const LimitSpec& spec)
      : alg(*Alg::Create(spec)), state(alg.Initial(At(kStart))) {}
  static Timestamp At(int64_t t) { return FromNanos(t); }
  Decision Decide(int64_t t, int64_t cost, int64_t reserve) override {
    return alg.Decide(state, At(t), cost, reserve);
  }
  Alg alg;
  typename Alg::State state;
};

struct Case {
  const char* name;
  std::function<std::unique_ptr<Subject>()> subject;
  std::function<std::unique_ptr<UsedModel>()> model;
  int64_t capacity;
  int64_t max_step;  // the longest time between two requests
  int64_t horizon;   // a time after which anything that can fit fits
};

LimitSpec Spec(Algorithm a, int64_t limit, int64_t period, int64_t burst = 0) {
  LimitSpec s;
  s.algorithm = a;
  s.limit = limit;
  s.period = Duration(period);
  s.burst = burst;
  return s;
}

std::vector<Case> Cases() {
  const int64_t minute = 60 * kSecond;
  std::vector<Case> cases;
  cases.push_back({"token_bucket",
                   [=] {
                     return std::make_unique<AlgSubject<TokenBucket>>(
                         Spec(Algorithm::kTokenBucket, 100, minute, 120));
                   },
                   [=] { return std::make_unique<BucketModel>(100, minute, 120, kStart); }, 120,
                   2 * kSecond, 2 * minute});
  cases.push_back(
      {"gcra",
       [=] { return std::make_unique<AlgSubject<Gcra>>(Spec(Algorithm::kGcra, 100, minute, 120)); },
       [=] { return std::make_unique<BucketModel>(100, minute, 120, kStart); }, 120, 2 * kSecond,
       2 * minute});
  cases.push_back({"leaky_bucket",
                   [=] {
                     return std::make_unique<AlgSubject<LeakyBucket>>(
                         Spec(Algorithm::kLeakyBucket, 7, 3 * kSecond, 50));
                   },
                   [=] { return std::make_unique<BucketModel>(7, 3 * kSecond, 50, kStart); }, 50,
                   200 * kMs, 30 * kSecond});
  cases.push_back({"fixed_window",
                   [=] {
                     return std::make_unique<AlgSubject<FixedWindow>>(
                         Spec(Algorithm::kFixedWindow, 100, minute));
                   },
                   [=] { return std::make_unique<WindowModel>(100, minute); }, 100, 2 * kSecond,
                   2 * minute});
  cases.push_back({"calendar_day",
                   [=] {
                     LimitSpec s = Spec(Algorithm::kFixedWindow, 100, kDay);
                     s.calendar.unit = CalendarUnit::kDay;
                     s.calendar.timezone = "UTC";
                     return std::make_unique<AlgSubject<CalendarWindow>>(s);
                   },
                   [=] { return std::make_unique<WindowModel>(100, kDay); }, 100, 40 * minute,
                   2 * kDay});
  cases.push_back({"sliding_window_log",
                   [=] {
                     return std::make_unique<AlgSubject<SlidingWindowLog>>(
                         Spec(Algorithm::kSlidingWindowLog, 100, minute));
                   },
                   [=] { return std::make_unique<LogModel>(100, minute); }, 100, 2 * kSecond,
                   2 * minute});
  cases.push_back({"sliding_window_counter",
                   [=] {
                     return std::make_unique<AlgSubject<SlidingWindowCounter>>(
                         Spec(Algorithm::kSlidingWindowCounter, 100, minute));
                   },
                   [=] { return std::make_unique<CounterModel>(100, minute); }, 100, 2 * kSecond,
                   3 * minute});
  return cases;
}

constexpr const char* kPriorities[] = {"low", "normal", "critical", "bulk", nullptr};

TEST(ShedProperty, EveryAlgorithmKeepsItsReservesExactly) {
  const ShedRule rule = LowNormal();
  for (const Case& c : Cases()) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
      std::mt19937_64 rng(seed);
      auto subject = c.subject();
      auto model = c.model();
      int64_t t = kStart;
      int shed_refusals = 0, critical_after_shed = 0;
      for (int step = 0; step < 1500; ++step) {
        // Bursts at one instant, then gaps: the limits fill up and drain again.
        // Whole milliseconds: the sliding log's stamps (100 ns quanta here) are then exact.
        if (rng() % 3 == 0) t += kMs * static_cast<int64_t>(rng() % (c.max_step / kMs));
        const char* name = kPriorities[rng() % std::size(kPriorities)];
        const auto priority =
            name == nullptr ? std::nullopt : std::optional<std::string_view>(name);
        const int64_t cost = rng() % 20 == 0 ? static_cast<int64_t>(rng() % (c.capacity + 2))
                                             : static_cast<int64_t>(1 + rng() % 4);
        const int64_t reserve = ShedReserve(rule, priority, c.capacity);
        model->Advance(t);
        const Decision d = subject->Decide(t, cost, reserve);
        SCOPED_TRACE("step " + std::to_string(step) + " cost " + std::to_string(cost) +
                     " reserve " + std::to_string(reserve));
        if (cost > c.capacity) {
          ASSERT_EQ(d.reason, DecisionReason::kCostExceedsCapacity);
          continue;
        }
        const bool fits = model->Fits(cost + reserve);
        ASSERT_EQ(d.allowed, fits);
        if (fits) {
          model->Take(cost);
          // The threshold holds to the request: at most floor(a * C) hits in use after it.
          ASSERT_GE(model->Free(), reserve);
          ASSERT_EQ(d.remaining, model->Free());
          continue;
        }
        ASSERT_EQ(d.reason, DecisionReason::kOverLimit);
        ASSERT_EQ(d.remaining, model->Free());
        if (cost + reserve > c.capacity) {
          ASSERT_EQ(d.retry_after, kNever);
        } else {
          ASSERT_EQ(d.retry_after.count(), FirstFit(*model, t, cost + reserve, c.horizon) - t);
        }
        if (!model->Fits(cost)) continue;
        // Refused for the reserve alone: capacity remains, and a critical request takes it.
        ++shed_refusals;
        const Decision critical =
            subject->Decide(t, cost, ShedReserve(rule, kCriticalPriority, c.capacity));
        ASSERT_TRUE(critical.allowed) << "a critical request was refused where only a lower "
                                         "priority should be";
        model->Take(cost);
        ++critical_after_shed;
      }
      // The traffic reached the thresholds: the property was exercised, not vacuous.
      EXPECT_GT(shed_refusals, 10);
      EXPECT_EQ(critical_after_shed, shed_refusals);
    }
  }
}

// The example on every algorithm: of 100, low gets 60, normal 80, critical 100, at one
// instant, in that order.
TEST(ShedProperty, OfAHundredLowGetsSixtyNormalEightyCriticalAll) {
  const ShedRule rule = LowNormal();
  for (const Case& c : Cases()) {
    if (c.capacity != 100) continue;
    SCOPED_TRACE(c.name);
    auto subject = c.subject();
    const auto admitted = [&](std::optional<std::string_view> p) {
      int n = 0;
      while (subject->Decide(kStart, 1, ShedReserve(rule, p, 100)).allowed) ++n;
      return n;
    };
    EXPECT_EQ(admitted("low"), 60);
    EXPECT_EQ(admitted(std::nullopt), 0);  // no priority: the lowest, and low is full
    EXPECT_EQ(admitted("normal"), 20);
    EXPECT_EQ(admitted("made-up"), 0);
    EXPECT_EQ(admitted("critical"), 20);
  }
}

}  // namespace
}  // namespace sluice
