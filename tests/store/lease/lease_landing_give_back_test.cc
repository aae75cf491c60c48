// A take that lands finding units no longer usable gives them back (LeaseBook::Landed), and the
// requests waiting on that take are retried then (issue 24). The give-back must count in the
// shared store before any of them takes: the store's connections are used in turn, so a
// give-back sent without waiting can reach Redis after a take sent just after it, which then
// decides without those units -- stricter than the limit alone.
//
// Here the shared store is the memory store behind a layer that answers takes when the test
// says (as Redis answers a script a round trip later: applied at once, answered later), and
// applies a give-back that nothing waits for (GiveBack) only at the end -- the slower
// connection, made certain. A take that arrives while such a give-back is outstanding is the
// defect.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/leased_store.h"
#include "sluice/memory_store.h"
#include "store/forwarding.h"
#include "store/idle_scheduler.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const Timestamp kStart = FromNanos(int64_t{1'800'000'000'000} * 1'000'000);  // hour-aligned

struct Wire {
  std::vector<std::function<void()>> answers;  // takes applied, not yet answered
  std::vector<std::function<void()>> late;     // give-backs nobody waits for, not yet applied
  int takes_overtaking = 0;                    // takes sent while `late` was not empty
  int takes = 0;
};

class HeldAnswers final : public internal::ForwardingLimiter {
 public:
  HeldAnswers(const Store* owner, std::unique_ptr<Limiter> inner, std::shared_ptr<Wire> wire)
      : ForwardingLimiter(owner, std::move(inner)), wire_(std::move(wire)) {}

  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override {
    ++wire_->takes;
    if (!wire_->late.empty()) ++wire_->takes_overtaking;
    inner()->TakeAsync(key, now, request, [wire = wire_, done](const LeaseGrant& grant) {
      wire->answers.push_back([done, grant] { done(grant); });
    });
  }
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override {
    wire_->late.push_back([inner = shared_inner(), key = std::string(key), stamp_us, now, units] {
      inner->GiveBack(key, stamp_us, now, units);
    });
  }
  // Applied, then answered: what a caller that waits for it sees.
  void GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units,
                    GivenBackCallback done) override {
    inner()->GiveBack(key, stamp_us, now, units);
    done(true);
  }

 private:
  const std::shared_ptr<Wire> wire_;
};

class HeldAnswersStore final : public internal::ForwardingStore<Store> {
 public:
  HeldAnswersStore(std::shared_ptr<Store> inner, std::shared_ptr<Wire> wire)
      : ForwardingStore(std::move(inner)), wire_(std::move(wire)) {}

  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    auto inner = inner_store().MakeLimiter(spec, options);
    if (!inner) return std::unexpected(inner.error());
    return std::unique_ptr<Limiter>(std::make_unique<HeldAnswers>(this, std::move(*inner), wire_));
  }

 private:
  const std::shared_ptr<Wire> wire_;
};

// Answers every take held, in order, until none is left (an answer may send another take).
void AnswerAll(Wire& wire) {
  while (!wire.answers.empty()) {
    auto answer = std::move(wire.answers.front());
    wire.answers.erase(wire.answers.begin());
    answer();
  }
}

// A token bucket of 10 per second (a unit refills in 100 ms). Requests at 0, 70 and 71 ms
// measure the key's rate, so the third takes a lease: the 7 units free, the shared bucket then
// full again at 1000 ms. At 200 ms a request of 6 spends most of them: the one left is under
// half the next lease, so a take for more goes out (held). A refund of 7, of a request at 100
// ms, comes late: at 100 ms the bucket with 8 units held is not yet full (1000 - 8 x 100 = 200
// ms), so they go back into the units; at 200 ms it is, so when the take lands (asked at 200
// ms) the 8 units are no longer usable and go back. A request of 9 at 200 ms waited for that
// take; retried, it is decided by the shared bucket: empty after the take, + 8 given back + the
// new lease's 2 units (given back first) = 10, it admits the 9. Without the 8 it has 2 and
// refuses.
TEST(LeaseLandingGiveBack, TheRequestsWaitingOnATakeTakeOnlyOnceItsGiveBackCounts) {
  auto wire = std::make_shared<Wire>();
  auto memory = OpenMemoryStore();
  ASSERT_TRUE(memory.has_value());
  auto held = std::make_shared<HeldAnswersStore>(*memory, wire);
  auto leased = OpenLeasedStore(held, {.scheduler = testing::IdleScheduler()});
  ASSERT_TRUE(leased.has_value());
  const LimitSpec spec{.algorithm = Algorithm::kTokenBucket, .limit = 10, .period = seconds(1)};
  auto limiter = (*leased)->MakeLimiter(
      spec, {.id = "lim", .sync = {.mode = SyncMode::kLeased, .lease_ttl = seconds(2)}});
  ASSERT_TRUE(limiter.has_value()) << limiter.error().message;
  Limiter& l = **limiter;

  std::vector<Decision> decided;
  auto decide = [&](int64_t at_ms, int64_t cost) {
    l.DecideAsync("k", kStart + milliseconds(at_ms), cost,
                  [&decided](const Decision& d) { decided.push_back(d); });
  };
  decide(0, 1);
  AnswerAll(*wire);
  decide(70, 1);
  AnswerAll(*wire);
  decide(71, 1);
  AnswerAll(*wire);
  ASSERT_EQ(l.Stats().lease_units_held, 7) << "the third request takes a lease";

  decide(200, 6);  // from the units held; sends a take for more
  ASSERT_EQ(decided.size(), 4u);
  EXPECT_TRUE(decided.back().allowed);
  ASSERT_EQ(wire->answers.size(), 1u) << "a take for more units is in flight";
  bool refunded = false;
  l.RefundThen("k", kStart + milliseconds(100), kStart + milliseconds(100), 7,
               [&refunded](bool given_back) { refunded = given_back; });
  EXPECT_TRUE(refunded);
  ASSERT_EQ(l.Stats().lease_units_held, 8) << "the late refund went back into the units";
  decide(200, 9);  // the units held cannot cover it: it waits for the take in flight
  ASSERT_EQ(decided.size(), 4u);

  const int takes_before = wire->takes;
  AnswerAll(*wire);
  ASSERT_EQ(decided.size(), 5u);
  EXPECT_GT(wire->takes, takes_before) << "the request of 9 was decided by a take of its own";
  EXPECT_EQ(wire->takes_overtaking, 0)
      << "a take reached the shared store before the units given back at the landing";
  EXPECT_TRUE(decided.back().allowed) << "decided without the units given back";
  for (auto& give_back : wire->late) give_back();
}

}  // namespace
}  // namespace sluice
