// --state-dir: the directory where sluiced keeps the memory store's snapshot (docs/quotas.md,
// "Counters that survive a restart"). Held locked (flock on DIR/lock) for the process's life, so
// two sluiced never share one. Writes are atomic: a temporary file, fsynced, renamed over the
// snapshot, then the directory fsynced; a failed write (a full disk) leaves the last snapshot.
#ifndef SLUICE_SLUICED_STATE_DIR_H_
#define SLUICE_SLUICED_STATE_DIR_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/status.h"

namespace sluice::server {

class StateDir {
 public:
  // Opens (creating it if missing, but not its parents) and locks `path`; an error names what
  // is wrong: not a directory, not writable, or locked by another process (its pid).
  static Result<std::unique_ptr<StateDir>> Open(const std::string& path);
  ~StateDir();
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;

  // The snapshot's bytes; nullopt when there is none; an error when it cannot be read.
  Result<std::optional<std::string>> ReadSnapshot() const;
  // Replaces the snapshot with `bytes`, atomically.
  Result<void> WriteSnapshot(std::string_view bytes) const;
  // Renames the snapshot to snapshot.bad-<UTC time>, for a person to look at; returns its path.
  Result<std::string> SetAsideSnapshot() const;

  const std::string& path() const { return path_; }
  std::string snapshot_path() const { return path_ + "/snapshot"; }

 private:
  StateDir(std::string path, int dir_fd, int lock_fd)
      : path_(std::move(path)), dir_fd_(dir_fd), lock_fd_(lock_fd) {}

  const std::string path_;
  const int dir_fd_;
  const int lock_fd_;  // holds the flock until closed
};

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_STATE_DIR_H_
