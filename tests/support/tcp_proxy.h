// A TCP proxy on loopback for tests: forwards each connection to 127.0.0.1:<target>, holding
// every chunk for a configurable one-way delay (a distant link), and can cut the link -- close
// every connection and refuse new ones -- and restore it. Its threads stop with it.
#ifndef SLUICE_TESTS_SUPPORT_TCP_PROXY_H_
#define SLUICE_TESTS_SUPPORT_TCP_PROXY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/loopback_listener.h"

namespace sluice::testing {

class TcpProxy {
 public:
  using Clock = std::chrono::steady_clock;

  TcpProxy(int target_port, std::chrono::milliseconds one_way_delay = {})
      : target_port_(target_port), delay_ms_(one_way_delay.count()) {
    port_ = ListenOnLoopback(&listener_);
    if (port_ == 0) throw std::runtime_error("tcp proxy: cannot listen on loopback");
    acceptor_ = std::thread([this] { AcceptUntilStopped(); });
  }
  ~TcpProxy() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : pumps_) t.join();
    close(listener_);
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  std::string address() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  void SetDelay(std::chrono::milliseconds one_way) { delay_ms_ = one_way.count(); }
  // Every connection closed, new ones closed as soon as accepted: the far side is unreachable.
  void Cut() {
    cut_ = true;
    ++generation_;
  }
  void Restore() {
    cut_ = false;
    silent_ = false;
  }
  // Connections stay open and new ones are taken, but nothing goes through either way: a far
  // side that went silent (packets dropped), which only a timeout tells from a slow one.
  void Silence() { silent_ = true; }

 private:
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
  };

  static int ConnectLoopback(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return -1;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }

  void AcceptUntilStopped() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int server = cut_ ? -1 : ConnectLoopback(target_port_);
      if (server < 0) {
        close(client);
        continue;
      }
      const int one = 1;
      setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mu_);
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
    }
  }

  // Both directions of one connection, each chunk written once its delay has passed.
  void Pump(int client, int server) {
    const int born = generation_;
    std::deque<Chunk> to_server, to_client;
    char buf[64 * 1024];
    bool open = true;
    while (open && !stop_ && generation_ == born) {
      const auto now = Clock::now();
      for (auto* q : {&to_server, &to_client}) {
        const int fd = q == &to_server ? server : client;
        while (!q->empty() && q->front().due <= now) {
          const std::string& b = q->front().bytes;
          for (size_t off = 0; off < b.size();) {
            const ssize_t n = send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
            if (n <= 0) {
              open = false;
              break;
            }
            off += static_cast<size_t>(n);
          }
          q->pop_front();
        }
      }
      int wait_ms = 20;
      for (auto* q : {&to_server, &to_client}) {
        if (q->empty()) continue;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(q->front().due - Clock::now())
                .count();
        wait_ms = std::min<int>(wait_ms, static_cast<int>(std::max<int64_t>(0, left)));
      }
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, wait_ms) <= 0) continue;
      const auto due = Clock::now() + std::chrono::milliseconds(delay_ms_.load());
      for (int i = 0; i < 2 && open; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = recv(p[i].fd, buf, sizeof buf, 0);
        if (n <= 0) {
          open = false;
          break;
        }
        if (silent_) continue;  // dropped
        (i == 0 ? to_server : to_client).push_back({due, std::string(buf, static_cast<size_t>(n))});
      }
    }
    close(client);
    close(server);
  }

  const int target_port_;
  std::atomic<int64_t> delay_ms_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> silent_{false};
  std::atomic<int> generation_{0};
  std::atomic<bool> stop_{false};
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_TCP_PROXY_H_
