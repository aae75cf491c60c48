#include "store/redis/redis_pipeline.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "store/redis/redis_reply.h"

namespace sluice::internal {
namespace {

timeval ToTimeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

// Whether a connected socket with nothing outstanding is still open: Redis sends nothing
// unasked (no pub/sub here), so anything to read -- EOF, an error, a farewell message -- means
// Redis closed it or is closing it. One poll without waiting.
bool StillOpen(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) == 0;
}

}  // namespace

void AppendCommand(std::string& out, std::span<const std::string_view> args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (std::string_view a : args) {
    out += '$';
    out += std::to_string(a.size());
    out += "\r\n";
    out.append(a);
    out += "\r\n";
  }
}

PipelinedConnection::PipelinedConnection(RedisEndpoint endpoint)
    : endpoint_(std::move(endpoint)),
      jitter_state_(
          reinterpret_cast<uintptr_t>(this) ^
          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())),
      io_([this] { Run(); }) {}

PipelinedConnection::~PipelinedConnection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  io_.join();
  Disconnect();
}

Result<RedisReply> PipelinedConnection::Call(std::string commands, int count, bool background) {
  std::mutex done_mu;
  std::condition_variable done_cv;
  std::optional<Result<RedisReply>> result;
  CallAsync(
      std::move(commands), count,
      [&](Result<RedisReply> reply) {
        std::lock_guard<std::mutex> lock(done_mu);
        result = std::move(reply);
        done_cv.notify_one();
      },
      background);
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return result.has_value(); });
  return std::move(*result);
}

void PipelinedConnection::CallAsync(std::string commands, int count, Callback done,
                                    bool background) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(Op{std::move(commands), count, std::move(done), background});
      wake_.notify_one();
      return;
    }
  }
  done(MakeError(std::string(kConnectionErrorPrefix) + "shutting down"));
}

// The callback goes as soon as it has answered, not with its batch at the thread's next wake: what
// it holds (a caller's capture: limiters, the store and its layers) must not outlive the answer by
// an idle connection's sleep. Dropping it may destroy the store; see RedisStoreImpl's deleter.
void PipelinedConnection::Answer(Op& op, Result<RedisReply> result) {
  Callback done = std::exchange(op.done, nullptr);
  done(std::move(result));
}

void PipelinedConnection::Disconnect() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

bool PipelinedConnection::EnsureConnected(std::string& why, bool ignore_backoff,
                                          std::chrono::steady_clock::time_point now) {
  if (ctx_ != nullptr) {
    if (now - last_answered_ < kFreshFor || StillOpen(ctx_->fd)) return true;
    Disconnect();  // closed by Redis while idle: re-made below, before anything is sent
  }
  const std::string prefix = std::string(kConnectionErrorPrefix) + endpoint_.Name() + ": ";
  if (!ignore_backoff && now < next_connect_) {
    why = prefix + (fast_failure_ ? std::string(kRefusedAtOnceText) : std::string()) +
          "unreachable (reconnecting with backoff)";
    return false;
  }
  // A refusal (connection refused, credentials refused) came at once: the next try is paced at
  // min_backoff, not doubled, so a request soon after Redis is back gets a real answer, while
  // a dead Redis still sees at most one try per connection per min_backoff. A slow failure (a
  // connect timeout) backs off, doubling, as before.
  auto fail = [&](const std::string& message, bool at_once) {
    Disconnect();
    fast_failure_ = at_once;
    why = prefix + (at_once ? std::string(kRefusedAtOnceText) : std::string()) + message;
    if (ignore_backoff) return false;  // the monitor's tries keep their own pace
    backoff_ = at_once || backoff_.count() == 0 ? endpoint_.min_backoff
                                                : std::min(endpoint_.max_backoff, backoff_ * 2);
    // Full backoff, less up to half of it at random, so many clients do not retry in step.
    const auto half = std::max<int64_t>(1, backoff_.count() / 2);
    const auto wait = backoff_ - std::chrono::milliseconds(SplitMix(jitter_state_) % half);
    next_connect_ = now + wait;
    return false;
  };
  ctx_ = endpoint_.unix_path.empty()
             ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port,
                                       ToTimeval(endpoint_.connect_timeout))
             : redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(),
                                           ToTimeval(endpoint_.connect_timeout));
  if (ctx_ == nullptr) return fail("out of memory", false);
  if (ctx_->err != 0) {
    const std::string error = ctx_->errstr;
    // A Unix socket that is not there (Redis down, its file removed) fails at once too.
    const bool at_once =
        error.find("refused") != std::string::npos ||
        (!endpoint_.unix_path.empty() && error.find("No such file") != std::string::npos);
    return fail(error, at_once);
  }
  BoundReplies(ctx_->reader);
  redisSetTimeout(ctx_, ToTimeval(endpoint_.command_timeout));
  bool answered = false;
  auto setup = [&](std::vector<std::string> args) -> std::string {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    answered = r != nullptr;  // else an I/O error or a timeout: not a refusal
    if (r == nullptr) return args[0] + ": " + ctx_->errstr;
    std::string err =
        r->type == REDIS_REPLY_ERROR ? args[0] + ": " + std::string(r->str, r->len) : std::string();
    freeReplyObject(r);
    return err;
  };
  if (!endpoint_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!endpoint_.user.empty()) auth.push_back(endpoint_.user);
    auth.push_back(endpoint_.password);
    if (std::string err = setup(std::move(auth)); !err.empty()) {
      return fail(std::string(kAuthFailedText) + err, answered);
    }
  }
  if (endpoint_.db != 0) {
    if (std::string err = setup({"SELECT", std::to_string(endpoint_.db)}); !err.empty()) {
      return fail(err, answered);
    }
  }
  fast_failure_ = false;
  backoff_ = std::chrono::milliseconds(0);
  next_connect_ = {};
  return true;
}

