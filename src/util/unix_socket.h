// A listening Unix stream socket at a path in the file system, for the listeners given as
// "unix:/path" (util/listen_address.h). docs/security.md, "Unix sockets", is the reference.
//
//   auto bound = ListenUnixSocket("/run/sluice/http.sock", {.mode = 0660, .group = "www-data"});
//   if (!bound) return bound.error();   // "another server is listening on ...", ...
//   acceptor.assign(protocol, bound->fd);  // the fd is the caller's
//   ... bound->file.Remove();              // or its destructor: the file goes, if still ours
//
// - An existing file at the path is replaced only when it is a socket nobody listens on (a
//   connect() to it is refused: a server that died without removing it). A live server's socket
//   is never taken, and a path that is not a socket is never removed.
// - The socket is bound in a private directory (mode 0700) next to the path, given its mode and
//   group there, then linked into place: nobody can connect while it is wider than asked, and the
//   process's umask (shared by every thread) is left alone.
// - The file is removed only if the path still names the socket made here (same inode): a second
//   server that replaced it after a restart keeps its own.
#ifndef SLUICE_UTIL_UNIX_SOCKET_H_
#define SLUICE_UTIL_UNIX_SOCKET_H_

#include <sys/types.h>

#include <expected>
#include <string>
#include <string_view>

namespace sluice::util {

struct UnixSocketOptions {
  mode_t mode = 0660;  // the socket file's permissions: who may connect
  std::string group;   // the file's group (a name); empty: the process's own
};

// The socket file made by ListenUnixSocket; removes it when destroyed, if it is still the one.
class UnixSocketFile {
 public:
  UnixSocketFile() = default;
  UnixSocketFile(std::string path, dev_t dev, ino_t ino);
  ~UnixSocketFile() { Remove(); }
  UnixSocketFile(UnixSocketFile&& other) noexcept;
  UnixSocketFile& operator=(UnixSocketFile&& other) noexcept;
  UnixSocketFile(const UnixSocketFile&) = delete;
  UnixSocketFile& operator=(const UnixSocketFile&) = delete;

  const std::string& path() const { return path_; }
  // Unlinks the path if it still names this socket; idempotent.
  void Remove();

 private:
  std::string path_;  // empty: nothing to remove
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

struct BoundUnixSocket {
  int fd = -1;  // listening, non-blocking, close-on-exec; the caller's to close
  UnixSocketFile file;
};

// Binds and listens on `path` (absolute, shorter than sun_path) with `options`, or says why not:
// the message names the path and is meant for the operator.
std::expected<BoundUnixSocket, std::string> ListenUnixSocket(const std::string& path,
                                                             const UnixSocketOptions& options);

// "0660" (octal digits, at most 0777) as a mode, or why not.
std::expected<mode_t, std::string> ParseSocketMode(std::string_view text);

}  // namespace sluice::util

#endif  // SLUICE_UTIL_UNIX_SOCKET_H_
