// An HTTP client calling a rate-limited API politely, with the SDK's pieces: the Pacer spaces
// requests by what the server's RateLimit fields say, so a well-behaved client rarely meets a
// 429; when a 429 or 503 comes anyway, Backoff (full jitter, the server's Retry-After a floor
// it never shortens) and a RetryBudget decide when, and whether, to try again.
//
//   http_retry_client HOST PORT PATH BODY REQUESTS [--no-pacing]
//   http_retry_client 127.0.0.1 8080 /v1/check '{"domain":"api",...}' 20
//
// Any HTTP/1.1 server on an IP address; BODY is POSTed as JSON ("-": GET). The HTTP here is the
// smallest that works -- a connection per request, Connection: close -- the SDK's point is the
// decisions around it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/client/backoff.h"
#include "sluice/client/pacer.h"
#include "sluice/client/random.h"
#include "sluice/client/retry_budget.h"
#include "sluice/client/server_hints.h"
#include "sluice/clock.h"

namespace client = sluice::client;
using namespace std::chrono_literals;

namespace {

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Socket {
 public:
  Socket() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// One request; nullopt when the server could not be reached or answered nonsense.
std::optional<Response> Send(const std::string& host, int port, const std::string& path,
                             const std::string& body) {
  Socket s;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (s.fd() < 0 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return std::nullopt;
  timeval timeout{5, 0};
  setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return std::nullopt;
  }
  std::string request = (body == "-" ? "GET " : "POST ") + path + " HTTP/1.1\r\nHost: " + host +
                        "\r\nConnection: close\r\n";
  if (body != "-") {
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n\r\n" + body;
  } else {
    request += "\r\n";
  }
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = write(s.fd(), request.data() + sent, request.size() - sent);
    if (n <= 0) return std::nullopt;
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = read(s.fd(), buffer, sizeof buffer)) > 0;) raw.append(buffer, n);

  // "HTTP/1.1 429 Too Many Requests\r\nName: value\r\n...\r\n\r\nbody"
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || head_end == std::string::npos) return std::nullopt;
  Response response;
  response.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  for (size_t at = raw.find("\r\n") + 2; at < head_end;) {
    const size_t eol = raw.find("\r\n", at);
    const std::string_view line(raw.data() + at, eol - at);
    if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      response.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    at = eol + 2;
  }
  return response;
}

void SleepUntil(const sluice::Clock& clock, sluice::Timestamp when) {
  const sluice::Duration wait = when - clock.Now();
  if (wait > sluice::Duration::zero()) std::this_thread::sleep_for(wait);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && !(argc == 7 && std::string_view(argv[6]) == "--no-pacing")) {
    std::fprintf(stderr, "usage: %s HOST PORT PATH BODY REQUESTS [--no-pacing]\n", argv[0]);
    return 2;
  }
  const std::string host = argv[1], path = argv[3], body = argv[4];
  const int port = std::atoi(argv[2]), requests = std::atoi(argv[5]);
  const bool pacing = argc == 6;

  sluice::MonotonicClock clock;
  client::Pacer pacer;
  client::SeededRandom random(std::random_device{}());
  const client::BackoffPolicy policy{
      .base = 100ms, .cap = 5s, .max_attempts = 5, .jitter = client::Jitter::kFull};
  client::RetryBudget budget;  // retries: at most 20% of calls, beyond a small reserve

  int served = 0, too_many = 0, gave_up = 0;
  const sluice::Timestamp start = clock.Now();
  for (int i = 1; i <= requests; ++i) {
    client::Backoff backoff(policy, random);
    budget.OnCall(clock.Now());
    for (int attempt = 1;; ++attempt) {
      if (pacing) SleepUntil(clock, pacer.NextSendTime(clock.Now()));
      pacer.OnSend(clock.Now());
      const std::optional<Response> response = Send(host, port, path, body);
      std::optional<sluice::Duration> retry_after;
      if (response) {
        std::vector<client::Header> headers;
        for (const auto& [name, value] : response->headers) headers.push_back({name, value});
        const client::ServerHints hints = client::ReadServerHints(headers, clock.Now());
        pacer.Observe(hints, clock.Now());
        if (response->status != 429 && response->status < 500) {
          std::printf("request %d: %d after %d attempt(s)\n", i, response->status, attempt);
          if (response->status < 300) ++served;
          break;
        }
        if (response->status == 429) ++too_many;
        if (hints.retry_after) retry_after = hints.retry_after->wait;
      }
      const std::optional<sluice::Duration> wait = backoff.NextDelay(retry_after);
      if (!wait || !budget.TryRetry(clock.Now())) {
        std::printf("request %d: gave up after %d attempt(s)\n", i, attempt);
        ++gave_up;
        break;
      }
      std::this_thread::sleep_for(*wait);
    }
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock.Now() - start);
  std::printf("served: %d of %d, 429s: %d, gave up: %d, elapsed: %lld ms\n", served, requests,
              too_many, gave_up, static_cast<long long>(elapsed.count()));
  return gave_up == 0 ? 0 : 1;
}
