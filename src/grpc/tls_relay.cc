// The relay's threads: each owns an epoll set and the connections given to it, and drives each
// connection through four phases on its readiness events, level-triggered:
//   sniff      the first byte must open a TLS handshake record, or the client is plaintext;
//   handshake  SSL_do_handshake until done (then the pair is made and handed to gRPC);
//   relay      four steps, repeated while one makes progress: TLS -> buffer, buffer -> gRPC,
//              gRPC -> buffer, buffer -> TLS; each step that cannot go on says which readiness
//              it waits for, and only that is asked of epoll (so a full buffer reads nothing);
//   drain      gRPC has gone and close_notify is sent: the client's last bytes are read and
//              dropped, so that the close is a FIN and not a reset that could eat the alert.
// The sniff, handshake and drain phases have a deadline (handshake_timeout); deadlines are all
// "now + the same timeout", so a FIFO per thread keeps them in order.
#include "grpc/tls_relay.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "grpc/calls_per_connection.h"
#include "grpc/relay_buffer.h"
#include "grpc/tls_handshake.h"
#include "tls/peer_sans.h"
#include "tls/san_match.h"

namespace sluice::server {
namespace {

constexpr unsigned char kTlsHandshakeRecord = 0x16;

enum class Phase { kSniff, kHandshake, kRelay, kDrain };

struct Conn;

// Which descriptor of a connection an epoll event is for (the event's data.ptr).
struct Side {
  Conn* conn;
};

struct Conn {
  uint64_t id = 0;
  int tcp = -1;
  int plain = -1;    // our end of the pair
  int grpc_fd = -1;  // gRPC's end, once handed over (gRPC's to close)
  SSL* ssl = nullptr;
  HandshakePolicy policy;
  Phase phase = Phase::kSniff;
  uint64_t deadline_seq = 0;  // the live entry of the thread's deadline FIFO
  RelayBuffer to_grpc, to_client;
  bool tls_eof = false;    // the client's direction has ended
  bool plain_eof = false;  // gRPC's direction has ended (or gRPC has gone)
  bool plain_wr_shut = false;
  bool close_sent = false;
  bool dead = false;
  std::atomic<bool> cut{false};
  uint32_t want_tcp = 0, want_plain = 0;  // readiness the last steps wait for
  // Whether a read of that side may find bytes, in this Pump: not after one found none (the next
  // event says when there are more), so a busy connection costs no read that must fail.
  bool try_tls_read = true, try_plain_read = true;
  uint32_t tcp_mask = 0, plain_mask = 0;  // readiness asked of epoll
  Side tcp_side{this}, plain_side{this};
};

// A handed-over connection, by gRPC's descriptor number; the socket's identity tells a reused
// number apart (as in connection_gate.cc).
struct Registered {
  dev_t dev;
  ino_t ino;
  Conn* conn;
  PeerIdentity identity;
};

bool SameSocket(int fd, const Registered& r) {
  struct stat st {};
  return fstat(fd, &st) == 0 && st.st_dev == r.dev && st.st_ino == r.ino;
}

// Reads and drops what the client already sent, then closes: a FIN rather than a reset.
void CloseQuietly(int fd) {
  shutdown(fd, SHUT_WR);
  char sink[4096];
  while (recv(fd, sink, sizeof sink, 0) > 0) {
  }
  close(fd);
}

// A connected TCP pair over loopback, through `listener` (the thread's own, blocking): [0] ours,
// [1] gRPC's, both non-blocking with TCP_NODELAY. Another local process's connection found in
// the listener's queue before ours is closed.
bool LoopbackPair(int listener, int pair[2]) {
  sockaddr_in at{};
  socklen_t len = sizeof at;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) != 0) return false;
  const int ours = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ours < 0) return false;
  sockaddr_in mine{};
  len = sizeof mine;
  if (connect(ours, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      getsockname(ours, reinterpret_cast<sockaddr*>(&mine), &len) != 0) {
    close(ours);
    return false;
  }
  for (;;) {
    sockaddr_in peer{};
    len = sizeof peer;
    const int theirs =
        accept4(listener, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (theirs < 0 && errno == EINTR) continue;
    if (theirs < 0) {
      close(ours);
      return false;
    }
    if (peer.sin_port != mine.sin_port || peer.sin_addr.s_addr != mine.sin_addr.s_addr) {
      close(theirs);
      continue;
    }
    const int one = 1;
    setsockopt(ours, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(theirs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) | O_NONBLOCK);
    pair[0] = ours;
    pair[1] = theirs;
    return true;
  }
}

// A listener on a free 127.0.0.1 port, for LoopbackPair.
int LoopbackListener() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Shared;

class Worker {
 public:
  explicit Worker(Shared* relay) : relay_(relay) {}
  Result<void> Open();
  void Run();
  void Give(int tcp_fd);  // any thread
  void Halt();            // any thread: the loop returns
  void CloseAll();        // after the thread has ended
  ~Worker();

  std::thread thread;

 private:
  bool TakeInbox();
  void Pump(Conn& c, uint32_t tcp_events, uint32_t plain_events);
  void Sniff(Conn& c);
  void Handshake(Conn& c);
  void Established(Conn& c);
  void Relay(Conn& c);
  int TlsToBuffer(Conn& c);
  int BufferToGrpc(Conn& c);
  int GrpcToBuffer(Conn& c);
  int BufferToTls(Conn& c);
  void EndRelay(Conn& c);
  void GrpcGone(Conn& c);
  void Drain(Conn& c);
  void Fail(Conn& c, tls::HandshakeFailure reason);
  void Close(Conn& c);
  void Unregister(Conn& c);
  void SetDeadline(Conn& c);
  void SetInterest(Conn& c);
  int Timeout() const;
  void Expire();

  Shared* relay_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int pair_listener_ = -1;  // with tcp_pair
  std::mutex inbox_mu_;
  std::vector<int> inbox_;
  bool halted_ = false;
  // The thread's own:
  uint64_t next_id_ = 1;
  uint64_t next_seq_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::deque<std::pair<Timestamp, std::pair<uint64_t, uint64_t>>> deadlines_;  // id, seq
  std::vector<uint64_t> dead_;
};

// What the relay's threads and its public side share.
struct Shared {
  TlsRelayOptions options;
  TlsRelay::Handover handover;
  std::unique_ptr<MonotonicClock> own_clock;
  const Clock* clock = nullptr;
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<size_t> next_worker{0};
  std::atomic<size_t> open{0};
  std::mutex handover_mu;  // held while handing over, so StopHandover() waits for one going on
  bool handing_over = true;
  mutable std::mutex registry_mu;
  std::unordered_map<int, Registered> registry;
  std::once_flag stop_once;
};

Result<void> Worker::Open() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return MakeError(std::string("grpc tls: cannot make an epoll set: ") + std::strerror(errno));
  }
  if (relay_->options.tcp_pair && (pair_listener_ = LoopbackListener()) < 0) {
    return MakeError(std::string("grpc tls: cannot listen on loopback: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    return MakeError(std::string("grpc tls: epoll_ctl: ") + std::strerror(errno));
  }
  return {};
}

Worker::~Worker() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (pair_listener_ >= 0) close(pair_listener_);
}

