#include "http/http_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <exception>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "http/http_request_parser.h"
#include "http/http_response.h"
#include "tls/peer_sans.h"
#include "util/listen_address.h"
#include "util/unix_socket.h"

namespace sluice::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
// The one socket type of every connection, TCP or Unix (--http unix:/path): a generic stream
// socket, so that one code path serves both.
using Protocol = net::generic::stream_protocol;
using Socket = Protocol::socket;
using Acceptor = net::basic_socket_acceptor<Protocol>;
// TLS over that socket, which the connection owns: the stream holds a reference to it.
using TlsStream = net::ssl::stream<Socket&>;
using error_code = boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

// After an error reply the client may still be sending (a 2 MiB body we refused): closing with
// unread data makes the kernel send a reset, which can destroy our reply before the client
// reads it. So we stop sending, read and discard for a short while, then close.
constexpr std::chrono::milliseconds kLingerTime{1000};

// A refused connection is lingered over the same way, so that its 503 arrives rather than a
// reset; at most this many at once (beyond, under a flood, they are closed at once).
constexpr size_t kMaxLingeringRefusals = 256;

// A connection's receive buffer starts at this size and grows (up to the request limits) only
// for large requests.
constexpr size_t kInitialBufferBytes = 8192;

// What an address names: a TCP endpoint, or a Unix socket's path.
struct Endpoint {
  tcp::endpoint ip;
  std::string unix_path;  // non-empty: a Unix socket
};

Result<Endpoint> ParseEndpoint(std::string_view address) {
  auto split = util::SplitListenAddress(address);
  if (!split) return MakeError(split.error());
  if (split->is_unix()) return Endpoint{.ip = {}, .unix_path = split->unix_path};
  boost::system::error_code ec;
  const net::ip::address ip = net::ip::make_address(split->host, ec);
  if (ec) {
    return MakeError("bad address '" + std::string(address) +
                     "': the host must be an IP address or localhost");
  }
  return Endpoint{.ip = tcp::endpoint(ip, split->port), .unix_path = {}};
}

std::string FormatEndpoint(const tcp::endpoint& e) {
  const std::string ip = e.address().to_string();
  return (e.address().is_v6() ? "[" + ip + "]" : ip) + ":" + std::to_string(e.port());
}

// The peer's IP address as text; an IPv4 client of a dual-stack listener ("::ffff:10.0.0.1")
// as the IPv4 address it is, so that IPv4 CIDRs match it; "unix" for a client of a Unix
// socket (HttpRequestView::peer). Empty if the socket has none.
std::string PeerAddress(const Socket& socket) {
  error_code ec;
  const Protocol::endpoint generic = socket.remote_endpoint(ec);
  if (ec) return {};
  if (generic.protocol().family() == AF_UNIX) return std::string(kUnixPeer);
  tcp::endpoint peer;
  if (generic.size() > peer.capacity()) return {};
  std::memcpy(peer.data(), generic.data(), generic.size());
  peer.resize(generic.size());
  net::ip::address ip = peer.address();
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) {
    ip = net::ip::make_address_v4(net::ip::v4_mapped, ip.to_v6());
  }
  return ip.to_string();
}

class Connection;

// One thread and its io_context. `connections` (the open ones) is touched only on that thread.
// Deadlines are not one timer per connection: a periodic sweep closes the connections whose
// deadline has passed, so that a request costs a store to a field instead of two timer updates.
struct Worker {
  size_t index = 0;  // in HttpServer::Impl::workers
  std::unordered_set<Connection*> connections;
  net::io_context ioc{1};
  std::optional<net::steady_timer> sweep;  // destroyed before ioc
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  std::thread thread;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<size_t> active{0};
  std::atomic<size_t> lingering_refusals{0};
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::vector<std::unique_ptr<Worker>> workers;  // workers[0] also runs the acceptor
  std::optional<Acceptor> acceptor;              // destroyed before the workers
  std::optional<net::steady_timer> accept_retry;
  tcp::endpoint bound;               // a TCP listener's
  util::UnixSocketFile socket_file;  // a Unix listener's: removed by Stop()
  size_t next_worker = 0;
  std::chrono::milliseconds sweep_every{100};

