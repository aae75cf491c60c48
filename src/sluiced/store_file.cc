#include "sluiced/store_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::server {

Result<std::string> ReadStoreFile(const std::string& path) {
  constexpr size_t kMaxBytes = 64 * 1024;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MakeError("cannot read '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return MakeError("'" + path + "' is not a regular file");
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    close(fd);
    return MakeError("'" + path +
                     "' may be read or written by every user of the host; it holds a password: "
                     "chmod o-rwx it");
  }
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof buf)) > 0 && text.size() <= kMaxBytes) {
    text.append(buf, static_cast<size_t>(n));
  }
  const int error = n < 0 ? errno : 0;
  close(fd);
  if (error != 0) return MakeError("cannot read '" + path + "': " + std::strerror(error));
  if (text.size() > kMaxBytes) return MakeError("'" + path + "' is larger than 64 KiB");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.pop_back();
  }
  if (text.empty()) return MakeError("'" + path + "' is empty");
  if (text.find('\n') != std::string::npos) {
    return MakeError("'" + path + "' has more than one line; it holds one store address");
  }
  return text;
}

}  // namespace sluice::server
