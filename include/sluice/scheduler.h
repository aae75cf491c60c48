// Scheduler: where the stores' periodic background work runs -- leases given back when they
// expire, a region's part renewed from the global store, batched syncs, the Redis monitor's
// PINGs. Stores take one in their options instead of starting threads of their own, so that a
// test can run that work itself, in order, at the times of a ManualClock, and never waits on
// the wall clock.
//
//   ThreadScheduler background(clock);              // production: real time
//   auto sweep = background.Every(20ms, [&](Timestamp now) { book.ReturnExpired(now); });
//
//   ManualClock clock;                               // tests
//   ManualScheduler scheduler(clock);
//   auto task = scheduler.Every(100ms, work);
//   scheduler.Advance(1s);                           // runs `work` 10 times, at 100 ms, 200 ms...
//
// Destroying a task's handle cancels it and waits for a run in progress (unless called from
// that run). Thread-safe.
#ifndef SLUICE_SCHEDULER_H_
#define SLUICE_SCHEDULER_H_

#include <functional>
#include <memory>
#include <utility>

#include "sluice/clock.h"
#include "sluice/time.h"

namespace sluice {

class Scheduler {
 public:
  // A scheduled task; destroying it cancels the task.
  class Task {
   public:
    virtual ~Task() = default;
  };
  using Work = std::function<void(Timestamp now)>;

  virtual ~Scheduler() = default;

  // Runs `work(now)` every `period` (> 0) of the scheduler's clock, the first time one period
  // from now, until the returned handle is destroyed. A run that takes longer than `period`
  // delays the next one; runs of one task never overlap.
  std::unique_ptr<Task> Every(Duration period, Work work) {
    return Every(period, std::move(work), period);
  }
  // As above, the first run `first` (>= 0) from now: 0 for work due at once, such as the Redis
  // monitor's first round, which reports a wrong password at start rather than a period later.
  virtual std::unique_ptr<Task> Every(Duration period, Work work, Duration first) = 0;

  virtual const Clock& clock() const = 0;
};

// Real time: each task runs on a thread of its own (a slow task -- a renewal waiting out a
// silent global store -- never delays another), waiting on the steady clock between runs and
// passing `clock`'s time to the work. `clock` must outlive the scheduler and its tasks.
class ThreadScheduler final : public Scheduler {
 public:
  explicit ThreadScheduler(const Clock& clock) : clock_(clock) {}
  using Scheduler::Every;
  std::unique_ptr<Task> Every(Duration period, Work work, Duration first) override;
  const Clock& clock() const override { return clock_; }

 private:
  const Clock& clock_;
};

// Test time: nothing runs until the test says so. Advance moves the clock and runs every task
// that comes due on the way, in order of due time, each at its due time; RunDue runs those due
// at the clock's time now. `clock` must outlive the scheduler.
class ManualScheduler final : public Scheduler {
 public:
  explicit ManualScheduler(ManualClock& clock);
  ~ManualScheduler() override;
  using Scheduler::Every;
  std::unique_ptr<Task> Every(Duration period, Work work, Duration first) override;
  const Clock& clock() const override { return clock_; }

  void Advance(Duration d);
  void RunDue();
  // Tasks scheduled and not cancelled.
  size_t tasks() const;

  struct State;  // internal: the tasks, shared with their handles

 private:
  ManualClock& clock_;
  std::shared_ptr<State> state_;
};

}  // namespace sluice

#endif  // SLUICE_SCHEDULER_H_
