#include "sluiced/snapshotter.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace sluice::server {
namespace {

constexpr StatFamily kSnapshotAge{
    "sluice_snapshot_age_seconds", StatKind::kGauge,
    "Seconds since the memory store's counters were last written to --state-dir (since the "
    "start before the first snapshot): what a crash now could lose."};

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Result<std::unique_ptr<Snapshotter>> Snapshotter::Open(const std::string& dir, Duration interval,
                                                       std::shared_ptr<Store> store,
                                                       const Clock& clock) {
  if (SnapshotsOf(*store) == nullptr) {
    return MakeError(
        "--state-dir keeps the memory store's counters: it needs --store memory "
        "without --global-store");
  }
  auto opened = StateDir::Open(dir);
  if (!opened) return std::unexpected(opened.error());
  std::unique_ptr<Snapshotter> s(
      new Snapshotter(std::move(*opened), interval, std::move(store), clock));
  s->Load();
  return s;
}

Snapshotter::Snapshotter(std::unique_ptr<StateDir> dir, Duration interval,
                         std::shared_ptr<Store> store, const Clock& clock)
    : dir_(std::move(dir)),
      interval_(interval),
      store_(std::move(store)),
      snapshots_(SnapshotsOf(*store_)),
      clock_(clock),
      last_saved_ns_(ToNanos(clock.Now())) {}

Snapshotter::~Snapshotter() { task_.reset(); }

// The store's clock is anchored to the wall clock at the start and then follows the steady
// clock; the difference is what turns its instants into wall-clock ones (memory_store.h).
Duration Snapshotter::ToWall() const {
  const auto wall = std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  return wall - clock_.Now();
}

void Snapshotter::Load() {
  auto bytes = dir_->ReadSnapshot();
  if (bytes && !bytes->has_value()) {
    spdlog::info("state: no snapshot in {}, starting with no counters", dir_->path());
    return;
  }
  SnapshotLoaded loaded;
  if (!bytes) {
    loaded.error = bytes.error().message;
  } else {
    loaded = snapshots_->Load(**bytes, clock_.Now(), ToWall());
  }
  if (loaded.error.empty()) {
    spdlog::info("state: read {} live counters from {} ({} replenished since, left out)",
                 loaded.counters, dir_->snapshot_path(), loaded.expired);
    return;
  }
  auto aside = dir_->SetAsideSnapshot();
  spdlog::error(
      "state: the snapshot {} cannot be read whole: {}; {}; starting with the {} live counters "
      "read before that",
      dir_->snapshot_path(), loaded.error,
      aside ? "set aside as " + *aside : "not set aside: " + aside.error().message,
      loaded.counters);
}

void Snapshotter::Start() {
  const SnapshotRestored r = snapshots_->FinishRestore();
  spdlog::info(
      "state: {} counters restored; dropped: {} replenished, {} whose rule changed meaning, {} "
      "of limits no longer configured; {} concurrency permits held again ({} expired or "
      "dropped); a snapshot every {}s to {}",
      r.restored, r.expired, r.rule_changed, r.unmatched, r.permits, r.permits_dropped,
      Seconds(interval_), dir_->snapshot_path());
  timer_ = std::make_unique<ThreadScheduler>(clock_);
  task_ = timer_->Every(interval_, [this](Timestamp) { SaveNow(); });
}

bool Snapshotter::Stop() {
  task_.reset();  // waits for a run under way
  return SaveNow();
}

bool Snapshotter::SaveNow() {
  std::lock_guard<std::mutex> lock(save_mu_);
  const Timestamp now = clock_.Now();
  SnapshotSaved saved;
  const std::string bytes = snapshots_->Save(now, ToWall(), &saved);
  if (auto written = dir_->WriteSnapshot(bytes); !written) {
    if (!failing_) spdlog::error("state: snapshot failed: {}", written.error().message);
    failing_ = true;
    return false;
  }
  if (failing_) spdlog::info("state: snapshots are written again");
  failing_ = false;
  last_saved_ns_.store(ToNanos(now), std::memory_order_relaxed);
  spdlog::debug("state: {} counters of {} limits written ({} bytes) in {:.1f} ms", saved.counters,
                saved.limits, bytes.size(), Seconds(clock_.Now() - now) * 1e3);
  return true;
}

void Snapshotter::ReportStats(StatsSink& sink) const {
  const Duration age = clock_.Now() - FromNanos(last_saved_ns_.load(std::memory_order_relaxed));
  sink.Add(kSnapshotAge, {}, Seconds(age));
}

}  // namespace sluice::server