void Worker::Give(int tcp_fd) {
  {
    const std::lock_guard<std::mutex> lock(inbox_mu_);
    if (!halted_) {
      inbox_.push_back(tcp_fd);
      tcp_fd = -1;
    }
  }
  if (tcp_fd >= 0) {
    relay_->open.fetch_sub(1, std::memory_order_relaxed);
    close(tcp_fd);
    return;
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = write(wake_fd_, &one, sizeof one);
}

void Worker::Halt() {
  {
    const std::lock_guard<std::mutex> lock(inbox_mu_);
    halted_ = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = write(wake_fd_, &one, sizeof one);
}

void Worker::Run() {
  std::array<epoll_event, 64> events{};
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), Timeout());
    if (n < 0 && errno != EINTR) {
      spdlog::error("grpc tls: epoll_wait failed: {}; relay thread ends", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {
        if (!TakeInbox()) return;
        continue;
      }
      const Side* side = static_cast<Side*>(events[i].data.ptr);
      Conn* c = side->conn;
      const bool tcp = side == &c->tcp_side;
      if (!c->dead) Pump(*c, tcp ? events[i].events : 0, tcp ? 0 : events[i].events);
    }
    Expire();
    for (const uint64_t id : dead_) conns_.erase(id);
    dead_.clear();
  }
}

bool Worker::TakeInbox() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = read(wake_fd_, &count, sizeof count);
  std::vector<int> taken;
  {
    const std::lock_guard<std::mutex> lock(inbox_mu_);
    if (halted_) return false;
    taken.swap(inbox_);
  }
  for (const int fd : taken) {
    auto conn = std::make_unique<Conn>();
    Conn& c = *conn;
    c.id = next_id_++;
    c.tcp = fd;
    c.policy.require_client_cert = relay_->options.require_client_cert;
    c.policy.client_sans = &relay_->options.client_sans;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &c.tcp_side;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      relay_->open.fetch_sub(1, std::memory_order_relaxed);
      close(fd);
      continue;
    }
    c.tcp_mask = c.want_tcp = EPOLLIN;
    SetDeadline(c);
    conns_.emplace(c.id, std::move(conn));
  }
  return true;
}