  void Accept();
  void OnAccept(const error_code& ec, Socket socket, Worker* worker);
  void PlaceAtCap(size_t home, std::shared_ptr<Socket> socket, size_t step);
  void Refuse(Socket socket);
  void Sweep(Worker& worker);
  void ReportTlsFailure(tls::HandshakeFailure reason) const {
    if (options.on_tls_failure) options.on_tls_failure(reason);
  }
  Result<void> Listen(const Endpoint& endpoint);
};

namespace {

class Connection final : public std::enable_shared_from_this<Connection>, public HttpDeferral {
 public:
  Connection(HttpServer::Impl& server, Worker& worker, Socket socket)
      : server_(server),
        worker_(worker),
        socket_(std::move(socket)),
        parser_({server.options.max_header_bytes, server.options.max_body_bytes}) {
    server_.active.fetch_add(1, std::memory_order_relaxed);
    if (server_.options.tls) {
      // Asio's context wrapper takes a reference of its own and drops it when it goes, once
      // the stream's SSL holds one: the connection keeps the context it started with.
      const std::shared_ptr<SSL_CTX> ctx = server_.options.tls->Current();
      SSL_CTX_up_ref(ctx.get());
      net::ssl::context wrapper(ctx.get());
      tls_.emplace(socket_, wrapper);
    }
  }
  // May run on another thread than the worker's (the last owner can be a deferred reply's
  // callback): touches nothing but the atomic count. Close() took it out of the worker's set.
  ~Connection() { server_.active.fetch_sub(1, std::memory_order_relaxed); }

  // On the worker's thread.
  void Start() {
    worker_.connections.insert(this);
    if (server_.stopping.load()) return Close();
    peer_ = PeerAddress(socket_);
    if (peer_ != kUnixPeer) {
      error_code ec;
      socket_.set_option(tcp::no_delay(true), ec);  // each response is one write: send it now
    }
    if (tls_) return Handshake();
    WaitForRequest();
  }

  // On the worker's thread, when the server stops: an idle connection (waiting for a request
  // that has not begun) is closed now; any other finishes its request and closes after.
  // A held reply (HttpReply::send_at) goes out now: its request was admitted, and waiting for
  // its time could outlast the shutdown grace (a shaper's max_delay may be long).
  void OnStop() {
    stopping_ = true;
    if (handshaking_) return Close();
    if (holding_) {
      hold_->cancel();  // the timer's handler sends it
      return;
    }
    if (reading_ && HttpRequestParser::Idle(Received())) Close();
  }

  // On the worker's thread, from the sweep.
  bool Expired(SteadyClock::time_point now) const { return now >= deadline_; }

  // On the worker's thread, from the sweep: the deadline has passed.
  void OnDeadline() {
    if (handshaking_) server_.ReportTlsFailure(tls::HandshakeFailure::kTimeout);
    Close();
  }

  // On the worker's thread: how readily this connection gives its slot to a new client at the
  // connection bound. kBusy (a request in the handler, a response being written) never does.
  // A connection that has not yet sent a whole request -- in its TLS handshake, silent, or
  // sending one slowly -- gives its slot before a client that has been answered, oldest first:
  // a slowloris or a handshake flood sheds itself, not the clients it crowds (a flood that
  // reconnects as it is shed would otherwise always be younger than a keep-alive client's
  // last request). Answered clients waiting between requests compete by how long they waited.
  enum class Shed { kBusy, kWaiting, kUnproven, kClosing };
  Shed ShedRank() const {
    if (closed_) return Shed::kBusy;
    if (lingering_) return Shed::kClosing;
    if (handshaking_ || (reading_ && !served_)) return Shed::kUnproven;
    return reading_ ? Shed::kWaiting : Shed::kBusy;
  }
  // Within a rank, the earliest goes first: an unproven connection's since it came.
  SteadyClock::time_point shed_since() const { return served_ ? waiting_since_ : opened_at_; }

