#include "sluice/scheduler.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace sluice {
namespace {

// One task of a ThreadScheduler: its thread and what it waits on. The thread holds the state
// too, so a task cancelled from its own run (which cannot join itself) can still finish safely.
struct ThreadTaskState {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
};

class ThreadTask final : public Scheduler::Task {
 public:
  ThreadTask(const Clock& clock, Duration period, Scheduler::Work work, Duration first)
      : state_(std::make_shared<ThreadTaskState>()) {
    thread_ = std::thread([state = state_, &clock, period, first, work = std::move(work)] {
      auto due = std::chrono::steady_clock::now() + first;
      std::unique_lock<std::mutex> lock(state->mu);
      while (!state->cv.wait_until(lock, due, [&] { return state->stop; })) {
        lock.unlock();
        work(clock.Now());
        lock.lock();
        due += period;
        // Runs missed while one took long are skipped, not made up in a burst.
        if (const auto now = std::chrono::steady_clock::now(); due < now) due = now + period;
      }
    });
  }

  ~ThreadTask() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->stop = true;
    }
    state_->cv.notify_all();
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // cancelled from its own run: it stops when the run returns
    } else {
      thread_.join();
    }
  }

 private:
  const std::shared_ptr<ThreadTaskState> state_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Scheduler::Task> ThreadScheduler::Every(Duration period, Work work,
                                                        Duration first) {
  return std::make_unique<ThreadTask>(clock_, period, std::move(work), first);
}

struct ManualScheduler::State {
  struct Entry {
    Duration period;
    Timestamp due;
    std::shared_ptr<Work> work;
  };
  mutable std::mutex mu;
  std::condition_variable idle;  // a run ended
  std::map<uint64_t, Entry> entries;
  uint64_t next_id = 0;
  uint64_t running = 0;  // the task running now (ids start at 1)
  std::thread::id runner;

  void Cancel(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    entries.erase(id);
    if (runner == std::this_thread::get_id()) return;  // from its own run (or another task's)
    idle.wait(lock, [&] { return running != id; });
  }
};

namespace {

class ManualTask final : public Scheduler::Task {
 public:
  ManualTask(std::weak_ptr<ManualScheduler::State> state, uint64_t id)
      : state_(std::move(state)), id_(id) {}
  ~ManualTask() override {
    if (auto state = state_.lock()) state->Cancel(id_);
  }

 private:
  const std::weak_ptr<ManualScheduler::State> state_;
  const uint64_t id_;
};

}  // namespace

ManualScheduler::ManualScheduler(ManualClock& clock)
    : clock_(clock), state_(std::make_shared<State>()) {}

ManualScheduler::~ManualScheduler() = default;

std::unique_ptr<Scheduler::Task> ManualScheduler::Every(Duration period, Work work,
                                                        Duration first) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const uint64_t id = ++state_->next_id;
  state_->entries.emplace(
      id, State::Entry{period, clock_.Now() + first, std::make_shared<Work>(std::move(work))});
  return std::make_unique<ManualTask>(state_, id);
}

void ManualScheduler::Advance(Duration d) {
  const Timestamp target = clock_.Now() + d;
  std::unique_lock<std::mutex> lock(state_->mu);
  for (;;) {
    auto next = state_->entries.end();
    for (auto it = state_->entries.begin(); it != state_->entries.end(); ++it) {
      if (it->second.due <= target &&
          (next == state_->entries.end() || it->second.due < next->second.due)) {
        next = it;
      }
    }
    if (next == state_->entries.end()) break;
    const uint64_t id = next->first;
    const Timestamp due = next->second.due;
    const std::shared_ptr<Work> work = next->second.work;
    if (clock_.Now() < due) clock_.Set(due);
    // As on real time: runs missed while the clock was moved by hand are skipped, not made up.
    const Timestamp at = std::max(due, clock_.Now());
    next->second.due = at + next->second.period;
    state_->running = id;
    state_->runner = std::this_thread::get_id();
    lock.unlock();
    (*work)(at);
    lock.lock();
    state_->running = 0;
    state_->runner = std::thread::id();
    state_->idle.notify_all();
  }
  lock.unlock();
  if (clock_.Now() < target) clock_.Set(target);
}

void ManualScheduler::RunDue() { Advance(Duration(0)); }

size_t ManualScheduler::tasks() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->entries.size();
}

}  // namespace sluice
