#include "cli/usage_client.h"

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "util/ascii.h"

namespace sluice::cli {
namespace {

constexpr size_t kMaxResponseBytes = 1 << 20;
using SteadyClock = std::chrono::steady_clock;

struct Url {
  std::string host;
  std::string port = "80";
  std::string path_prefix;  // without a trailing '/'
};

Result<Url> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return MakeError(fmt::format("--from '{}': must start with http://", url));
  }
  std::string_view rest = url.substr(kScheme.size());
  Url u;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    u.path_prefix = path;
  }
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8080
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return MakeError(fmt::format("--from '{}': bad host", url));
    u.host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
    if (!authority.empty()) {
      if (authority.front() != ':') return MakeError(fmt::format("--from '{}': bad port", url));
      u.port = authority.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) u.port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return MakeError(fmt::format("--from '{}': no host", url));
  if (u.port.empty() || u.port.size() > 5 ||
      u.port.find_first_not_of("0123456789") != std::string::npos) {
    return MakeError(fmt::format("--from '{}': the port must be a number", url));
  }
  return u;
}

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

int MillisLeft(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitFor(int fd, short events, SteadyClock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// The raw response (status line, headers, body) of one request, read until the server closes.
Result<std::string> Exchange(const Url& url, const std::string& request,
                             SteadyClock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0) {
    return MakeError(fmt::format("cannot resolve '{}': {}", url.host, gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, &freeaddrinfo);
  std::string last_error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket s(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd() < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS || !WaitFor(s.fd(), POLLOUT, deadline)) {
        last_error = errno == EINPROGRESS ? "timed out" : std::strerror(errno);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_error = std::strerror(err);
        continue;
      }
    }
    size_t sent = 0;
    while (sent < request.size()) {
      if (!WaitFor(s.fd(), POLLOUT, deadline)) return MakeError("timed out sending the request");
      const ssize_t n = send(s.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return MakeError(std::string("cannot send the request: ") + std::strerror(errno));
      }
      if (n > 0) sent += static_cast<size_t>(n);
    }
    std::string response;
    char buf[16384];
    while (true) {
      if (!WaitFor(s.fd(), POLLIN, deadline)) return MakeError("timed out reading the answer");
      const ssize_t n = recv(s.fd(), buf, sizeof buf, 0);
      if (n == 0) return response;
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return MakeError(std::string("cannot read the answer: ") + std::strerror(errno));
      }
      response.append(buf, static_cast<size_t>(n));
      if (response.size() > kMaxResponseBytes) {
        return MakeError(fmt::format("the answer is longer than {} bytes", kMaxResponseBytes));
      }
    }
  }
  return MakeError(fmt::format("cannot connect to {}:{}: {}", url.host, url.port, last_error));
}

Result<double> Number(const nlohmann::json& j, const char* object, const char* field) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_number() || !(it->get<double>() >= 0)) {
    return MakeError(fmt::format("/v1/usage: {}{}: must be a number, at least 0", object, field));
  }
  return it->get<double>();
}

}  // namespace

Result<Usage> ParseUsageJson(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return MakeError("/v1/usage: the answer is not JSON");
  Usage u;
  for (auto [field, out] : {std::pair{"domain", &u.domain}, std::pair{"limit", &u.limit}}) {
    const auto it = j.find(field);
    if (it == j.end() || !it->is_string()) {
      return MakeError(fmt::format("/v1/usage: {}: must be a string", field));
    }
    *out = it->get<std::string>();
  }
  auto period = Number(j, "", "period_s");
  if (!period) return std::unexpected(period.error());
  if (*period <= 0) return MakeError("/v1/usage: period_s: must be above 0");
  u.period_s = *period;
  auto identities = Number(j, "", "identities");
  if (!identities) return std::unexpected(identities.error());
  u.identities = static_cast<uint64_t>(*identities);
  const auto p = j.find("percentiles");
  if (p == j.end() || !p->is_object()) {
    return MakeError("/v1/usage: percentiles: must be an object");
  }
  // Requests per window may come from a histogram's buckets, hence fractions: rounded up.
  PeakDistribution& d = u.percentiles;
  for (auto [field, out] :
       {std::pair{"p50", &d.p50}, std::pair{"p90", &d.p90}, std::pair{"p95", &d.p95},
        std::pair{"p99", &d.p99}, std::pair{"max", &d.max}}) {
    auto v = Number(*p, "percentiles.", field);
    if (!v) return std::unexpected(v.error());
    if (*v > 1e15) return MakeError(fmt::format("/v1/usage: percentiles.{}: too large", field));
    *out = static_cast<int64_t>(std::ceil(*v));
  }
  return u;
}

Result<Usage> FetchUsage(const UsageQuery& query) {
  const auto deadline = SteadyClock::now() + query.timeout;
  auto url = ParseHttpUrl(query.url);
  if (!url) return std::unexpected(url.error());
  const std::string host_header =
      url->host.find(':') != std::string::npos ? "[" + url->host + "]" : url->host;
  std::string request = fmt::format(
      "GET {}/v1/usage?domain={}&limit={} HTTP/1.1\r\nHost: {}:{}\r\nAccept: "
      "application/json\r\nConnection: close\r\n",
      url->path_prefix, PercentEncode(query.domain), PercentEncode(query.limit), host_header,
      url->port);
  if (!query.admin_token.empty()) request += "Authorization: Bearer " + query.admin_token + "\r\n";
  request += "\r\n";
  auto raw = Exchange(*url, request, deadline);
  if (!raw) return MakeError(fmt::format("--from {}: {}", query.url, raw.error().message));

  const size_t head_end = raw->find("\r\n\r\n");
  if (raw->rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || raw->size() < 12) {
    return MakeError(fmt::format("--from {}: the answer is not HTTP", query.url));
  }
  const std::string_view head = std::string_view(*raw).substr(0, head_end);
  const std::string_view body = std::string_view(*raw).substr(head_end + 4);
  std::string lower_head(head);
  for (char& c : lower_head) c = util::ToLowerAscii(c);
  if (lower_head.find("\r\ntransfer-encoding:") != std::string::npos) {
    return MakeError(fmt::format("--from {}: chunked answers are not supported", query.url));
  }
  const std::string_view status = head.substr(9, 3);
  if (status != "200") {
    const size_t eol = head.find("\r\n");
    return MakeError(
        fmt::format("--from {}: {} {}", query.url, head.substr(0, eol), body.substr(0, 500)));
  }
  return ParseUsageJson(body);
}

Result<Recommendation> RecommendFromUsage(const Usage& usage, const RecommendOptions& options) {
  RecommendOptions o = options;
  o.per = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(usage.period_s));
  if (auto ok = ValidateRecommendOptions(o); !ok) return std::unexpected(ok.error());
  const PeakDistribution& d = usage.percentiles;
  int64_t peak = 0;
  if (o.percentile == 50) {
    peak = d.p50;
  } else if (o.percentile == 90) {
    peak = d.p90;
  } else if (o.percentile == 95) {
    peak = d.p95;
  } else if (o.percentile == 99) {
    peak = d.p99;
  } else if (o.percentile == 100) {
    peak = d.max;
  } else {
    return MakeError(
        "--percentile with --from must be 50, 90, 95, 99 or 100 (what /v1/usage reports)");
  }
  Recommendation r;
  r.options = o;
  r.identities = usage.identities;
  r.distribution = d;
  r.limit = ScaleByHeadroom(static_cast<double>(peak), o.headroom);
  r.burst = r.limit;
  return r;
}

}  // namespace sluice::cli