  void Close() {
    if (closed_) return;
    closed_ = true;
    handshaking_ = false;  // a handshake cut here (deadline, shedding, stop) reports itself
    if (hold_) hold_->cancel();
    deadline_ = SteadyClock::time_point::max();
    worker_.connections.erase(this);
    error_code ec;
    socket_.shutdown(Socket::shutdown_both, ec);
    socket_.close(ec);
  }

  // HttpDeferral: the handler answers later, from any thread. The callback hands its hold on
  // the connection to the reply it posts, so the connection is released on its own thread.
  HttpReplyCallback Defer() override {
    return [self = shared_from_this()](HttpReply reply) mutable {
      net::io_context& ioc = self->worker_.ioc;
      net::post(ioc, [self = std::move(self), reply = std::move(reply)]() mutable {
        if (self->closed_) return;
        self->Respond(std::move(reply));
      });
    };
  }

 private:
  std::string_view Received() const { return {buffer_.data() + begin_, end_ - begin_}; }

  void Arm(std::chrono::milliseconds timeout) { deadline_ = SteadyClock::now() + timeout; }

  void Handshake() {
    handshaking_ = true;
    Arm(server_.options.tls->settings().handshake_timeout);
    waiting_since_ = SteadyClock::now();
    tls_->async_handshake(net::ssl::stream_base::server,
                          [self = shared_from_this()](const error_code& ec) {
                            if (!self->handshaking_ || self->closed_) return;  // cut: counted
                            self->handshaking_ = false;
                            if (ec) {
                              self->server_.ReportTlsFailure(self->Classify(ec));
                              return self->Close();
                            }
                            self->Identify();
                            self->WaitForRequest();
                          });
  }

  tls::HandshakeFailure Classify(const error_code& ec) {
    if (ec.category() == net::error::get_ssl_category()) {
      const auto code = static_cast<unsigned long>(static_cast<unsigned int>(ec.value()));
      return tls::ClassifyHandshakeError(code, tls_->native_handle());
    }
    // The client closed (or reset) before finishing: a TCP probe, a client that gave up.
    return tls::HandshakeFailure::kClosed;
  }

  void Identify() {
    SSL* ssl = tls_->native_handle();
    peer_verified_ =
        SSL_get0_peer_certificate(ssl) != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
    peer_sans_ = tls::VerifiedPeerSans(ssl);
  }

  // A client CA is set and this request needs a verified client certificate it lacks.
  bool NeedsClientCert(const ParsedRequest& req) const {
    using ClientCert = HttpServerOptions::ClientCert;
    const ClientCert policy = server_.options.client_cert;
    if (!tls_ || policy == ClientCert::kNone || peer_verified_) return false;
    if (policy == ClientCert::kEverywhere) return true;
    const std::string_view path = req.target.substr(0, req.target.find('?'));
    const bool probe = (req.method == "GET" || req.method == "HEAD") &&
                       (path == "/healthz" || path == "/readyz" || path == "/metrics");
    return !probe;
  }

  // A new request's clock starts now; it may already be in the buffer (pipelined).
  void WaitForRequest() {
    Arm(server_.options.request_timeout);
    waiting_since_ = SteadyClock::now();
    head_request_ = false;  // a malformed request's 400 has its body
    Process();
  }

