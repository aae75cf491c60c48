// A listening TCP socket on 127.0.0.1 at a port the kernel picks, for the test servers in
// tests/support (a TCP proxy, a recording upstream).
#ifndef SLUICE_TESTS_SUPPORT_LOOPBACK_LISTENER_H_
#define SLUICE_TESTS_SUPPORT_LOOPBACK_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

namespace sluice::testing {

// Makes the socket (SO_REUSEADDR, backlog 64) into *fd and returns its port, or 0 if it could
// not listen (*fd is then still the caller's to close, -1 if no socket was made).
inline uint16_t ListenOnLoopback(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  if (*fd < 0) return 0;
  const int one = 1;
  setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(*fd, 64) != 0 ||
      getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 0;
  }
  return ntohs(addr.sin_port);
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_LOOPBACK_LISTENER_H_
