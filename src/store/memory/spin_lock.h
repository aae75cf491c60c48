// A test-and-test-and-set lock for the memory store's shards. Critical sections are a few dozen
// nanoseconds, so spinning briefly beats parking a thread; after a short spin it yields so an
// oversubscribed machine still makes progress. Satisfies Lockable (std::lock_guard works).
#ifndef SLUICE_STORE_MEMORY_SPIN_LOCK_H_
#define SLUICE_STORE_MEMORY_SPIN_LOCK_H_

#include <atomic>
#include <thread>

namespace sluice::internal {

class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_SPIN_LOCK_H_