  void Process() {
    const ParseOutcome parsed = parser_.Parse(Received());
    switch (parsed.status) {
      case ParseStatus::kComplete:
        return Handle(parsed);
      case ParseStatus::kIncomplete:
        return Read();
      case ParseStatus::kBadRequest:
        return ReplyAndClose(
            ErrorReply(400, "malformed HTTP request: " + std::string(parsed.error)));
      case ParseStatus::kHeadersTooLarge:
        return ReplyAndClose(HeadersTooLarge());
      case ParseStatus::kBodyTooLarge:
        return ReplyAndClose(BodyTooLarge());
    }
  }

  HttpReply BodyTooLarge() const {
    return ErrorReply(413, "the body is over the limit of " +
                               std::to_string(server_.options.max_body_bytes) + " bytes");
  }
  HttpReply HeadersTooLarge() const {
    return ErrorReply(431, "the request headers are over the limit of " +
                               std::to_string(server_.options.max_header_bytes) + " bytes");
  }

  void Read() {
    if (!MakeRoom()) return ReplyAndClose(BodyTooLarge());
    reading_ = true;
    auto done = [self = shared_from_this()](const error_code& ec, size_t n) {
      self->reading_ = false;
      if (ec || self->closed_) return self->Close();  // end of stream, reset, deadline
      self->end_ += n;
      self->Process();
    };
    const auto into = net::buffer(buffer_.data() + end_, buffer_.size() - end_);
    if (tls_) return tls_->async_read_some(into, std::move(done));
    socket_.async_read_some(into, std::move(done));
  }

  // Space after end_ to read into: moves the unconsumed bytes to the front, or grows the
  // buffer. False when a request would need more than the limits allow (the parser refuses
  // first: a chunked body's framing and trailers have limits of their own, counted here).
  bool MakeRoom() {
    if (buffer_.empty()) buffer_.resize(kInitialBufferBytes);
    if (end_ < buffer_.size()) return true;
    if (begin_ > 0) {
      std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(begin_),
                buffer_.begin() + static_cast<std::ptrdiff_t>(end_), buffer_.begin());
      end_ -= begin_;
      begin_ = 0;
      return true;
    }
    const size_t cap = 2 * server_.options.max_header_bytes + server_.options.max_body_bytes +
                       HttpParseLimits{}.max_chunk_framing_bytes + kInitialBufferBytes;
    if (buffer_.size() >= cap) return false;
    buffer_.resize(std::min(cap, buffer_.size() * 2));
    return true;
  }

  void Handle(const ParseOutcome& parsed) {
    served_ = true;
    const ParsedRequest& req = parsed.request;
    consumed_ = parsed.consumed;
    version_ = req.version;
    keep_alive_ = req.keep_alive;
    head_request_ = req.method == "HEAD";
    if (NeedsClientCert(req)) {
      return Respond(ErrorReply(403, "a verified TLS client certificate is required"));
    }
    const HttpRequestView view{.method = req.method,
                               .target = req.target,
                               .authorization = req.authorization,
                               .body = req.body,
                               .deferral = this,
                               .header_lines = req.header_lines,
                               .peer = peer_,
                               .tls = tls_.has_value(),
                               .peer_verified = peer_verified_,
                               .peer_sans = peer_sans_};
    std::optional<HttpReply> handled = CallHandler(view);
    if (!handled) return ReplyAndClose(ErrorReply(500, "internal error"));
    if (handled->deferred) {
      // Defer()'s callback calls Respond. The request is in: its clock no longer runs.
      deadline_ = SteadyClock::time_point::max();
      return;
    }
    Respond(std::move(*handled));
  }

  // A handler that throws (out of memory, a bug) fails its request, not the process and every
  // other connection with it; the connection is closed, as its state is unknown.
  std::optional<HttpReply> CallHandler(const HttpRequestView& view) {
    try {
      return server_.handler(view);
    } catch (const std::exception& e) {
      spdlog::error("http: the handler of {} {} threw: {}", view.method, view.target, e.what());
      return std::nullopt;
    }
  }