bool PipelinedConnection::Write(const std::vector<Op>& batch, bool& sent_nothing) {
  for (const Op& op : batch) {
    redisAppendFormattedCommand(ctx_, op.commands.data(), op.commands.size());
  }
  // hiredis writes with one write() per call and keeps what was not written: a failure on the
  // first call means no byte of this batch left.
  sent_nothing = true;
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) return false;
    sent_nothing = false;
  }
  return true;
}

void PipelinedConnection::Run() {
  std::vector<Op> batch;
  batch.reserve(kMaxBatch);
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything answered
      const size_t n = std::min(queue_.size(), kMaxBatch);
      batch.clear();
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stopping = stopping_;
    }
    std::string why;
    if (stopping) why = std::string(kConnectionErrorPrefix) + "shutting down";
    const bool background =
        std::any_of(batch.begin(), batch.end(), [](const Op& op) { return op.background; });
    const auto now = std::chrono::steady_clock::now();
    if (stopping || !EnsureConnected(why, background, now)) {
      for (Op& op : batch) Answer(op, MakeError(why));
      continue;
    }
    bool sent_nothing = false;
    bool written = Write(batch, sent_nothing);
    if (!written && sent_nothing) {
      // Nothing reached Redis: once more on a fresh connection.
      Disconnect();
      written = EnsureConnected(why, /*ignore_backoff=*/true, now) && Write(batch, sent_nothing);
    }
    if (!written) {
      if (ctx_ != nullptr) {
        why = std::string(kConnectionErrorPrefix) + endpoint_.Name() + ": " +
              (ctx_->errstr[0] != '\0' ? ctx_->errstr : "write failed");
      }
      for (Op& op : batch) Answer(op, MakeError(why));
      Disconnect();
      continue;
    }
    const size_t counted = static_cast<size_t>(
        std::count_if(batch.begin(), batch.end(), [](const Op& op) { return !op.background; }));
    if (counted > 0) {
      batches_sent_.fetch_add(1, std::memory_order_relaxed);
      requests_sent_.fetch_add(counted, std::memory_order_relaxed);
    }
    uint64_t answered = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      Result<RedisReply> result = RedisReply{};
      bool io_failed = false;
      for (int k = 0; k < batch[i].count; ++k) {
        void* raw = nullptr;
        if (redisGetReply(ctx_, &raw) != REDIS_OK) {
          io_failed = true;
          break;
        }
        const auto* r = static_cast<const redisReply*>(raw);
        if (r->type == REDIS_REPLY_ERROR) {
          if (result) result = MakeError(std::string(r->str, r->len));
        } else if (k == batch[i].count - 1 && result) {
          result = CopyReply(r);
        }
        freeReplyObject(raw);
      }
      if (io_failed) {
        // The stream is out of step (timeout) or gone: fail the rest and start again.
        const std::string message = std::string(kConnectionErrorPrefix) + endpoint_.Name() + ": " +
                                    (ctx_->errstr[0] != '\0' ? ctx_->errstr : "connection lost");
        for (size_t j = i; j < batch.size(); ++j) Answer(batch[j], MakeError(message));
        Disconnect();
        break;
      }
      ++answered;
      Answer(batch[i], std::move(result));
    }
    if (answered > 0) answers_.fetch_add(answered, std::memory_order_relaxed);
    if (answered == batch.size()) last_answered_ = now;
  }
}

}  // namespace sluice::internal
