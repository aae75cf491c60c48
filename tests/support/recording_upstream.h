// An HTTP upstream for the end-to-end gateway tests that answers every request `204` and
// records its request target as it arrived, so that a test can say what a proxy let through to
// the application, spelled as the application would read it. One thread polls every connection;
// on loopback only.
#ifndef SLUICE_TESTS_SUPPORT_RECORDING_UPSTREAM_H_
#define SLUICE_TESTS_SUPPORT_RECORDING_UPSTREAM_H_

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/loopback_listener.h"

namespace sluice::testing {

class RecordingUpstream {
 public:
  RecordingUpstream() {
    port_ = ListenOnLoopback(&listener_);
    if (port_ == 0) return;
    thread_ = std::thread([this] { Serve(); });
  }
  ~RecordingUpstream() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(listener_);
  }
  RecordingUpstream(const RecordingUpstream&) = delete;
  RecordingUpstream& operator=(const RecordingUpstream&) = delete;

  int port() const { return port_; }

  // The request targets served so far, in order.
  std::vector<std::string> served() const {
    std::lock_guard lock(mu_);
    return served_;
  }

 private:
  struct Connection {
    int fd;
    std::string in;
  };

  // One poll over the listener and every open connection; it times out every 50 ms only so
  // that the destructor's stop is seen.
  void Serve() {
    std::vector<Connection> connections;
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const Connection& c : connections) fds.push_back({c.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents != 0) {
        const int fd = accept(listener_, nullptr, nullptr);
        if (fd >= 0) connections.push_back({fd, {}});
      }
      for (size_t i = fds.size() - 1; i >= 1; --i) {
        if (fds[i].revents == 0) continue;
        Connection& c = connections[i - 1];
        if (!Read(c)) {
          close(c.fd);
          connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i - 1));
        }
      }
    }
    for (const Connection& c : connections) close(c.fd);
  }

  // Reads what arrived and answers each complete request 204 (bodies are not expected);
  // false when the connection is done.
  bool Read(Connection& c) {
    char buf[4096];
    const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    c.in.append(buf, static_cast<size_t>(n));
    for (size_t end = c.in.find("\r\n\r\n"); end != std::string::npos;
         end = c.in.find("\r\n\r\n")) {
      const size_t sp1 = c.in.find(' ');
      const size_t sp2 = c.in.find(' ', sp1 + 1);
      if (sp1 != std::string::npos && sp2 != std::string::npos && sp2 < end) {
        std::lock_guard lock(mu_);
        served_.push_back(c.in.substr(sp1 + 1, sp2 - sp1 - 1));
      }
      c.in.erase(0, end + 4);
      constexpr std::string_view kReply = "HTTP/1.1 204 No Content\r\n\r\n";
      if (send(c.fd, kReply.data(), kReply.size(), MSG_NOSIGNAL) < 0) return false;
    }
    return true;
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> served_;
  std::thread thread_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_RECORDING_UPSTREAM_H_