  void Respond(HttpReply&& reply) {
    if (reply.send_at > SteadyClock::now() && !stopping_ && !server_.stopping.load()) {
      return Hold(std::move(reply));
    }
    begin_ += consumed_;
    consumed_ = 0;
    if (begin_ == end_) begin_ = end_ = 0;
    // Decided after the handler: a stop that came while it ran closes this connection.
    const bool keep_alive = keep_alive_ && !stopping_ && !server_.stopping.load();
    out_.clear();
    AppendHttpResponse(out_, reply, version_, keep_alive, head_request_);
    Write(keep_alive);
  }

  // HttpReply::send_at: the reply waits on a timer of this connection's thread, so a thousand
  // held replies are a thousand timers, not threads. The handler chose the wait: no request
  // deadline runs meanwhile. Nothing more is read (a pipelined request waits in the kernel's
  // buffer, so a connection holds one reply at most), but the socket is watched: a client that
  // goes away is closed at once rather than when its reply is due.
  void Hold(HttpReply&& reply) {
    deadline_ = SteadyClock::time_point::max();
    holding_ = true;
    const SteadyClock::time_point at = reply.send_at;
    held_ = std::move(reply);
    held_.send_at = {};
    if (!hold_) hold_.emplace(socket_.get_executor());
    hold_->expires_at(at);
    // Fired, or cancelled: by OnStop (send it now) or by Close.
    hold_->async_wait([self = shared_from_this()](const error_code&) {
      if (self->closed_ || !self->holding_) return;
      self->SendHeld();
    });
    WatchWhileHeld(++hold_count_);
  }

  void SendHeld() {
    holding_ = false;
    error_code ec;
    socket_.cancel(ec);  // the watch: the only operation on the socket while held
    Respond(std::move(held_));
  }

  // While a reply is held: readable means the client closed (end of stream, a reset), or sent
  // its next request early; a peek tells which. `hold` tells a watch of an earlier hold, whose
  // completion may still be queued, from the current one.
  void WatchWhileHeld(uint64_t hold) {
    socket_.async_wait(Socket::wait_read, [self = shared_from_this(), hold](const error_code& ec) {
      if (ec || self->closed_ || !self->holding_ || hold != self->hold_count_) {
        return;
      }
      self->PeekWhileHeld(hold);
    });
  }

  void PeekWhileHeld(uint64_t hold) {
    char byte = 0;
    error_code ec;
    socket_.non_blocking(true, ec);
    const size_t n = socket_.receive(net::buffer(&byte, 1), Socket::message_peek, ec);
    error_code ignored;
    socket_.non_blocking(false, ignored);
    if (ec == net::error::would_block) return WatchWhileHeld(hold);  // a spurious wake-up
    if (ec || n == 0) {
      spdlog::debug("http: the client went away while its reply was held");
      return Close();
    }
    // The next request's first bytes: the reply goes out when due, then that request is read.
  }

  void ReplyAndClose(const HttpReply& reply) {
    begin_ = end_ = 0;
    version_ = 11;
    out_.clear();
    AppendHttpResponse(out_, reply, version_, /*keep_alive=*/false, head_request_);
    Write(false);
  }

  void Write(bool keep_alive) {
    Arm(server_.options.request_timeout);
    auto done = [self = shared_from_this(), keep_alive](const error_code& ec, size_t) {
      if (ec || self->closed_) return self->Close();
      if (!keep_alive || self->stopping_) return self->Linger();
      self->WaitForRequest();
    };
    if (tls_) return net::async_write(*tls_, net::buffer(out_), std::move(done));
    net::async_write(socket_, net::buffer(out_), std::move(done));
  }

  void Linger() {
    lingering_ = true;
    if (tls_) return TlsLinger();
    error_code ec;
    socket_.shutdown(Socket::shutdown_send, ec);
    if (ec) return Close();
    Arm(kLingerTime);
    begin_ = end_ = 0;
    if (buffer_.empty()) buffer_.resize(kInitialBufferBytes);
    Drain();
  }

