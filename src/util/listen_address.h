// A listening address as sluiced's flags write it: "host:port" or "[v6]:port", the host an IP
// address or "localhost" (read as 127.0.0.1), or "unix:/absolute/path" (a Unix socket,
// util/unix_socket.h). Split here once for the HTTP and gRPC front ends,
// which each turn the host into their own socket address.
#ifndef SLUICE_UTIL_LISTEN_ADDRESS_H_
#define SLUICE_UTIL_LISTEN_ADDRESS_H_

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace sluice::util {

struct ListenAddress {
  std::string host;  // without brackets; "localhost" already 127.0.0.1
  uint16_t port = 0;
  bool v6 = false;        // written in brackets
  std::string unix_path;  // non-empty: "unix:<path>" (host and port unused)

  bool is_unix() const { return !unix_path.empty(); }
};

// The host and port of `address`, or why it has none (the message quotes the address). Whether
// the host is an IP address is left to the caller's resolver. A "unix:" path must be absolute.
std::expected<ListenAddress, std::string> SplitListenAddress(std::string_view address);

}  // namespace sluice::util

#endif  // SLUICE_UTIL_LISTEN_ADDRESS_H_
