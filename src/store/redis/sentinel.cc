#include "store/redis/sentinel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <utility>

#include "store/redis/redis_reply.h"

namespace sluice::internal {
namespace {

using Clock = std::chrono::steady_clock;
using Connection = std::unique_ptr<RedisConnection>;

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A connection for one question (or the subscription): connect, TLS handshake when the endpoint
// has a context, and AUTH with its credentials, each bounded by its timeouts.
Result<Connection> Open(const RedisEndpoint& e) {
  auto c = RedisConnection::Open(e);
  if (!c) return MakeError(e.Name() + ": " + c.error().message);
  if (!e.password.empty()) {
    const std::vector<std::string> auth =
        e.user.empty() ? std::vector<std::string>{"AUTH", e.password}
                       : std::vector<std::string>{"AUTH", e.user, e.password};
    if (auto ok = (*c)->Command(auth); !ok) {
      return MakeError(e.Name() + ": authentication failed: " + ok.error().message);
    }
  }
  return std::move(*c);
}

// Keepalive on the subscription as hiredis set it (idle 15 s, then 3 probes 5 s apart): a
// silent peer (its host gone) is found without the thread waiting anywhere but in poll().
void KeepAlive(int fd) {
  const int on = 1;
  const int idle = 15;
  const int interval = 5;
  const int count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

RedisEndpoint SentinelSettings::MasterAt(const MasterAddress& address) const {
  RedisEndpoint e = master_template;
  e.host = address.host;
  e.port = address.port;
  if (e.tls == nullptr || !e.tls_name.empty() || !IsIpLiteral(e.host)) return e;
  for (const RedisEndpoint& s : sentinels) {
    if (!IsIpLiteral(s.host)) {
      e.tls_name = s.host;
      break;
    }
  }
  return e;
}

SentinelWatch::SentinelWatch(SentinelSettings settings,
                             std::function<void(const SentinelFinding&)> found,
                             std::function<void()> tidy)
    : settings_(std::move(settings)), found_(std::move(found)), tidy_(std::move(tidy)) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void SentinelWatch::Start() {
  if (!thread_.joinable() && !stopping_.load()) thread_ = std::thread([this] { Run(); });
}

SentinelWatch::~SentinelWatch() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void SentinelWatch::Stop() {
  if (stopping_.exchange(true)) return;
  Wake();
  if (thread_.joinable()) thread_.join();
  DropSubscription();
}

// One wake per request: calls failing by the thousand while the master is away write to the
// eventfd once, not once each, until the thread has asked the sentinels.
void SentinelWatch::Recheck() {
  if (!recheck_.exchange(true)) Wake();
}

void SentinelWatch::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  // Non-blocking: a counter already non-zero wakes the thread all the same.
  [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void SentinelWatch::WakeBy(Clock::time_point at) {
  const int64_t ticks = at.time_since_epoch().count();
  int64_t was = wake_by_.load();
  while ((was == 0 || ticks < was) && !wake_by_.compare_exchange_weak(was, ticks)) {
  }
}

SentinelFinding SentinelWatch::Verify(const MasterAddress& address) {
  RedisEndpoint e = settings_.MasterAt(address);
  e.command_timeout = e.connect_timeout;  // one question: as bounded as the sentinels'
  auto c = Open(e);
  if (!c) return {std::nullopt, true, "master " + c.error().message};
  auto role = (*c)->Command(std::vector<std::string>{"ROLE"});
  if (!role) return {std::nullopt, true, "master " + e.Name() + ": ROLE: " + role.error().message};
  if (!SaysMaster(*role)) {
    return {std::nullopt, false, e.Name() + " is not a master (ROLE), waiting for the failover"};
  }
  return {address, false, {}};
}

SentinelFinding SentinelWatch::Resolve() {
  const size_t n = settings_.sentinels.size();
  std::string why;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_sentinel_ + k) % n;
    const RedisEndpoint& s = settings_.sentinels[i];
    auto c = Open(s);
    if (!c) {
      why = "sentinel " + c.error().message;
      continue;
    }
    auto reply = (*c)->Command(
        std::vector<std::string>{"SENTINEL", "get-master-addr-by-name", settings_.master});
    if (!reply) {
      why = "sentinel " + s.Name() + ": " + reply.error().message;
      continue;
    }
    auto address = ReadMasterAddress(*reply, settings_.master);
    if (!address) {
      why = "sentinel " + s.Name() + ": " + address.error().message;
      continue;
    }
    next_sentinel_ = i;
    return Verify(*address);
  }
  return {std::nullopt, true, "no sentinel answered: " + why};
}

bool SentinelWatch::Subscribe() {
  const size_t n = settings_.sentinels.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_sentinel_ + k) % n;
    const RedisEndpoint& s = settings_.sentinels[i];
    auto c = Open(s);
    if (!c) continue;
    auto reply =
        (*c)->Command(std::vector<std::string>{"SUBSCRIBE", std::string(kSwitchMasterChannel)});
    if (!reply) continue;
    KeepAlive((*c)->fd());
    sub_ = std::move(*c);
    next_sentinel_ = i;
    return true;
  }
  return false;
}