  void Drain() {
    socket_.async_read_some(net::buffer(buffer_),
                            [self = shared_from_this()](const error_code& ec, size_t) {
                              if (ec || self->closed_) return self->Close();
                              self->Drain();
                            });
  }

  // TLS: close_notify, then the client's close_notify (which reads past what it still sends),
  // within the linger time; the sweep closes the socket if the client never answers.
  void TlsLinger() {
    Arm(kLingerTime);
    tls_->async_shutdown([self = shared_from_this()](const error_code&) { self->Close(); });
  }

  HttpServer::Impl& server_;
  Worker& worker_;
  Socket socket_;
  std::optional<TlsStream> tls_;  // over socket_, on a TLS listener
  HttpRequestParser parser_;
  std::vector<char> buffer_;  // received bytes: [begin_, end_) not yet consumed
  size_t begin_ = 0;
  size_t end_ = 0;
  size_t consumed_ = 0;                 // the request being answered, from begin_
  std::string out_;                     // the response being written; reused
  std::string peer_;                    // the peer's IP address or "unix" (HttpRequestView::peer)
  std::vector<std::string> peer_sans_;  // the verified client certificate's SANs
  bool peer_verified_ = false;
  HttpReply held_;                         // the reply waiting for its send_at, while holding_
  std::optional<net::steady_timer> hold_;  // made at the first hold
  uint64_t hold_count_ = 0;                // holds so far: tells a stale watch from the current
  SteadyClock::time_point deadline_ = SteadyClock::time_point::max();
  SteadyClock::time_point waiting_since_;  // when the current request's wait began
  const SteadyClock::time_point opened_at_ = SteadyClock::now();
  bool served_ = false;  // a whole request has come (ShedRank)
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_request_ = false;  // the request being answered is a HEAD: no body
  bool reading_ = false;
  bool lingering_ = false;
  bool holding_ = false;      // a reply waits for its send_at (Hold)
  bool handshaking_ = false;  // the TLS handshake is in progress
  bool stopping_ = false;
  bool closed_ = false;
};

// A refused connection after its 503: reads and discards what the client sends until it closes
// or kLingerTime passes, so that closing with unread bytes does not reset the connection and
// destroy the 503 before the client reads it.
class RefusedConnection final : public std::enable_shared_from_this<RefusedConnection> {
 public:
  RefusedConnection(Socket socket, std::atomic<size_t>& count)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), count_(count) {}
  ~RefusedConnection() { count_.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    timer_.expires_after(kLingerTime);
    timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec) self->Close();
    });
    Drain();
  }

 private:
  void Drain() {
    socket_.async_read_some(net::buffer(buffer_),
                            [self = shared_from_this()](const error_code& ec, size_t) {
                              if (ec) return self->Close();
                              self->Drain();
                            });
  }
  void Close() {
    error_code ec;
    timer_.cancel();
    socket_.close(ec);
  }

  Socket socket_;
  net::steady_timer timer_;
  std::atomic<size_t>& count_;
  std::array<char, 4096> buffer_{};
};

// The connection of `worker` that most readily gives up its slot, or null if all are busy.
Connection* SheddingCandidate(const Worker& worker) {
  Connection* best = nullptr;
  for (Connection* c : worker.connections) {
    const Connection::Shed rank = c->ShedRank();
    if (rank == Connection::Shed::kBusy) continue;
    if (best == nullptr || rank > best->ShedRank() ||
        (rank == best->ShedRank() && c->shed_since() < best->shed_since())) {
      best = c;
    }
  }
  return best;
}

}  // namespace

void HttpServer::Impl::Sweep(Worker& worker) {
  worker.sweep->expires_after(sweep_every);
  worker.sweep->async_wait([this, &worker](const error_code& ec) {
    if (ec) return;
    const auto now = SteadyClock::now();
    std::vector<Connection*> expired;
    for (Connection* c : worker.connections) {
      if (c->Expired(now)) expired.push_back(c);
    }
    for (Connection* c : expired) c->OnDeadline();
    Sweep(worker);
  });
}

