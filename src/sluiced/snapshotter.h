// --state-dir and --snapshot-interval: the memory store's counters survive a restart
// (docs/quotas.md). At start the snapshot in DIR is loaded into the store before the service
// makes its limiters; every interval, and once at a clean shutdown after the drain, the live
// counters are written back. The writing runs on a thread of its own: a decision waits at most
// for its shard's counters to be copied out, never for the disk.
#ifndef SLUICE_SLUICED_SNAPSHOTTER_H_
#define SLUICE_SLUICED_SNAPSHOTTER_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "sluice/scheduler.h"
#include "sluice/stats_sink.h"
#include "sluice/status.h"
#include "sluice/store.h"
#include "sluiced/state_dir.h"

namespace sluice::server {

class Snapshotter {
 public:
  // Locks DIR and loads its snapshot into `store`, which must be a memory store whose limiters
  // are not made yet. A snapshot that cannot be read whole is logged and set aside
  // (DIR/snapshot.bad-<time>), keeping what was read before the damage; only an unusable DIR
  // (or another store) is an error.
  static Result<std::unique_ptr<Snapshotter>> Open(const std::string& dir, Duration interval,
                                                   std::shared_ptr<Store> store,
                                                   const Clock& clock);
  ~Snapshotter();

  // Once the service has made its limiters: logs what became of the loaded counters and starts
  // the periodic snapshots.
  void Start();
  // Writes a snapshot now (the shutdown's, after the drain); stops the periodic ones first.
  // Whether it was written.
  bool Stop();

  // sluice_snapshot_age_seconds.
  void ReportStats(StatsSink& sink) const;

 private:
  Snapshotter(std::unique_ptr<StateDir> dir, Duration interval, std::shared_ptr<Store> store,
              const Clock& clock);
  void Load();
  bool SaveNow();
  Duration ToWall() const;

  const std::unique_ptr<StateDir> dir_;
  const Duration interval_;
  const std::shared_ptr<Store> store_;
  MemorySnapshots* const snapshots_;
  const Clock& clock_;
  std::mutex save_mu_;  // one save at a time (the timer's and the shutdown's)
  // When the last snapshot was written (the clock's ns), or the start before the first one.
  std::atomic<int64_t> last_saved_ns_;
  bool failing_ = false;  // guarded by save_mu_: the last write failed (logged once a streak)
  std::unique_ptr<ThreadScheduler> timer_;
  std::unique_ptr<Scheduler::Task> task_;
};

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_SNAPSHOTTER_H_