void Worker::Pump(Conn& c, uint32_t tcp_events, uint32_t plain_events) {
  if (c.cut.load(std::memory_order_acquire)) return Close(c);
  // The client's connection is gone both ways (a reset, or its FIN after ours): nothing more can
  // be sent, and epoll would report it again at once for as long as it stays open.
  if (c.phase == Phase::kRelay && (tcp_events & (EPOLLHUP | EPOLLERR)) != 0) return Close(c);
  // A side epoll was not asked to watch for bytes may have some: try it.
  c.try_tls_read = tcp_events != 0 || (c.tcp_mask & EPOLLIN) == 0;
  c.try_plain_read = plain_events != 0 || (c.plain_mask & EPOLLIN) == 0;
  switch (c.phase) {
    case Phase::kSniff:
      Sniff(c);
      break;
    case Phase::kHandshake:
      Handshake(c);
      break;
    case Phase::kRelay:
      Relay(c);
      break;
    case Phase::kDrain:
      Drain(c);
      break;
  }
  if (!c.dead) SetInterest(c);
}

void Worker::Sniff(Conn& c) {
  unsigned char first = 0;
  const ssize_t n = recv(c.tcp, &first, 1, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return Fail(c, tls::HandshakeFailure::kClosed);
  if (first != kTlsHandshakeRecord) return Fail(c, tls::HandshakeFailure::kPlaintext);
  std::shared_ptr<ssl_ctx_st> ctx = relay_->options.context();
  if (!ctx) return Fail(c, tls::HandshakeFailure::kOther);
  c.ssl = NewServerSsl(ctx.get(), c.tcp, relay_->options.min_version, &c.policy);
  if (c.ssl == nullptr) return Fail(c, tls::HandshakeFailure::kOther);
  c.phase = Phase::kHandshake;
  Handshake(c);
}

void Worker::Handshake(Conn& c) {
  ERR_clear_error();
  const int r = SSL_do_handshake(c.ssl);
  if (r == 1) return Established(c);
  const int error = SSL_get_error(c.ssl, r);
  if (error == SSL_ERROR_WANT_READ) {
    c.want_tcp = EPOLLIN;
  } else if (error == SSL_ERROR_WANT_WRITE) {
    c.want_tcp = EPOLLOUT;
  } else {
    Fail(c, FailureOf(c.ssl, error, c.policy));
  }
}

void Worker::Established(Conn& c) {
  using tls::HandshakeFailure;
  if (!NegotiatedH2(c.ssl)) return Fail(c, HandshakeFailure::kOther);  // no h2: not gRPC
  const bool sent = SSL_get0_peer_certificate(c.ssl) != nullptr;
  const bool verified = sent && SSL_get_verify_result(c.ssl) == X509_V_OK;
  PeerIdentity identity = tls::VerifiedPeerSans(c.ssl);
  // Checked again here: a resumed session skips the verification callback.
  if (c.policy.require_client_cert && !verified) {
    return Fail(c, sent ? HandshakeFailure::kBadCertificate : HandshakeFailure::kNoCertificate);
  }
  const auto& patterns = relay_->options.client_sans;
  if (!patterns.empty() && !tls::SanAllowed(patterns, identity)) {
    return Fail(c, HandshakeFailure::kSanNotAllowed);
  }
  int pair[2];
  if (pair_listener_ >= 0
          ? !LoopbackPair(pair_listener_, pair)
          : socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
    spdlog::warn("grpc tls: socketpair failed: {}; connection closed", std::strerror(errno));
    return Close(c);
  }
  struct stat st {};
  fstat(pair[1], &st);
  c.plain = pair[0];
  epoll_event ev{};
  ev.events = 0;
  ev.data.ptr = &c.plain_side;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.plain, &ev);
  c.to_grpc.Allocate(relay_->options.buffer_bytes);
  c.to_client.Allocate(relay_->options.buffer_bytes);
  c.phase = Phase::kRelay;
  c.try_tls_read = c.try_plain_read = true;
  ++c.deadline_seq;  // no deadline while relaying
  {
    const std::lock_guard<std::mutex> lock(relay_->handover_mu);
    if (!relay_->handing_over) {
      close(pair[1]);
      return Close(c);
    }
    {
      // Registered before gRPC has the descriptor: its first call may ask at once.
      const std::lock_guard<std::mutex> reg(relay_->registry_mu);
      relay_->registry[pair[1]] = Registered{st.st_dev, st.st_ino, &c, std::move(identity)};
    }
    c.grpc_fd = pair[1];
    relay_->handover(pair[1]);
  }
  Relay(c);
}