void SentinelWatch::DropSubscription() { sub_.reset(); }

bool SentinelWatch::ReadSubscription(bool& resolve) {
  if (!sub_->ReadArrived()) return false;
  for (;;) {
    bool failed = false;
    const RedisReplyPtr raw = sub_->BufferedReply(failed);
    if (failed) return false;
    if (raw == nullptr) return true;  // nothing more buffered
    const RedisReply reply = CopyReply(raw.get());
    const auto payload = ReadMessage(reply, kSwitchMasterChannel);
    if (!payload) continue;
    const auto address = ReadSwitchMaster(*payload, settings_.master);
    if (!address) continue;  // another master's failover
    SentinelFinding finding = Verify(*address);
    if (!finding.address) resolve = true;  // not ready yet: ask again after the backoff
    found_(finding);
  }
}

void SentinelWatch::Run() {
  bool resolve = true;
  auto next_resolve = Clock::now();
  auto next_subscribe = Clock::now();
  std::chrono::milliseconds backoff = kRecheckGap;
  while (!stopping_.load()) {
    auto now = Clock::now();
    // Subscribed first, then asked: a failover between the two is not missed.
    if (sub_ == nullptr && now >= next_subscribe) {
      if (Subscribe()) {
        resolve = true;
      } else {
        next_subscribe = now + backoff;
      }
    }
    if (recheck_.load()) resolve = true;
    if (resolve && now >= next_resolve) {
      recheck_.store(false);  // what fails from here on asks again
      SentinelFinding finding = Resolve();
      resolve = !finding.address.has_value();
      found_(finding);
      now = Clock::now();
      next_resolve = now + (resolve ? backoff : kRecheckGap);
      backoff = resolve ? std::min(kMaxBackoff, backoff * 2) : kRecheckGap;
    }
    tidy_();
    auto until = Clock::time_point::max();
    if (resolve) until = std::min(until, next_resolve);
    if (sub_ == nullptr) until = std::min(until, next_subscribe);
    if (const int64_t by = wake_by_.exchange(0); by != 0) {
      until = std::min(until, Clock::time_point(Clock::duration(by)));
    }
    int timeout = -1;
    if (until != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
      timeout = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60'000));
    }
    std::array<pollfd, 2> fds = {pollfd{wake_fd_, POLLIN, 0},
                                 pollfd{sub_ != nullptr ? sub_->fd() : -1, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), timeout) < 0) continue;  // EINTR
    if ((fds[0].revents & POLLIN) != 0) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = read(wake_fd_, &count, sizeof(count));
    }
    if (recheck_.load()) resolve = true;
    if (fds[1].revents != 0 && !ReadSubscription(resolve)) {
      DropSubscription();
      next_subscribe = Clock::now();
      resolve = true;
    }
  }
}

}  // namespace sluice::internal
