// A minimal blocking HTTP/1.1 client over a plain socket, for the end-to-end tests: it sends
// exactly the bytes a test writes (half requests, pipelined requests, malformed ones) and reads
// responses by Content-Length.
#ifndef SLUICE_TESTS_SUPPORT_HTTP_TEST_CLIENT_H_
#define SLUICE_TESTS_SUPPORT_HTTP_TEST_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::testing {

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The value of the first header called `name` (case-insensitive), or nullopt.
  std::optional<std::string> Header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n.size() == name.size() &&
          std::equal(n.begin(), n.end(), name.begin(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        return v;
      }
    }
    return std::nullopt;
  }
};

class HttpClient {
 public:
  // `source`: the loopback address to connect from ("127.0.0.2"), so that a test can be a
  // client other than the servers it talks to; null: the kernel's choice (127.0.0.1).
  explicit HttpClient(int port, const char* source = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      inet_pton(AF_INET, source, &from.sin_addr);
      if (bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
        close(fd_);
        fd_ = -1;
        return;
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~HttpClient() {
    if (fd_ >= 0) close(fd_);
  }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool connected() const { return fd_ >= 0; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  static std::string Format(std::string_view method, std::string_view target,
                            std::string_view body = "",
                            const std::vector<std::string>& extra_headers = {}) {
    std::string r =
        std::string(method) + " " + std::string(target) + " HTTP/1.1\r\n" + "Host: localhost\r\n";
    for (const auto& h : extra_headers) r += h + "\r\n";
    if (!body.empty() || method == "POST") {
      r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n";
    }
    r += "\r\n";
    r += body;
    return r;
  }

  std::optional<HttpResponse> Request(std::string_view method, std::string_view target,
                                      std::string_view body = "",
                                      const std::vector<std::string>& extra_headers = {}) {
    if (!Send(Format(method, target, body, extra_headers))) return std::nullopt;
    return Read();
  }

  // The next response; nullopt if the connection closes or nothing arrives within `timeout`.
  // A response to HEAD (head_request) has no body, whatever its Content-Length says.
  std::optional<HttpResponse> Read(std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                   bool head_request = false) {
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(timeout)) return std::nullopt;
    }
    HttpResponse r;
    const std::string head = buffer_.substr(0, header_end);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t content_length = 0;
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line =
          head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers.emplace_back(line.substr(0, colon), value);
    }
    if (auto cl = r.Header("Content-Length"); cl && !head_request) content_length = std::stoul(*cl);
    buffer_.erase(0, header_end + 4);
    while (buffer_.size() < content_length) {
      if (!Fill(timeout)) return std::nullopt;
    }
    r.body = buffer_.substr(0, content_length);
    buffer_.erase(0, content_length);
    return r;
  }

  // True when the server closes the connection (EOF or reset) within `timeout`, reading and
  // dropping anything it sends before.
  bool ClosedByPeer(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  bool Fill(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[16384];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_HTTP_TEST_CLIENT_H_
