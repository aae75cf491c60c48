#include "sluice/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

using std::chrono::milliseconds;

int64_t Ms(Timestamp t) { return ToNanos(t) / 1'000'000; }

TEST(ManualScheduler, RunsEachTaskAtItsDueTimesInOrder) {
  ManualClock clock(FromNanos(0));
  ManualScheduler scheduler(clock);
  std::vector<std::string> runs;
  auto a = scheduler.Every(milliseconds(30), [&](Timestamp now) {
    runs.push_back("a@" + std::to_string(Ms(now)) + "/" + std::to_string(Ms(clock.Now())));
  });
  auto b = scheduler.Every(milliseconds(50), [&](Timestamp now) {
    runs.push_back("b@" + std::to_string(Ms(now)) + "/" + std::to_string(Ms(clock.Now())));
  });
  scheduler.Advance(milliseconds(149));
  // Written out by hand: multiples of 30 and of 50 below 150, merged; the clock reads the due time.
  EXPECT_EQ(runs, (std::vector<std::string>{"a@30/30", "b@50/50", "a@60/60", "a@90/90", "b@100/100",
                                            "a@120/120"}));
  EXPECT_EQ(Ms(clock.Now()), 149);
  runs.clear();
  scheduler.Advance(milliseconds(1));
  EXPECT_EQ(runs, (std::vector<std::string>{"a@150/150", "b@150/150"}));  // ties: first scheduled
}

TEST(ManualScheduler, AFirstDelayOfZeroRunsAtTheNextRunDue) {
  ManualClock clock(FromNanos(0));
  ManualScheduler scheduler(clock);
  std::vector<int64_t> runs;
  auto task = scheduler.Every(
      milliseconds(100), [&](Timestamp now) { runs.push_back(Ms(now)); }, milliseconds(0));
  EXPECT_TRUE(runs.empty());  // scheduling runs nothing by itself
  scheduler.RunDue();
  scheduler.Advance(milliseconds(250));
  EXPECT_EQ(runs, (std::vector<int64_t>{0, 100, 200}));
}

TEST(ManualScheduler, NothingRunsUntilTheTestAdvances) {
  ManualClock clock(FromNanos(0));
  ManualScheduler scheduler(clock);
  int runs = 0;
  Timestamp seen{};
  auto task = scheduler.Every(milliseconds(10), [&](Timestamp now) {
    ++runs;
    seen = now;
  });
  clock.Advance(std::chrono::seconds(1));  // the clock alone runs nothing
  EXPECT_EQ(runs, 0);
  scheduler.RunDue();  // one run, at the clock's time: missed runs are skipped, not a burst
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(Ms(seen), 1000);
  scheduler.RunDue();
  EXPECT_EQ(runs, 1);
  scheduler.Advance(milliseconds(10));  // due again one period after that run
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(Ms(seen), 1010);
}

TEST(ManualScheduler, ACancelledTaskNeverRunsAgain) {
  ManualClock clock(FromNanos(0));
  ManualScheduler scheduler(clock);
  int runs = 0;
  auto task = scheduler.Every(milliseconds(10), [&](Timestamp) { ++runs; });
  scheduler.Advance(milliseconds(25));
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(scheduler.tasks(), 1u);
  task.reset();
  EXPECT_EQ(scheduler.tasks(), 0u);
  scheduler.Advance(milliseconds(100));
  EXPECT_EQ(runs, 2);
}

TEST(ManualScheduler, ATaskMayCancelItselfOrScheduleAnother) {
  ManualClock clock(FromNanos(0));
  ManualScheduler scheduler(clock);
  std::unique_ptr<Scheduler::Task> self, spawned;
  int self_runs = 0, spawned_runs = 0;
  self = scheduler.Every(milliseconds(10), [&](Timestamp) {
    ++self_runs;
    spawned = scheduler.Every(milliseconds(10), [&](Timestamp) { ++spawned_runs; });
    self.reset();  // from its own run: must not wait for itself
  });
  scheduler.Advance(milliseconds(35));
  EXPECT_EQ(self_runs, 1);
  EXPECT_EQ(spawned_runs, 2);  // scheduled at 10: due at 20 and 30
}

TEST(ManualScheduler, CancellingFromAnotherThreadWaitsForTheRunInProgress) {
  ManualClock clock(FromNanos(0));
  ManualScheduler scheduler(clock);
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false, finished = false;
  auto task = scheduler.Every(milliseconds(10), [&](Timestamp) {
    std::unique_lock<std::mutex> lock(mu);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    finished = true;
  });
  std::thread runner([&] { scheduler.Advance(milliseconds(10)); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return started; }));
  }
  std::thread canceller([&] { task.reset(); });
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  canceller.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(finished) << "the handle went while its run was still going";
  }
  runner.join();
}

TEST(ThreadScheduler, RunsOnRealTimeWithTheClocksTimeAndStopsWhenCancelled) {
  MonotonicClock clock;
  ThreadScheduler scheduler(clock);
  const Timestamp start = clock.Now();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Timestamp> runs;
  std::atomic<bool> in_run{false};
  auto task = scheduler.Every(milliseconds(5), [&](Timestamp now) {
    in_run = true;
    std::lock_guard<std::mutex> lock(mu);
    runs.push_back(now);
    cv.notify_all();
    in_run = false;
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return runs.size() >= 3; }));
    EXPECT_GE(runs[0] - start, milliseconds(5)) << "the first run comes one period after start";
    for (size_t i = 1; i < runs.size(); ++i) EXPECT_GE(runs[i], runs[i - 1]);
  }
  task.reset();  // joins: no run is in progress once it returns
  EXPECT_FALSE(in_run);
}

TEST(ThreadScheduler, ATaskMayCancelItself) {
  MonotonicClock clock;
  ThreadScheduler scheduler(clock);
  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<Scheduler::Task> task;
  int runs = 0;
  {
    std::lock_guard<std::mutex> lock(mu);  // the handle is set before the first run reads it
    task = scheduler.Every(milliseconds(1), [&](Timestamp) {
      std::lock_guard<std::mutex> inner(mu);
      ++runs;
      task.reset();
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return task == nullptr; }));
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace sluice