void HttpServer::Impl::Accept() {
  Worker* worker = workers[next_worker].get();
  next_worker = (next_worker + 1) % workers.size();
  acceptor->async_accept(worker->ioc, [this, worker](error_code ec, Socket socket) {
    OnAccept(ec, std::move(socket), worker);
  });
}

void HttpServer::Impl::OnAccept(const error_code& ec, Socket socket, Worker* worker) {
  if (ec == net::error::operation_aborted || !acceptor->is_open()) return;  // stopping
  if (ec) {
    // Out of file descriptors (or another transient failure): back off instead of spinning.
    spdlog::warn("http: accept failed: {}; retrying in 100 ms", ec.message());
    accept_retry->expires_after(std::chrono::milliseconds(100));
    accept_retry->async_wait([this](error_code wait_ec) {
      if (!wait_ec) Accept();
    });
    return;
  }
  if (active.load(std::memory_order_relaxed) >= options.max_connections) {
    PlaceAtCap(worker->index, std::make_shared<Socket>(std::move(socket)), 0);
  } else {
    auto connection = std::make_shared<Connection>(*this, *worker, std::move(socket));
    net::post(worker->ioc, [connection] { connection->Start(); });
  }
  Accept();
}

// At the connection bound a new client takes the slot of the connection doing least: one
// closing anyway, else the one that has waited longest for a complete request (idle, or sending
// one slowly). Only when every connection has a request in the handler or a response on the way
// is it refused (503). Without this, one client holding max_connections idle or slow
// connections locked every other client out, for a request timeout at a time; ranking by the
// wait rather than idle-before-sending keeps a busy client's keep-alive connection, idle for a
// moment between requests, ahead of an attacker's connections that have sent nothing useful. Each
// worker, on its own thread, looks at its own connections, in turn from the new connection's:
// "longest" is within the first worker that has a candidate, which costs no cross-thread
// coordination.
void HttpServer::Impl::PlaceAtCap(size_t home, std::shared_ptr<Socket> socket, size_t step) {
  Worker& at = *workers[(home + step) % workers.size()];
  net::post(at.ioc, [this, &at, home, socket = std::move(socket), step]() mutable {
    Worker& own = *workers[home];
    if (Connection* victim = SheddingCandidate(at); victim != nullptr) {
      spdlog::debug("http: at {} connections: closed an idle one for a new client",
                    options.max_connections);
      victim->Close();
      net::post(own.ioc, [this, &own, socket = std::move(socket)] {
        auto connection = std::make_shared<Connection>(*this, own, std::move(*socket));
        connection->Start();
      });
      return;
    }
    if (step + 1 < workers.size()) return PlaceAtCap(home, std::move(socket), step + 1);
    net::post(own.ioc, [this, socket = std::move(socket)] { Refuse(std::move(*socket)); });
  });
}

void HttpServer::Impl::Refuse(Socket socket) {
  static const std::string kReply = [] {
    const std::string body = ErrorReply(503, "too many connections").body;
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }();
  spdlog::debug("http: refused a connection: {} open", options.max_connections);
  error_code ec;
  if (options.tls) {
    // A 503 in plaintext is not TLS: the client would read it as a broken record. Closed.
    socket.close(ec);
    return;
  }
  socket.non_blocking(true, ec);  // a fresh socket's send buffer takes it; never wait here
  net::write(socket, net::buffer(kReply.data(), kReply.size()), ec);
  if (ec || lingering_refusals.fetch_add(1, std::memory_order_relaxed) >= kMaxLingeringRefusals) {
    if (!ec) lingering_refusals.fetch_sub(1, std::memory_order_relaxed);
    socket.shutdown(Socket::shutdown_both, ec);
    socket.close(ec);
    return;
  }
  socket.shutdown(Socket::shutdown_send, ec);
  std::make_shared<RefusedConnection>(std::move(socket), lingering_refusals)->Start();
}

