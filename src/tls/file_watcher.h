// Calls back when any of a few files changes (their inode, size or mtime, as stat sees them;
// a missing file counts as a state too), looking once per `interval` on a thread of its own.
// A Kubernetes secret volume swaps a symlink; cert-manager's and a sidecar's writes change the
// size or mtime: stat follows the link, so both are seen. The callback runs on the watcher's
// thread, once per change seen (files written one after the other may take two calls: the
// callback must cope with a half-written pair, as ServerTlsContext::Reload does).
//
//   FileWatcher watcher({cert, key, ca}, std::chrono::seconds(1), [&] { Reload(); });
//   ...  // ~FileWatcher stops it within a moment, without waiting out the interval
#ifndef SLUICE_TLS_FILE_WATCHER_H_
#define SLUICE_TLS_FILE_WATCHER_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace sluice::tls {

class FileWatcher {
 public:
  // What stat says of one file (device, inode, size, mtime); all zero when it cannot be read.
  using FileState = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>;

  FileWatcher(std::vector<std::string> paths, std::chrono::milliseconds interval,
              std::function<void()> on_change);
  ~FileWatcher();  // Stop()
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

  void Stop();  // idempotent; returns once the thread has ended

 private:
  void Run(std::vector<FileState> seen);

  const std::vector<std::string> paths_;
  const std::chrono::milliseconds interval_;
  const std::function<void()> on_change_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // under mu_
  std::thread thread_;
};

}  // namespace sluice::tls

#endif  // SLUICE_TLS_FILE_WATCHER_H_
