#include "util/listen_address.h"

#include <charconv>

namespace sluice::util {

std::expected<ListenAddress, std::string> SplitListenAddress(std::string_view address) {
  const std::string quoted = "bad address '" + std::string(address) + "'";
  if (address.starts_with("unix:")) {
    ListenAddress out;
    out.unix_path = std::string(address.substr(5));
    if (!out.unix_path.starts_with('/')) {
      return std::unexpected(quoted + ": expected unix:/absolute/path");
    }
    return out;
  }
  std::string_view host;
  std::string_view port;
  ListenAddress out;
  out.v6 = address.starts_with('[');
  if (out.v6) {
    const size_t close = address.find("]:");
    if (close == std::string_view::npos) return std::unexpected(quoted + ": expected [v6]:port");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return std::unexpected(quoted + ": expected host:port");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  unsigned port_number = 0;
  const auto r = std::from_chars(port.data(), port.data() + port.size(), port_number);
  if (port.empty() || r.ec != std::errc() || r.ptr != port.data() + port.size() ||
      port_number > 65535) {
    return std::unexpected("bad port in address '" + std::string(address) + "'");
  }
  out.host = host == "localhost" ? "127.0.0.1" : std::string(host);
  out.port = static_cast<uint16_t>(port_number);
  return out;
}

}  // namespace sluice::util