void Worker::Relay(Conn& c) {
  for (;;) {
    c.want_tcp = c.want_plain = 0;
    int progress = 0;
    for (const auto step : {&Worker::TlsToBuffer, &Worker::BufferToGrpc, &Worker::GrpcToBuffer,
                            &Worker::BufferToTls}) {
      const int r = (this->*step)(c);
      if (r < 0) return Close(c);
      progress += r;
    }
    if (progress == 0) break;
  }
  if (c.close_sent) EndRelay(c);
}

// 1: progress; 0: waits (want_* says for what) or has nothing to do; -1: the connection failed.
int Worker::TlsToBuffer(Conn& c) {
  // Every record OpenSSL holds or the socket has, so that one send() gives gRPC them all (a
  // gRPC client writes a record per flush: one send per record would double the syscalls).
  int progress = 0;
  while (!c.tls_eof && !c.plain_eof && c.to_grpc.room() > 0) {
    if (!c.try_tls_read && SSL_has_pending(c.ssl) == 0) {
      c.want_tcp |= EPOLLIN;
      return progress;
    }
    size_t n = 0;
    ERR_clear_error();
    const int r = SSL_read_ex(c.ssl, c.to_grpc.tail(), c.to_grpc.room(), &n);
    if (r == 1) {
      c.to_grpc.Commit(n);
      // Read-ahead took what the socket held: with nothing left in OpenSSL, another read would
      // fail; epoll (level-triggered) says if more has come.
      if (SSL_has_pending(c.ssl) == 0) c.try_tls_read = false;
      progress = 1;
      continue;
    }
    switch (SSL_get_error(c.ssl, r)) {
      case SSL_ERROR_WANT_READ:
        c.want_tcp |= EPOLLIN;
        c.try_tls_read = false;
        return progress;
      case SSL_ERROR_WANT_WRITE:
        c.want_tcp |= EPOLLOUT;
        return progress;
      case SSL_ERROR_ZERO_RETURN:  // close_notify, or a FIN (SSL_OP_IGNORE_UNEXPECTED_EOF)
        c.tls_eof = true;
        return 1;
      default:
        return -1;
    }
  }
  return progress;
}

int Worker::BufferToGrpc(Conn& c) {
  if (c.to_grpc.empty()) {
    if (!c.tls_eof || c.plain_wr_shut || c.plain_eof) return 0;
    shutdown(c.plain, SHUT_WR);  // the client's half-close, passed on
    c.plain_wr_shut = true;
    return 1;
  }
  const ssize_t n = send(c.plain, c.to_grpc.head(), c.to_grpc.size(), MSG_NOSIGNAL);
  if (n > 0) {
    c.to_grpc.Consume(static_cast<size_t>(n));
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    c.want_plain |= EPOLLOUT;
    return 0;
  }
  GrpcGone(c);
  return 1;
}

int Worker::GrpcToBuffer(Conn& c) {
  if (c.plain_eof || c.to_client.room() == 0) return 0;
  if (!c.try_plain_read) {
    c.want_plain |= EPOLLIN;
    return 0;
  }
  const ssize_t n = recv(c.plain, c.to_client.tail(), c.to_client.room(), 0);
  if (n > 0) {
    // A short read emptied the socket: as above, epoll says when there is more.
    if (static_cast<size_t>(n) < c.to_client.room()) c.try_plain_read = false;
    c.to_client.Commit(static_cast<size_t>(n));
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    c.want_plain |= EPOLLIN;
    c.try_plain_read = false;
    return 0;
  }
  GrpcGone(c);  // gRPC closed the connection (it never half-closes)
  return 1;
}

// gRPC's end is closed: ours goes too (a closed peer would be reported by epoll at once, again
// and again, while the client's side is still flushed), and what was meant for gRPC is dropped.
void Worker::GrpcGone(Conn& c) {
  c.plain_eof = true;
  c.to_grpc.Clear();
  Unregister(c);
  close(c.plain);
  c.plain = -1;
}

