#include "sluiced/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <utility>

namespace sluice::server {
namespace {

std::string Errno(int err) { return std::strerror(err); }

// What is in DIR/lock: the pid of the process holding it, for the other one's error message.
std::string LockHolder(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "another process";
  std::string pid(buf, static_cast<size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return "another sluiced (pid " + pid + ")";
}

Result<void> WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MakeError(Errno(errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<StateDir>> StateDir::Open(const std::string& path) {
  const std::string what = "--state-dir " + path + ": ";
  if (mkdir(path.c_str(), 0750) != 0 && errno != EEXIST) {
    return MakeError(what + "cannot create it: " + Errno(errno));
  }
  const int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return MakeError(what + "cannot open it as a directory: " + Errno(errno));
  const int lock = openat(dir, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (lock < 0) {
    const int err = errno;
    close(dir);
    return MakeError(what + "cannot write in it (" + path + "/lock): " + Errno(err));
  }
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? LockHolder(lock) : Errno(err);
    close(lock);
    close(dir);
    return MakeError(what + "in use by " + holder + ": two sluiced cannot share a state directory");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(lock, 0) != 0 || !WriteAll(lock, pid)) {
    const int err = errno;
    close(lock);
    close(dir);
    return MakeError(what + "cannot write in it (" + path + "/lock): " + Errno(err));
  }
  return std::unique_ptr<StateDir>(new StateDir(path, dir, lock));
}

StateDir::~StateDir() {
  close(lock_fd_);  // releases the flock
  close(dir_fd_);
}

Result<std::optional<std::string>> StateDir::ReadSnapshot() const {
  const int fd = openat(dir_fd_, "snapshot", O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return std::optional<std::string>();
  if (fd < 0) return MakeError("cannot open " + snapshot_path() + ": " + Errno(errno));
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return MakeError("cannot read " + snapshot_path() + ": " + Errno(err));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return std::optional<std::string>(std::move(bytes));
}

Result<void> StateDir::WriteSnapshot(std::string_view bytes) const {
  const int fd = openat(dir_fd_, "snapshot.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return MakeError("cannot create " + path_ + "/snapshot.tmp: " + Errno(errno));
  Result<void> written = WriteAll(fd, bytes);
  if (written && fsync(fd) != 0) written = MakeError("fsync: " + Errno(errno));
  if (close(fd) != 0 && written) written = MakeError("close: " + Errno(errno));
  if (!written) {
    unlinkat(dir_fd_, "snapshot.tmp", 0);  // the last good snapshot stays as it was
    return MakeError("cannot write " + path_ +
                     "/snapshot.tmp (the last snapshot is kept): " + written.error().message);
  }
  if (renameat(dir_fd_, "snapshot.tmp", dir_fd_, "snapshot") != 0) {
    const int err = errno;
    unlinkat(dir_fd_, "snapshot.tmp", 0);
    return MakeError("cannot rename " + path_ + "/snapshot.tmp over the snapshot: " + Errno(err));
  }
  // The rename is durable once the directory is.
  if (fsync(dir_fd_) != 0) return MakeError("fsync " + path_ + ": " + Errno(errno));
  return {};
}

Result<std::string> StateDir::SetAsideSnapshot() const {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::string name = std::string("snapshot.bad-") + stamp;
  // Never over an earlier one set aside in the same second.
  for (int n = 2; faccessat(dir_fd_, name.c_str(), F_OK, 0) == 0; ++n) {
    name = std::string("snapshot.bad-") + stamp + "-" + std::to_string(n);
  }
  if (renameat(dir_fd_, "snapshot", dir_fd_, name.c_str()) != 0) {
    return MakeError("cannot rename " + snapshot_path() + " to " + name + ": " + Errno(errno));
  }
  fsync(dir_fd_);
  return path_ + "/" + name;
}

}  // namespace sluice::server
