#include "util/unix_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace sluice::util {
namespace {

std::string Errno() { return std::strerror(errno); }

// Fills `addr` with `path`; false if it does not fit (sun_path holds 107 bytes and a NUL).
bool MakeAddress(const std::string& path, sockaddr_un& addr) {
  addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return true;
}

// Closes its descriptor, unlinks its file and removes its directory, unless released.
struct Scratch {
  int fd = -1;
  std::string dir;
  std::string file;
  ~Scratch() {
    if (!file.empty()) unlink(file.c_str());
    if (!dir.empty()) rmdir(dir.c_str());
    if (fd >= 0) close(fd);
  }
};

enum class Existing { kNone, kStale };

// What lies at `path` now: nothing, or a socket nobody listens on; anything else is an error.
// A connect() that is refused is the one sure sign of a dead server: a live one accepts, or
// with a full backlog makes a non-blocking connect fail with EAGAIN, and a permission error
// tells nothing, so each of those keeps the file.
std::expected<Existing, std::string> Inspect(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Existing::kNone;
    return std::unexpected("cannot stat " + path + ": " + Errno());
  }
  if (!S_ISSOCK(st.st_mode)) {
    return std::unexpected(path + " exists and is not a socket; not replacing it");
  }
  sockaddr_un addr{};
  MakeAddress(path, addr);
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe < 0) return std::unexpected("socket: " + Errno());
  const int rc = connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  close(probe);
  if (rc != 0 && err == ECONNREFUSED) return Existing::kStale;
  if (rc == 0 || err == EAGAIN || err == EINPROGRESS) {
    return std::unexpected("another server is listening on " + path);
  }
  return std::unexpected("cannot tell whether " + path +
                         " is in use (connect: " + std::strerror(err) + "); not replacing it");
}

std::expected<gid_t, std::string> GroupId(const std::string& name) {
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  const int rc = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (rc != 0) return std::unexpected("cannot look up group " + name + ": " + std::strerror(rc));
  if (found == nullptr) return std::unexpected("no group named " + name);
  return found->gr_gid;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

UnixSocketFile::UnixSocketFile(std::string path, dev_t dev, ino_t ino)
    : path_(std::move(path)), dev_(dev), ino_(ino) {}

UnixSocketFile::UnixSocketFile(UnixSocketFile&& other) noexcept
    : path_(std::exchange(other.path_, {})), dev_(other.dev_), ino_(other.ino_) {}

UnixSocketFile& UnixSocketFile::operator=(UnixSocketFile&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, {});
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

void UnixSocketFile::Remove() {
  if (path_.empty()) return;
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    unlink(path_.c_str());
  }
  path_.clear();
}

std::expected<mode_t, std::string> ParseSocketMode(std::string_view text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("01234567") != text.npos) {
    return std::unexpected("bad socket mode '" + std::string(text) +
                           "': expected octal permissions such as 0660");
  }
  mode_t mode = 0;
  for (const char c : text) mode = mode * 8 + static_cast<mode_t>(c - '0');
  if (mode > 0777) {
    return std::unexpected("bad socket mode '" + std::string(text) +
                           "': permission bits only (at most 0777)");
  }
  return mode;
}

std::expected<BoundUnixSocket, std::string> ListenUnixSocket(const std::string& path,
                                                             const UnixSocketOptions& options) {
  const auto fail = [&](const std::string& why) {
    return std::unexpected("cannot listen on unix:" + path + ": " + why);
  };
  sockaddr_un final_addr{};
  if (!path.starts_with('/') || !MakeAddress(path, final_addr)) {
    return fail("expected an absolute path shorter than 108 bytes");
  }
  gid_t gid = static_cast<gid_t>(-1);  // chown's "leave it"
  if (!options.group.empty()) {
    auto found = GroupId(options.group);
    if (!found) return fail(found.error());
    gid = *found;
  }
  const auto existing = Inspect(path);
  if (!existing) return fail(existing.error());

  Scratch s;
  std::string dir_template = DirectoryOf(path) + "/.sluice-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) return fail("mkdtemp: " + Errno());
  s.dir = dir_template;
  const std::string scratch_path = s.dir + "/s";
  sockaddr_un scratch_addr{};
  if (!MakeAddress(scratch_path, scratch_addr)) {
    return fail("the path is too long for the scratch name next to it; use a shorter one");
  }
  s.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return fail("socket: " + Errno());
  if (bind(s.fd, reinterpret_cast<const sockaddr*>(&scratch_addr), sizeof scratch_addr) != 0) {
    return fail("bind: " + Errno());
  }
  s.file = scratch_path;
  if (chmod(scratch_path.c_str(), options.mode) != 0) return fail("chmod: " + Errno());
  if (gid != static_cast<gid_t>(-1) && chown(scratch_path.c_str(), static_cast<uid_t>(-1), gid)) {
    return fail("chown to group " + options.group + ": " + Errno());
  }
  if (listen(s.fd, SOMAXCONN) != 0) return fail("listen: " + Errno());
  struct stat st {};
  if (lstat(scratch_path.c_str(), &st) != 0) return fail("stat: " + Errno());
  // link() never replaces: a server that took the path since Inspect keeps it.
  if (*existing == Existing::kStale && unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail("removing the stale socket: " + Errno());
  }
  if (link(scratch_path.c_str(), path.c_str()) != 0) {
    if (errno == EEXIST) return fail("another server is listening on " + path);
    return fail("link: " + Errno());
  }
  BoundUnixSocket out;
  out.fd = std::exchange(s.fd, -1);
  out.file = UnixSocketFile(path, st.st_dev, st.st_ino);
  return out;
}

}  // namespace sluice::util
