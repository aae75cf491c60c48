#include "store/redis/sentinel.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <utility>

#include "store/redis/redis_reply.h"

namespace sluice::internal {
namespace {

using Clock = std::chrono::steady_clock;

struct FreeContext {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, FreeContext>;

timeval ToTimeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

Result<RedisReply> Command(redisContext* ctx, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (r == nullptr) return MakeError(ctx->errstr[0] != '\0' ? ctx->errstr : "connection lost");
  std::unique_ptr<redisReply, decltype(&freeReplyObject)> owned(r, &freeReplyObject);
  if (r->type == REDIS_REPLY_ERROR) return MakeError(std::string(r->str, r->len));
  return CopyReply(r);
}

// A synchronous connection for one question, every step bounded by `timeout`, authenticated
// with the endpoint's credentials. (The one place a TLS handshake would go for the sentinels
// and the ROLE check.)
Result<Context> Open(const RedisEndpoint& e, std::chrono::milliseconds timeout) {
  Context ctx(redisConnectWithTimeout(e.host.c_str(), e.port, ToTimeval(timeout)));
  if (!ctx) return MakeError(e.Name() + ": out of memory");
  if (ctx->err != 0) return MakeError(e.Name() + ": " + ctx->errstr);
  BoundReplies(ctx->reader);
  redisSetTimeout(ctx.get(), ToTimeval(timeout));
  if (!e.password.empty()) {
    auto auth = e.user.empty() ? Command(ctx.get(), {"AUTH", e.password})
                               : Command(ctx.get(), {"AUTH", e.user, e.password});
    if (!auth) return MakeError(e.Name() + ": authentication failed: " + auth.error().message);
  }
  return ctx;
}

}  // namespace

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
  RedisEndpoint e = settings_.master_template;
  e.host = address.host;
  e.port = address.port;
  auto ctx = Open(e, e.connect_timeout);
  if (!ctx) return {std::nullopt, true, "master " + ctx.error().message};
  auto role = Command(ctx->get(), {"ROLE"});
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
    auto ctx = Open(s, s.connect_timeout);
    if (!ctx) {
      why = "sentinel " + ctx.error().message;
      continue;
    }
    auto reply = Command(ctx->get(), {"SENTINEL", "get-master-addr-by-name", settings_.master});
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
    auto ctx = Open(s, s.connect_timeout);
    if (!ctx) continue;
    auto reply = Command(ctx->get(), {"SUBSCRIBE", kSwitchMasterChannel});
    if (!reply) continue;
    // A silent peer (its host gone) is found by TCP keepalive; the thread only waits in poll().
    redisEnableKeepAlive(ctx->get());
    sub_ = ctx->release();
    next_sentinel_ = i;
    return true;
  }
  return false;
}

void SentinelWatch::DropSubscription() {
  if (sub_ != nullptr) redisFree(sub_);
  sub_ = nullptr;
}

bool SentinelWatch::ReadSubscription(bool& resolve) {
  if (redisBufferRead(sub_) != REDIS_OK) return false;
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(sub_, &raw) != REDIS_OK) return false;
    if (raw == nullptr) return true;  // nothing more buffered
    const RedisReply reply = CopyReply(static_cast<const redisReply*>(raw));
    freeReplyObject(raw);
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
                                 pollfd{sub_ != nullptr ? sub_->fd : -1, POLLIN, 0}};
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
