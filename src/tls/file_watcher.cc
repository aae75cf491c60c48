#include "tls/file_watcher.h"

#include <sys/stat.h>

#include <tuple>
#include <utility>

namespace sluice::tls {
namespace {

FileWatcher::FileState StateOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

std::vector<FileWatcher::FileState> StatesOf(const std::vector<std::string>& paths) {
  std::vector<FileWatcher::FileState> states;
  states.reserve(paths.size());
  for (const std::string& p : paths) states.push_back(StateOf(p));
  return states;
}

}  // namespace

FileWatcher::FileWatcher(std::vector<std::string> paths, std::chrono::milliseconds interval,
                         std::function<void()> on_change)
    : paths_(std::move(paths)), interval_(interval), on_change_(std::move(on_change)) {
  // The first state is taken here, not on the thread: a change right after the constructor
  // returns must be seen as one.
  thread_ = std::thread([this, seen = StatesOf(paths_)]() mutable { Run(std::move(seen)); });
}

FileWatcher::~FileWatcher() { Stop(); }

void FileWatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FileWatcher::Run(std::vector<FileState> seen) {
  std::unique_lock lock(mu_);
  while (true) {
    // The wait is the polling period, not a decision: nothing here reads the time.
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    std::vector<FileState> now = StatesOf(paths_);
    if (now != seen) {
      seen = std::move(now);
      on_change_();
    }
    lock.lock();
  }
}

}  // namespace sluice::tls
