#include "sluice/client/client.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "client/check_codec.h"
#include "client/http_connection.h"

namespace sluice::client {

class Client::Impl {
 public:
  Impl(const ClientOptions& options, const SocketAddress& address, const Clock& clock)
      : options_(options), address_(address), clock_(clock) {}

  ~Impl() {
    {
      std::lock_guard lock(queue_mu_);
      stopping_ = true;
    }
    queue_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  Result<CheckResponse> Check(const CheckRequest& request) {
    Count(&ClientStats::calls);
    const Timestamp start = clock_.Now();
    const std::string body = EncodeCheckRequest(request);
    const bool cacheable = !request.charge && options_.cache_max_entries > 0;
    if (cacheable) {
      if (auto cached = FromCache(body, start)) return *cached;
    }
    auto answer = Call(body, start + options_.deadline);
    if (!answer) {
      if (answer.error().message.rfind(kRefused, 0) == 0) return std::unexpected(answer.error());
      Count(&ClientStats::failure_answers);
      CheckResponse failed;
      failed.allowed = options_.failure_mode == FailureMode::kOpen;
      failed.source = Source::kFailureMode;
      failed.error = answer.error().message;
      return failed;
    }
    if (cacheable && !answer->allowed && answer->retry_after &&
        *answer->retry_after > Duration{0}) {
      Remember(body, clock_.Now() + *answer->retry_after);
    }
    return answer;
  }

  std::future<Result<CheckResponse>> CheckAsync(CheckRequest request) {
    auto task = std::make_shared<std::packaged_task<Result<CheckResponse>()>>(
        [this, request = std::move(request)] { return Check(request); });
    auto future = task->get_future();
    {
      std::lock_guard lock(queue_mu_);
      // Workers start with the first asynchronous call: a blocking-only client has none.
      if (workers_.empty()) {
        for (int i = 0; i < options_.max_connections; ++i)
          workers_.emplace_back([this] { Work(); });
      }
      queue_.push_back([task] { (*task)(); });
    }
    queue_cv_.notify_one();
    return future;
  }

  ClientStats Stats() const {
    std::lock_guard lock(stats_mu_);
    return stats_;
  }

 private:
  static constexpr std::string_view kRefused = "sluiced refused the request: ";

  void Count(uint64_t ClientStats::*field) {
    std::lock_guard lock(stats_mu_);
    ++(stats_.*field);
  }

  void Work() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock lock(queue_mu_);
        queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and every queued call answered
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }

  std::optional<CheckResponse> FromCache(const std::string& key, Timestamp now) {
    std::lock_guard lock(cache_mu_);
    auto it = cache_.find(key);
    if (it == cache_.end()) return std::nullopt;
    if (now >= it->second) {
      cache_.erase(it);
      return std::nullopt;
    }
    CheckResponse r;
    r.allowed = false;
    r.source = Source::kCache;
    r.retry_after = it->second - now;
    {
      std::lock_guard stats_lock(stats_mu_);
      ++stats_.cache_answers;
    }
    return r;
  }

  void Remember(const std::string& key, Timestamp until) {
    std::lock_guard lock(cache_mu_);
    if (cache_.size() >= options_.cache_max_entries && !cache_.contains(key)) {
      // Full: drop what has expired; if nothing has, the entry that expires first.
      const Timestamp now = clock_.Now();
      std::erase_if(cache_, [now](const auto& e) { return e.second <= now; });
      if (cache_.size() >= options_.cache_max_entries) {
        auto first = cache_.begin();
        for (auto it = cache_.begin(); it != cache_.end(); ++it) {
          if (it->second < first->second) first = it;
        }
        cache_.erase(first);
      }
    }
    Timestamp& slot = cache_[key];
    slot = std::max(slot, until);
  }

  std::optional<HttpConnection> TakeIdle() {
    std::lock_guard lock(pool_mu_);
    if (idle_.empty()) return std::nullopt;
    HttpConnection c = std::move(idle_.back());
    idle_.pop_back();
    return c;
  }

  void GiveBack(HttpConnection c) {
    std::lock_guard lock(pool_mu_);
    if (idle_.size() < static_cast<size_t>(options_.max_connections)) idle_.push_back(std::move(c));
  }

  Result<CheckResponse> Call(const std::string& body, Timestamp deadline) {
    std::string request =
        "POST /v1/check HTTP/1.1\r\nHost: sluiced\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    // A kept-alive connection sluiced has closed in the meantime fails before any answer; the
    // request then goes once more on a new connection (sluiced never saw it).
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::optional<HttpConnection> c = attempt == 0 ? TakeIdle() : std::nullopt;
      const bool reused = c.has_value();
      if (!c) {
        auto fresh = HttpConnection::Connect(address_, deadline, clock_);
        if (!fresh) return std::unexpected(fresh.error());
        Count(&ClientStats::connections_opened);
        c.emplace(std::move(*fresh));
      }
      bool silent = false;
      auto response = c->RoundTrip(request, deadline, clock_, &silent);
      if (!response) {
        if (reused && silent) continue;
        return std::unexpected(response.error());
      }
      if (response->keep_alive) GiveBack(std::move(*c));
      if (response->status == 200 || response->status == 429) {
        return DecodeCheckAnswer(response->body);
      }
      // 4xx (400 a malformed check or unknown domain, 413 a body over sluiced's cap): the
      // request's own fault, which neither a retry nor the failure mode would mend.
      if (response->status >= 400 && response->status < 500) {
        return MakeError(std::string(kRefused) + std::to_string(response->status) + ": " +
                         DecodeErrorMessage(response->body));
      }
      return MakeError("sluiced answered " + std::to_string(response->status) + ": " +
                       DecodeErrorMessage(response->body));
    }
    return MakeError("sluiced closed the connection");
  }

  const ClientOptions options_;
  const SocketAddress address_;
  const Clock& clock_;

  std::mutex pool_mu_;
  std::vector<HttpConnection> idle_;

  std::mutex cache_mu_;
  std::unordered_map<std::string, Timestamp> cache_;

  mutable std::mutex stats_mu_;
  ClientStats stats_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

Result<std::unique_ptr<Client>> Client::Create(const ClientOptions& options, const Clock& clock) {
  auto address = ParseSocketAddress(options.host, options.port);
  if (!address) return std::unexpected(address.error());
  if (options.deadline <= Duration{0}) return MakeError("deadline must be positive");
  if (options.max_connections < 1) return MakeError("max_connections must be at least 1");
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(options, *address, clock)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<CheckResponse> Client::Check(const CheckRequest& request) { return impl_->Check(request); }

std::future<Result<CheckResponse>> Client::CheckAsync(CheckRequest request) {
  return impl_->CheckAsync(std::move(request));
}

ClientStats Client::Stats() const { return impl_->Stats(); }

}  // namespace sluice::client