// Opens, binds and listens: a TCP endpoint here, a Unix socket through util/unix_socket.h (which
// keeps a live server's socket and sets the file's mode and group).
Result<void> HttpServer::Impl::Listen(const Endpoint& endpoint) {
  error_code ec;
  if (!endpoint.unix_path.empty()) {
    auto made = util::ListenUnixSocket(endpoint.unix_path, options.unix_socket);
    if (!made) return MakeError("http: " + made.error());
    acceptor->assign(Protocol(AF_UNIX, 0), made->fd, ec);
    if (ec) {
      close(made->fd);
      return MakeError("http: cannot listen on " + options.address + ": " + ec.message());
    }
    socket_file = std::move(made->file);
    return {};
  }
  const Protocol::endpoint generic(endpoint.ip);
  acceptor->open(generic.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(generic, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return MakeError("http: cannot listen on " + options.address + ": " + ec.message());
  const Protocol::endpoint local = acceptor->local_endpoint(ec);
  if (ec || local.size() > bound.capacity()) {
    return MakeError("http: cannot read the address bound for " + options.address);
  }
  std::memcpy(bound.data(), local.data(), local.size());
  bound.resize(local.size());
  return {};
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                      HttpHandler handler) {
  if (options.threads < 1) return MakeError("http: threads must be at least 1");
  if (options.max_connections < 1) return MakeError("http: max_connections must be at least 1");
  auto endpoint = ParseEndpoint(options.address);
  if (!endpoint) return std::unexpected(endpoint.error());

  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->handler = std::move(handler);
  for (int i = 0; i < impl->options.threads; ++i) {
    impl->workers.push_back(std::make_unique<Worker>());
    impl->workers.back()->index = static_cast<size_t>(i);
  }

  Worker& first = *impl->workers[0];
  impl->acceptor.emplace(first.ioc);
  impl->accept_retry.emplace(first.ioc);
  if (auto listening = impl->Listen(*endpoint); !listening)
    return std::unexpected(listening.error());

  // Deadlines are checked this often: a tenth of the timeout, within [5 ms, 250 ms].
  impl->sweep_every = std::clamp(impl->options.request_timeout / 10, std::chrono::milliseconds(5),
                                 std::chrono::milliseconds(250));
  impl->Accept();
  for (auto& worker : impl->workers) {
    worker->sweep.emplace(worker->ioc);
    impl->Sweep(*worker);
    worker->guard.emplace(worker->ioc.get_executor());
    worker->thread = std::thread([w = worker.get()] { w->ioc.run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->bound.port(); }

std::string HttpServer::address() const {
  if (!impl_->socket_file.path().empty()) return "unix:" + impl_->socket_file.path();
  return FormatEndpoint(impl_->bound);
}

size_t HttpServer::connections() const { return impl_->active.load(); }

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.stopping.store(true);
  net::post(s.workers[0]->ioc, [&s] {
    error_code ec;
    s.acceptor->close(ec);
    s.accept_retry->cancel();
  });
  for (auto& worker : s.workers) {
    net::post(worker->ioc, [w = worker.get()] {
      // OnStop may close a connection, which erases it from the set: iterate a copy.
      const std::vector<Connection*> open(w->connections.begin(), w->connections.end());
      for (Connection* c : open) c->OnStop();
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + s.options.shutdown_grace;
  while (s.active.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (s.active.load() > 0) {
    spdlog::warn("http: {} connections still open after the shutdown grace; closing them",
                 s.active.load());
  }
  for (auto& worker : s.workers) {
    worker->guard.reset();
    worker->ioc.stop();
  }
  for (auto& worker : s.workers) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  s.socket_file.Remove();
}

}  // namespace sluice::server
