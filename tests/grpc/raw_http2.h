// A hostile (or merely minimal) HTTP/2 client for the gRPC limit tests: a plain TCP socket, frames
// built by hand (RFC 9113), headers as HPACK literals without Huffman (RFC 7541 6.2.2). It does
// only what a test tells it: no SETTINGS ACK, no flow control, so it can ignore the server's
// limits the way an attacker would, and it reports the frames the server sent.
#ifndef SLUICE_TESTS_GRPC_RAW_HTTP2_H_
#define SLUICE_TESTS_GRPC_RAW_HTTP2_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::server::test {

enum FrameType : uint8_t {
  kData = 0,
  kHeaders = 1,
  kRstStream = 3,
  kSettings = 4,
  kPing = 6,
  kGoaway = 7,
};

struct Frame {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream = 0;
  std::string payload;
};

inline std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

inline std::string EncodeFrame(uint8_t type, uint8_t flags, uint32_t stream,
                               const std::string& payload) {
  std::string out{static_cast<char>(payload.size() >> 16), static_cast<char>(payload.size() >> 8),
                  static_cast<char>(payload.size()), static_cast<char>(type),
                  static_cast<char>(flags)};
  return out + Be32(stream) + payload;
}

inline std::string Settings(const std::vector<std::pair<uint16_t, uint32_t>>& values) {
  std::string payload;
  for (const auto& [id, value] : values) {
    payload += static_cast<char>(id >> 8);
    payload += static_cast<char>(id);
    payload += Be32(value);
  }
  return EncodeFrame(kSettings, 0, 0, payload);
}

// A string literal (no Huffman) with its length as an HPACK integer with a 7-bit prefix.
inline std::string HpackString(const std::string& s) {
  std::string out;
  size_t n = s.size();
  if (n < 127) {
    out += static_cast<char>(n);
  } else {
    out += static_cast<char>(127);
    for (n -= 127; n >= 128; n >>= 7) out += static_cast<char>((n & 127) | 128);
    out += static_cast<char>(n);
  }
  return out + s;
}

inline constexpr char kShouldRateLimitPath[] =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

// HEADERS (END_HEADERS) and DATA (END_STREAM) of one call of `path` (ShouldRateLimit unless
// told) carrying `message`.
inline std::string CallFrames(uint32_t stream, const std::string& message,
                              const std::string& path = kShouldRateLimitPath) {
  std::string block;
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{":method", "POST"},
                                                        {":scheme", "http"},
                                                        {":path", path},
                                                        {":authority", "sluiced"},
                                                        {"content-type", "application/grpc"},
                                                        {"te", "trailers"}}) {
    block += '\0';  // literal without indexing, new name
    block += HpackString(name) + HpackString(value);
  }
  const std::string grpc_message = std::string(1, '\0') + Be32(message.size()) + message;
  return EncodeFrame(kHeaders, 0x4, stream, block) + EncodeFrame(kData, 0x1, stream, grpc_message);
}

inline constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class RawHttp2 {
 public:
  explicit RawHttp2(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  // To a Unix socket.
  explicit RawHttp2(const std::string& unix_path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    unix_path.copy(addr.sun_path, sizeof addr.sun_path - 1);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawHttp2() { Close(); }
  RawHttp2(const RawHttp2&) = delete;
  RawHttp2& operator=(const RawHttp2&) = delete;

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads frames until `done(frame)` says so, the server closes (closed() then true), or the
  // deadline passes. Returns every frame read.
  std::vector<Frame> ReadUntil(const std::function<bool(const Frame&)>& done,
                               std::chrono::milliseconds timeout) {
    std::vector<Frame> frames;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_) {
      for (Frame f; TakeFrame(&f);) {
        frames.push_back(f);
        if (done(f)) return frames;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        for (Frame f; TakeFrame(&f);) frames.push_back(f);
        break;
      }
      in_.append(buf, static_cast<size_t>(n));
    }
    return frames;
  }

  // Reads until the server closes the connection (or the deadline passes).
  std::vector<Frame> ReadToClose(std::chrono::milliseconds timeout) {
    return ReadUntil([](const Frame&) { return false; }, timeout);
  }

  bool closed() const { return closed_; }

 private:
  bool TakeFrame(Frame* f) {
    if (in_.size() < 9) return false;
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(in_[i]); };
    const size_t length = size_t{byte(0)} << 16 | size_t{byte(1)} << 8 | byte(2);
    if (in_.size() < 9 + length) return false;
    f->type = byte(3);
    f->flags = byte(4);
    f->stream =
        (uint32_t{byte(5)} << 24 | uint32_t{byte(6)} << 16 | uint32_t{byte(7)} << 8 | byte(8)) &
        0x7fffffffu;
    f->payload = in_.substr(9, length);
    in_.erase(0, 9 + length);
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string in_;
};

inline uint32_t FrameU32(const std::string& payload, size_t at) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(payload[at + i]); };
  return uint32_t{b(0)} << 24 | uint32_t{b(1)} << 16 | uint32_t{b(2)} << 8 | b(3);
}

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_GRPC_RAW_HTTP2_H_
