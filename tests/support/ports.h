// Loopback ports for tests. FreePort, for a server the test starts as another process (that must
// be told its port): free when asked, it may be taken before the server binds it, so starters
// retry on another. UnusedPort, for "nothing answers there": held bound and never listening while
// it lives, so a connection to it is refused. A server in the test process binds port 0 itself.
#ifndef SLUICE_TESTS_SUPPORT_PORTS_H_
#define SLUICE_TESTS_SUPPORT_PORTS_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

namespace sluice::testing {

// A loopback port nothing is bound to now, or 0 (then starting a server on it fails: no gtest
// here, bench/region_latency starts its redis-servers through support/redis_server.h too).
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

// Whether `port` can be bound on loopback now.
inline bool PortIsFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A port for a Redis Cluster node, or 0: its bus listens on port + 10000, so the port must be
// at most 55535 (redis-server refuses higher), which a third of the kernel's ephemeral range
// is not. As scripts/redis-cluster does, drawn from 10000-21999, so that both the port and the
// bus port stay out of the ephemeral range that FreePort and every client connection use.
inline int FreeClusterPort() {
  std::random_device seed;
  std::uniform_int_distribution<int> pick(10000, 21999);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = pick(seed);
    if (PortIsFree(port) && PortIsFree(port + 10000)) return port;
  }
  return 0;
}

// A loopback port nobody listens on while this lives (bound, never listening: connections are
// refused).
class UnusedPort {
 public:
  UnusedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "no loopback port to hold";
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~UnusedPort() {
    if (fd_ >= 0) close(fd_);
  }
  UnusedPort(const UnusedPort&) = delete;
  UnusedPort& operator=(const UnusedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_PORTS_H_
