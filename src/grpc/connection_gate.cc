#include "grpc/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "util/listen_address.h"
#include "util/unix_socket.h"

namespace sluice::server {
namespace {

// A handed-over connection: its descriptor and the socket it was. gRPC closes the descriptor
// when the connection ends, and the number may then be reused for another socket (the inode
// tells them apart: a socket's inode is unique while it exists and numbers are not recycled
// soon after).
struct Handed {
  int fd;
  dev_t dev;
  ino_t ino;
};

bool StillOpen(const Handed& h) {
  struct stat st {};
  return fstat(h.fd, &st) == 0 && st.st_dev == h.dev && st.st_ino == h.ino;
}

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

Result<Endpoint> ParseAddress(std::string_view address) {
  auto split = util::SplitListenAddress(address);
  if (!split) return MakeError(split.error());
  const bool v6 = split->v6;
  const uint16_t port_number = split->port;
  const std::string& host_text = split->host;
  Endpoint e;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&e.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port_number));
    if (inet_pton(AF_INET6, host_text.c_str(), &a->sin6_addr) == 1) {
      e.len = sizeof(sockaddr_in6);
      return e;
    }
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&e.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port_number));
    if (inet_pton(AF_INET, host_text.c_str(), &a->sin_addr) == 1) {
      e.len = sizeof(sockaddr_in);
      return e;
    }
  }
  return MakeError("bad address '" + std::string(address) +
                   "': the host must be an IP address or localhost");
}

}  // namespace

struct ConnectionGate::Impl {
  int listen_fd = -1;
  util::UnixSocketFile socket_file;  // a Unix socket's (then no TCP_NODELAY); removed by Stop()
  int wake_fd = -1;                  // an eventfd: Stop() wakes the accept thread through it
  int port = 0;
  size_t max_connections = 0;
  Handover handover;
  std::thread thread;
  std::mutex mu;  // guards `handed` (the accept thread and open())
  std::vector<Handed> handed;
  std::atomic<uint64_t> refused{0};
  std::once_flag stop_once;

  void Run();
  void OnAccepted(int fd);
  void Refuse(int fd);
  // Forgets the connections gRPC has closed; returns how many are still open. Holds mu.
  size_t PruneLocked();
};

size_t ConnectionGate::Impl::PruneLocked() {
  std::erase_if(handed, [](const Handed& h) { return !StillOpen(h); });
  return handed.size();
}

void ConnectionGate::Impl::Run() {
  std::array<pollfd, 2> fds{pollfd{listen_fd, POLLIN, 0}, pollfd{wake_fd, POLLIN, 0}};
  bool backing_off = false;
  for (;;) {
    // Out of descriptors, the listening socket stays readable: wait on the wake fd alone for
    // a while instead of spinning.
    const int n = backing_off ? poll(&fds[1], 1, 100) : poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno != EINTR) {
      spdlog::error("grpc: poll failed: {}; no longer accepting", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop()
    backing_off = false;
    if (n <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    // Take every connection waiting, then poll again.
    for (;;) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        OnAccepted(fd);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        spdlog::warn("grpc: accept failed: {}; retrying in 100 ms", std::strerror(errno));
        backing_off = true;
      }
      break;  // EAGAIN: nothing more waiting
    }
  }
}

void ConnectionGate::Impl::OnAccepted(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (handed.size() >= max_connections && PruneLocked() >= max_connections) {
      Refuse(fd);
      return;
    }
    handed.push_back(Handed{fd, st.st_dev, st.st_ino});
  }
  // gRPC's own listener sets TCP_NODELAY on what it accepts; a handed-over socket is ours to set:
  // without it, small answers wait for the client's delayed ACK.
  if (socket_file.path().empty()) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  handover(fd);
}

void ConnectionGate::Impl::Refuse(int fd) {
  refused.fetch_add(1, std::memory_order_relaxed);
  spdlog::debug("grpc: refused a connection: {} open", max_connections);
  // Read what the client already sent (its preface), so that the close is a FIN rather than a
  // reset where the client can tell; never wait for more.
  shutdown(fd, SHUT_WR);
  char sink[4096];
  while (recv(fd, sink, sizeof sink, 0) > 0) {
  }
  close(fd);
}

ConnectionGate::ConnectionGate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ConnectionGate::~ConnectionGate() {
  Stop();
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
}

Result<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(
    const std::string& address, size_t max_connections,
    const util::UnixSocketOptions& unix_socket) {
  if (max_connections < 1) return MakeError("grpc: max_connections must be at least 1");
  if (address.starts_with("unix:")) return ListenUnix(address, max_connections, unix_socket);
  auto endpoint = ParseAddress(address);
  if (!endpoint) return MakeError("grpc: " + endpoint.error().message);
  auto impl = std::make_unique<Impl>();
  impl->max_connections = max_connections;
  const auto fail = [&](std::string_view what) {
    const std::string message = "grpc: cannot listen on " + address + ": " + std::string(what) +
                                ": " + std::strerror(errno);
    if (impl->listen_fd >= 0) close(impl->listen_fd);
    return MakeError(message);
  };
  impl->listen_fd =
      socket(endpoint->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (impl->listen_fd < 0) return fail("socket");
  const int one = 1;
  setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(impl->listen_fd, reinterpret_cast<const sockaddr*>(&endpoint->addr), endpoint->len) !=
      0) {
    return fail("bind");
  }
  if (listen(impl->listen_fd, SOMAXCONN) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return fail("getsockname");
  }
  impl->port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) return fail("eventfd");
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(std::move(impl)));
}

Result<std::unique_ptr<ConnectionGate>> ConnectionGate::ListenUnix(
    const std::string& address, size_t max_connections, const util::UnixSocketOptions& options) {
  auto split = util::SplitListenAddress(address);
  if (!split) return MakeError("grpc: " + split.error());
  auto made = util::ListenUnixSocket(split->unix_path, options);
  if (!made) return MakeError("grpc: " + made.error());
  auto impl = std::make_unique<Impl>();
  impl->max_connections = max_connections;
  impl->listen_fd = made->fd;
  impl->socket_file = std::move(made->file);
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) {
    close(impl->listen_fd);
    return MakeError("grpc: cannot listen on " + address + ": eventfd: " + std::strerror(errno));
  }
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(std::move(impl)));
}

void ConnectionGate::Start(Handover handover) {
  impl_->handover = std::move(handover);
  impl_->thread = std::thread([impl = impl_.get()] { impl->Run(); });
}

void ConnectionGate::Stop() {
  std::call_once(impl_->stop_once, [impl = impl_.get()] {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = write(impl->wake_fd, &one, sizeof one);
    if (impl->thread.joinable()) impl->thread.join();
    if (impl->listen_fd >= 0) close(impl->listen_fd);
    impl->listen_fd = -1;
    impl->socket_file.Remove();
  });
}

bool ConnectionGate::Cut(int fd) {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  for (const Handed& h : impl_->handed) {
    if (h.fd == fd && StillOpen(h)) return shutdown(fd, SHUT_RDWR) == 0;
  }
  return false;
}

int ConnectionGate::port() const { return impl_->port; }

size_t ConnectionGate::open() {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->PruneLocked();
}

uint64_t ConnectionGate::refused() const { return impl_->refused.load(std::memory_order_relaxed); }

}  // namespace sluice::server