int Worker::BufferToTls(Conn& c) {
  if (c.to_client.empty()) {
    if (!c.plain_eof || c.close_sent) return 0;
    // Best effort: a close_notify that does not fit the socket now is not waited for.
    ERR_clear_error();
    SSL_shutdown(c.ssl);
    shutdown(c.tcp, SHUT_WR);
    c.close_sent = true;
    return 0;
  }
  size_t n = 0;
  ERR_clear_error();
  const int r = SSL_write_ex(c.ssl, c.to_client.head(), c.to_client.size(), &n);
  if (r == 1) {
    c.to_client.Consume(n);
    return 1;
  }
  switch (SSL_get_error(c.ssl, r)) {
    case SSL_ERROR_WANT_WRITE:
      c.want_tcp |= EPOLLOUT;
      return 0;
    case SSL_ERROR_WANT_READ:
      c.want_tcp |= EPOLLIN;
      return 0;
    default:
      return -1;
  }
}

// gRPC's direction is over and close_notify sent: done if the client's is too, else drain.
void Worker::EndRelay(Conn& c) {
  if (c.tls_eof) return Close(c);
  c.phase = Phase::kDrain;
  c.want_tcp = EPOLLIN;
  SetDeadline(c);
}

void Worker::Drain(Conn& c) {
  char sink[4096];
  for (;;) {
    const ssize_t n = recv(c.tcp, sink, sizeof sink, 0);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    return Close(c);
  }
}

void Worker::Fail(Conn& c, tls::HandshakeFailure reason) {
  spdlog::debug("grpc tls: handshake failed: {}", tls::HandshakeFailureName(reason));
  if (relay_->options.on_handshake_error) relay_->options.on_handshake_error(reason);
  if (c.ssl != nullptr) {
    SSL_free(c.ssl);  // OpenSSL has sent its alert, if any
    c.ssl = nullptr;
  }
  const int fd = c.tcp;
  c.tcp = -1;
  Close(c);
  CloseQuietly(fd);
}

void Worker::Unregister(Conn& c) {
  if (c.grpc_fd < 0) return;
  const std::lock_guard<std::mutex> lock(relay_->registry_mu);
  const auto it = relay_->registry.find(c.grpc_fd);
  if (it != relay_->registry.end() && it->second.conn == &c) relay_->registry.erase(it);
  c.grpc_fd = -1;
}

void Worker::Close(Conn& c) {
  if (c.dead) return;
  c.dead = true;
  Unregister(c);  // before the descriptors go: Cut() uses them under the registry's lock
  if (c.ssl != nullptr) SSL_free(c.ssl);
  c.ssl = nullptr;
  if (c.plain >= 0) close(c.plain);
  if (c.tcp >= 0) close(c.tcp);  // the gate sees the connection gone
  c.plain = c.tcp = -1;
  relay_->open.fetch_sub(1, std::memory_order_relaxed);
  dead_.push_back(c.id);
}

void Worker::SetDeadline(Conn& c) {
  c.deadline_seq = next_seq_++;
  deadlines_.emplace_back(relay_->clock->Now() + relay_->options.handshake_timeout,
                          std::pair{c.id, c.deadline_seq});
}

void Worker::SetInterest(Conn& c) {
  const auto apply = [&](int fd, uint32_t want, uint32_t& mask, Side* side) {
    if (fd < 0 || want == mask) return;
    epoll_event ev{};
    ev.events = want;
    ev.data.ptr = side;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) == 0) mask = want;
  };
  apply(c.tcp, c.want_tcp, c.tcp_mask, &c.tcp_side);
  apply(c.plain, c.want_plain, c.plain_mask, &c.plain_side);
}

int Worker::Timeout() const {
  if (deadlines_.empty()) return -1;
  const Duration left = deadlines_.front().first - relay_->clock->Now();
  if (left <= Duration(0)) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

void Worker::Expire() {
  const Timestamp now = relay_->clock->Now();
  while (!deadlines_.empty() && deadlines_.front().first <= now) {
    const auto [id, seq] = deadlines_.front().second;
    deadlines_.pop_front();
    const auto it = conns_.find(id);
    if (it == conns_.end() || it->second->dead || it->second->deadline_seq != seq) continue;
    Conn& c = *it->second;
    if (c.phase == Phase::kDrain) {
      Close(c);
    } else {
      Fail(c, tls::HandshakeFailure::kTimeout);
    }
  }
}

void Worker::CloseAll() {
  for (auto& [id, c] : conns_) Close(*c);
  conns_.clear();
  for (const int fd : inbox_) {
    relay_->open.fetch_sub(1, std::memory_order_relaxed);
    close(fd);
  }
  inbox_.clear();
}

}  // namespace

