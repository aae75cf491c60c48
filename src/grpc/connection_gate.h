// The gRPC front end's listening socket, with a cap on open connections. Debian 12's gRPC (1.51)
// has no channel argument that bounds connections, so sluiced accepts them itself and hands each
// one to gRPC (grpc::AddInsecureChannelFromFd, through the Handover callback); once gRPC owns a
// descriptor it says nothing when it closes it, so the gate finds closed connections itself:
// it remembers each handed-over descriptor with its socket's inode, and a descriptor that is
// closed, or now holds another socket, is a connection gone. That check (one fstat per
// connection) runs only when the count reaches the cap, so below it accepting costs nothing.
//
// At the cap, one more connection is closed at once, before any HTTP/2: a gRPC client sees a
// failed connection (UNAVAILABLE at once, and reconnects with backoff). A polite refusal, the
// server preface and a GOAWAY, was tried and is worse: the client counts the connection as made,
// retries the call at once on a new one, and loops until its deadline, hammering the full
// server. No gRPC or protobuf header here: the gate only moves descriptors.
//
//   auto gate = ConnectionGate::Listen("127.0.0.1:8081", 1024);
//   (*gate)->Start([server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
//   ... (*gate)->Stop();  // closes the listening socket; handed-over connections are gRPC's
#ifndef SLUICE_GRPC_CONNECTION_GATE_H_
#define SLUICE_GRPC_CONNECTION_GATE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sluice/status.h"
#include "util/unix_socket.h"

namespace sluice::server {

class ConnectionGate {
 public:
  // Takes an accepted connection (non-blocking, close-on-exec, TCP_NODELAY if TCP) for good.
  using Handover = std::function<void(int fd)>;

  // Binds and listens on `address` ("host:port" or "[v6]:port", the host an IP address or
  // localhost; port 0 picks a free port) without SO_REUSEPORT, so a second server on the same
  // port fails instead of silently sharing the traffic. Or "unix:/path": a Unix socket made
  // with `unix_socket`'s mode and group, never taken from a live server, removed by Stop()
  // (util/unix_socket.h). Accepts nothing until Start().
  static Result<std::unique_ptr<ConnectionGate>> Listen(
      const std::string& address, size_t max_connections,
      const util::UnixSocketOptions& unix_socket = {});

  // Accepts on a thread of its own and hands over each connection while fewer than
  // max_connections handed-over ones are open. Call once.
  void Start(Handover handover);

  // Stops accepting and closes the listening socket. Idempotent; the destructor calls it.
  void Stop();

  // Ends handed-over connection `fd` (shutdown: gRPC sees it closed and ends its calls), if it
  // is still the connection handed over under that number. True if it was.
  bool Cut(int fd);

  int port() const;  // 0 for a Unix socket
  // Handed-over connections still open (checks each one: for tests and logs, not hot paths).
  size_t open();
  uint64_t refused() const;  // connections refused at the cap so far

  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

 private:
  struct Impl;
  explicit ConnectionGate(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<ConnectionGate>> ListenUnix(const std::string& address,
                                                            size_t max_connections,
                                                            const util::UnixSocketOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_GRPC_CONNECTION_GATE_H_
