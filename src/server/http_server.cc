#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sluice::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// After an error reply the client may still be sending (a 2 MiB body we refused): closing with
// unread data makes the kernel send a reset, which can destroy our reply before the client
// reads it. So we stop sending, read and discard for a short while, then close.
constexpr std::chrono::milliseconds kLingerTime{1000};

std::string_view ToStd(beast::string_view s) { return {s.data(), s.size()}; }

Result<tcp::endpoint> ParseEndpoint(std::string_view address) {
  std::string_view host;
  std::string_view port;
  if (address.starts_with('[')) {
    const size_t close = address.find("]:");
    if (close == std::string_view::npos)
      return MakeError("bad address '" + std::string(address) + "'");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) {
      return MakeError("bad address '" + std::string(address) + "': expected host:port");
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  unsigned long port_number = 0;
  const auto r = std::from_chars(port.data(), port.data() + port.size(), port_number);
  if (port.empty() || r.ec != std::errc() || r.ptr != port.data() + port.size() ||
      port_number > 65535) {
    return MakeError("bad port in address '" + std::string(address) + "'");
  }
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  const net::ip::address ip = net::ip::make_address(std::string(host), ec);
  if (ec) {
    return MakeError("bad address '" + std::string(address) +
                     "': the host must be an IP address or localhost");
  }
  return tcp::endpoint(ip, static_cast<uint16_t>(port_number));
}

std::string FormatEndpoint(const tcp::endpoint& e) {
  const std::string ip = e.address().to_string();
  return (e.address().is_v6() ? "[" + ip + "]" : ip) + ":" + std::to_string(e.port());
}

class Connection;

// One thread and its io_context. `connections` is touched only on that thread.
struct Worker {
  std::unordered_set<Connection*> connections;  // destroyed after ioc (which owns handlers)
  net::io_context ioc{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  std::thread thread;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<size_t> active{0};
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::vector<std::unique_ptr<Worker>> workers;  // workers[0] also runs the acceptor
  std::optional<tcp::acceptor> acceptor;         // destroyed before the workers
  std::optional<net::steady_timer> accept_retry;
  tcp::endpoint bound;
  size_t next_worker = 0;

  void Accept();
  void OnAccept(const beast::error_code& ec, tcp::socket socket, Worker* worker);
  void Refuse(tcp::socket socket);
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, Worker& worker, tcp::socket socket)
      : server_(server), worker_(worker), stream_(std::move(socket)) {
    server_.active.fetch_add(1, std::memory_order_relaxed);
  }
  ~Connection() {
    worker_.connections.erase(this);
    server_.active.fetch_sub(1, std::memory_order_relaxed);
  }

  // On the worker's thread.
  void Start() {
    worker_.connections.insert(this);
    if (server_.stopping.load()) return Close();
    Read();
  }

  // On the worker's thread, when the server stops: an idle connection (waiting for a request
  // that has not begun) is closed now; any other finishes its request and closes after.
  void OnStop() {
    stopping_ = true;
    if (reading_ && buffer_.size() == 0 && !parser_->got_some()) stream_.cancel();
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    stream_.expires_after(server_.options.request_timeout);
    reading_ = true;
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    reading_ = false;
    if (ec == http::error::body_limit) {
      return ReplyAndClose(ErrorReply(413, "the body is over the limit of " +
                                               std::to_string(server_.options.max_body_bytes) +
                                               " bytes"));
    }
    if (ec == http::error::header_limit) {
      return ReplyAndClose(ErrorReply(431, "the request headers are over the limit of " +
                                               std::to_string(server_.options.max_header_bytes) +
                                               " bytes"));
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return ReplyAndClose(ErrorReply(400, "malformed HTTP request: " + ec.message()));
    }
    if (ec) return Close();  // end of stream, timeout, reset, or stopped while idle

    const auto& req = parser_->get();
    const HttpRequestView view{ToStd(req.method_string()), ToStd(req.target()),
                               ToStd(req[http::field::authorization]), req.body()};
    HttpReply reply = server_.handler(view);
    // Decided after the handler: a stop that came while it ran closes this connection.
    const bool keep_alive = req.keep_alive() && !stopping_ && !server_.stopping.load();
    Write(std::move(reply), req.version(), keep_alive);
  }

  void Write(HttpReply reply, unsigned version, bool keep_alive) {
    response_.emplace(static_cast<http::status>(reply.status), version);
    response_->set(http::field::content_type, reply.content_type);
    for (auto& [name, value] : reply.headers) response_->insert(name, value);
    response_->keep_alive(keep_alive);
    response_->body() = std::move(reply.body);
    response_->prepare_payload();
    stream_.expires_after(server_.options.request_timeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        if (!keep_alive || self->stopping_) return self->Linger();
                        self->response_.reset();
                        self->Read();
                      });
  }

  void ReplyAndClose(HttpReply reply) { Write(std::move(reply), 11, /*keep_alive=*/false); }

  void Linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    drain_ = std::make_unique<std::array<char, 4096>>();
    stream_.expires_after(kLingerTime);
    Drain();
  }

  void Drain() {
    stream_.async_read_some(net::buffer(*drain_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Drain();
                            });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  HttpServer::Impl& server_;
  Worker& worker_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::unique_ptr<std::array<char, 4096>> drain_;
  bool reading_ = false;
  bool stopping_ = false;
};

}  // namespace

