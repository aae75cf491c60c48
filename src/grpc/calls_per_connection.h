// Calls in flight on each gRPC connection, to enforce the stream cap on clients that ignore it.
// gRPC (1.51) applies the MAX_CONCURRENT_STREAMS it advertises only once the client has
// acknowledged its SETTINGS: a client that never sends the ACK may open any number of streams,
// and streams whose answers it never reads (a zero flow-control window) hold their memory for
// good (issue 11: 10 connections x 5000 such streams, 461 MB). A compliant client never has more
// than the cap open; the server's count can run ahead of the client's by the calls whose end the
// client has seen but this process has not yet been told of, hence the slack: a connection with
// more than twice the cap (plus 16) calls in flight is broken the protocol, and is cut.
#ifndef SLUICE_GRPC_CALLS_PER_CONNECTION_H_
#define SLUICE_GRPC_CALLS_PER_CONNECTION_H_

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <system_error>
#include <unordered_map>

namespace sluice::server {

class CallsPerConnection {
 public:
  explicit CallsPerConnection(uint32_t max_concurrent_streams)
      : most_(2 * static_cast<size_t>(max_concurrent_streams) + 16) {}

  // A call began on connection `fd`. False: that connection now has more calls in flight than a
  // client honouring the cap could have.
  bool Enter(int fd) {
    const std::lock_guard<std::mutex> lock(mu_);
    return ++calls_[fd] <= most_;
  }

  // A call that Enter() counted has ended.
  void Leave(int fd) {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = calls_.find(fd);
    if (it != calls_.end() && --it->second == 0) calls_.erase(it);
  }

  size_t most() const { return most_; }

 private:
  const size_t most_;
  std::mutex mu_;
  std::unordered_map<int, size_t> calls_;
};

// The descriptor of the connection a call came on, from the call's peer(): gRPC names a
// handed-over connection's peer "fd:N" (grpc_server_add_channel_from_fd). -1 if it does not.
inline int ConnectionOfPeer(std::string_view peer) {
  if (!peer.starts_with("fd:")) return -1;
  int fd = -1;
  const auto r = std::from_chars(peer.data() + 3, peer.data() + peer.size(), fd);
  return r.ec == std::errc() ? fd : -1;
}

}  // namespace sluice::server

#endif  // SLUICE_GRPC_CALLS_PER_CONNECTION_H_