struct TlsRelay::Impl : Shared {};

TlsRelay::TlsRelay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TlsRelay::~TlsRelay() { Stop(); }

Result<std::unique_ptr<TlsRelay>> TlsRelay::Start(TlsRelayOptions options, Handover handover) {
  if (!options.context) return MakeError("grpc tls: no certificate context");
  if (options.min_version != 12 && options.min_version != 13) {
    return MakeError("grpc tls: the minimum TLS version must be 1.2 or 1.3");
  }
  if (options.threads < 1 || options.threads > 64) {
    return MakeError("grpc tls: relay threads must be 1..64");
  }
  if (options.handshake_timeout.count() < 1) {
    return MakeError("grpc tls: the handshake timeout must be at least 1 ms");
  }
  if (options.buffer_bytes < 4096) return MakeError("grpc tls: buffers must be at least 4 KiB");
  if (!options.client_sans.empty() && !options.require_client_cert) {
    return MakeError(
        "grpc tls: client SAN patterns need client certificates (a client CA) to check");
  }
  for (const std::string& p : options.client_sans) {
    if (auto ok = tls::ValidateSanPattern(p); !ok)
      return MakeError("grpc tls: " + ok.error().message);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->handover = std::move(handover);
  if (impl->options.clock == nullptr) impl->own_clock = std::make_unique<MonotonicClock>();
  impl->clock = impl->options.clock ? impl->options.clock : impl->own_clock.get();
  for (int i = 0; i < impl->options.threads; ++i) {
    auto worker = std::make_unique<Worker>(impl.get());
    if (auto ok = worker->Open(); !ok) return std::unexpected(ok.error());
    impl->workers.push_back(std::move(worker));
  }
  for (auto& w : impl->workers) {
    w->thread = std::thread([w = w.get()] {
      // OpenSSL writes with write(), not send(MSG_NOSIGNAL): a client gone mid-write must be an
      // error code on this thread, not a SIGPIPE for the process (sluiced ignores it; a library
      // cannot count on that).
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      pthread_setname_np(pthread_self(), "grpc-tls-relay");  // top -H, perf
      w->Run();
    });
  }
  return std::unique_ptr<TlsRelay>(new TlsRelay(std::move(impl)));
}

void TlsRelay::Adopt(int tcp_fd) {
  impl_->open.fetch_add(1, std::memory_order_relaxed);
  const size_t i = impl_->next_worker.fetch_add(1, std::memory_order_relaxed);
  impl_->workers[i % impl_->workers.size()]->Give(tcp_fd);
}

bool TlsRelay::Cut(int grpc_fd) {
  const std::lock_guard<std::mutex> lock(impl_->registry_mu);
  const auto it = impl_->registry.find(grpc_fd);
  if (it == impl_->registry.end() || !SameSocket(grpc_fd, it->second)) return false;
  // The descriptors are still the connection's: Close() unregisters under this lock first.
  it->second.conn->cut.store(true, std::memory_order_release);
  shutdown(it->second.conn->tcp, SHUT_RDWR);  // wakes the relay thread, which closes it
  shutdown(grpc_fd, SHUT_RDWR);               // gRPC ends the connection's calls
  return true;
}

std::optional<PeerIdentity> TlsRelay::Identity(std::string_view peer) const {
  const int fd = ConnectionOfPeer(peer);
  if (fd < 0) return std::nullopt;
  const std::lock_guard<std::mutex> lock(impl_->registry_mu);
  const auto it = impl_->registry.find(fd);
  if (it == impl_->registry.end() || !SameSocket(fd, it->second)) return std::nullopt;
  return it->second.identity;
}

void TlsRelay::StopHandover() {
  const std::lock_guard<std::mutex> lock(impl_->handover_mu);
  impl_->handing_over = false;
}

void TlsRelay::Stop() {
  std::call_once(impl_->stop_once, [impl = impl_.get()] {
    {
      const std::lock_guard<std::mutex> lock(impl->handover_mu);
      impl->handing_over = false;
    }
    for (auto& w : impl->workers) w->Halt();
    for (auto& w : impl->workers) {
      if (w->thread.joinable()) w->thread.join();
    }
    for (auto& w : impl->workers) w->CloseAll();
  });
}

size_t TlsRelay::connections() const { return impl_->open.load(std::memory_order_relaxed); }

}  // namespace sluice::server