void HttpServer::Impl::Accept() {
  Worker* worker = workers[next_worker].get();
  next_worker = (next_worker + 1) % workers.size();
  acceptor->async_accept(worker->ioc, [this, worker](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket), worker);
  });
}

void HttpServer::Impl::OnAccept(const beast::error_code& ec, tcp::socket socket, Worker* worker) {
  if (ec == net::error::operation_aborted || !acceptor->is_open()) return;  // stopping
  if (ec) {
    // Out of file descriptors (or another transient failure): back off instead of spinning.
    spdlog::warn("http: accept failed: {}; retrying in 100 ms", ec.message());
    accept_retry->expires_after(std::chrono::milliseconds(100));
    accept_retry->async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec) Accept();
    });
    return;
  }
  if (active.load(std::memory_order_relaxed) >= options.max_connections) {
    Refuse(std::move(socket));
  } else {
    auto connection = std::make_shared<Connection>(*this, *worker, std::move(socket));
    net::post(worker->ioc, [connection] { connection->Start(); });
  }
  Accept();
}

void HttpServer::Impl::Refuse(tcp::socket socket) {
  static const std::string kReply = [] {
    const std::string body = ErrorReply(503, "too many connections").body;
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }();
  spdlog::debug("http: refused a connection: {} open", options.max_connections);
  beast::error_code ec;
  socket.non_blocking(true, ec);  // a fresh socket's send buffer takes it; never wait here
  net::write(socket, net::buffer(kReply.data(), kReply.size()), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
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
  for (int i = 0; i < impl->options.threads; ++i)
    impl->workers.push_back(std::make_unique<Worker>());

  Worker& first = *impl->workers[0];
  impl->acceptor.emplace(first.ioc);
  impl->accept_retry.emplace(first.ioc);
  beast::error_code ec;
  impl->acceptor->open(endpoint->protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(*endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return MakeError("http: cannot listen on " + impl->options.address + ": " + ec.message());
  }
  impl->bound = impl->acceptor->local_endpoint(ec);

  impl->Accept();
  for (auto& worker : impl->workers) {
    worker->guard.emplace(worker->ioc.get_executor());
    worker->thread = std::thread([w = worker.get()] { w->ioc.run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->bound.port(); }

std::string HttpServer::address() const { return FormatEndpoint(impl_->bound); }

size_t HttpServer::connections() const { return impl_->active.load(); }

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.stopping.store(true);
  net::post(s.workers[0]->ioc, [&s] {
    beast::error_code ec;
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
}

}  // namespace sluice::server
