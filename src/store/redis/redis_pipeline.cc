#include "store/redis/redis_pipeline.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "store/redis/redis_connection.h"
#include "store/redis/redis_reply.h"

namespace sluice::internal {
namespace {

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
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

void PipelinedConnection::Disconnect() { conn_.reset(); }

bool PipelinedConnection::EnsureConnected(std::string& why, bool ignore_backoff,
                                          std::chrono::steady_clock::time_point now) {
  if (conn_ != nullptr) {
    if (now - last_answered_ < kFreshFor || conn_->StillOpen()) return true;
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
  auto opened = RedisConnection::Open(endpoint_);
  if (!opened) return fail(opened.error().message, opened.error().refused);
  conn_ = std::move(*opened);
  bool answered = false;
  auto setup = [&](std::vector<std::string> args) -> std::string {
    bool io_failed = false;
    auto r = conn_->Command(args, &io_failed);
    answered = !io_failed;  // else an I/O error or a timeout: not a refusal
    if (r) return std::string();
    return args[0] + ": " + (io_failed ? conn_->error() : r.error().message);
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
  out_.clear();
  for (const Op& op : batch) out_ += op.commands;
  const bool ok = conn_->Write(out_, sent_nothing);
  if (out_.capacity() > (size_t{1} << 20)) std::string().swap(out_);  // a rare giant batch
  return ok;
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
      if (conn_ != nullptr) {
        why = std::string(kConnectionErrorPrefix) + endpoint_.Name() + ": " +
              (conn_->error().empty() ? "write failed" : conn_->error());
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
        const RedisReplyPtr reply = conn_->ReadReply();
        if (reply == nullptr) {
          io_failed = true;
          break;
        }
        const redisReply* r = reply.get();
        if (r->type == REDIS_REPLY_ERROR) {
          if (result) result = MakeError(std::string(r->str, r->len));
        } else if (k == batch[i].count - 1 && result) {
          result = CopyReply(r);
        }
      }
      if (io_failed) {
        // The stream is out of step (timeout) or gone: fail the rest and start again.
        const std::string message = std::string(kConnectionErrorPrefix) + endpoint_.Name() + ": " +
                                    (conn_->error().empty() ? "connection lost" : conn_->error());
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
