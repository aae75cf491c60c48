#include "sluice/client/client.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "client/check_codec.h"
#include "client/http_connection.h"

namespace sluice::client {

// A held permit. token, owner and release are set before it is shared; sent, ttl and retry_at
// belong to the renewer thread once the permit is registered.
struct Permit::State {
  std::string token;
  std::function<Result<bool>(State&)> release;  // the client's; unregisters, then calls sluiced
  Timestamp sent;      // when the acquire or last successful renew was sent (client clock)
  Duration ttl{0};     // its permit_ttl as sluiced gave it
  Timestamp retry_at;  // after a renew that could not reach sluiced
  std::atomic<bool> lost{false};
  std::atomic<bool> released{false};
  std::atomic<uint64_t> renewals{0};
};

Permit::~Permit() {
  if (state_ != nullptr) (void)Release();
}
Permit::Permit(Permit&& other) noexcept : state_(std::move(other.state_)) {}
Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) (void)Release();
    state_ = std::move(other.state_);
  }
  return *this;
}
bool Permit::held() const {
  return state_ != nullptr && !state_->lost.load() && !state_->released.load();
}
const std::string& Permit::token() const {
  static const std::string kNone;
  return state_ != nullptr ? state_->token : kNone;
}
uint64_t Permit::renewals() const { return state_ != nullptr ? state_->renewals.load() : 0; }
Result<bool> Permit::Release() {
  if (state_ == nullptr) return false;
  std::shared_ptr<State> state = std::move(state_);
  if (state->released.exchange(true)) return false;
  return state->release(*state);
}

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
    {
      std::lock_guard lock(permits_mu_);
      stopping_renewer_ = true;
    }
    permits_cv_.notify_all();
    if (renewer_.joinable()) renewer_.join();
  }

  Result<AcquireResponse> Acquire(const CheckRequest& request) {
    Count(&ClientStats::calls);
    const Timestamp sent = clock_.Now();
    auto response = Exchange("/v1/acquire", EncodeCheckRequest(request), sent + options_.deadline);
    AcquireResponse out;
    if (!response || (response->status != 200 && response->status != 429 &&
                      (response->status < 400 || response->status >= 500))) {
      Count(&ClientStats::failure_answers);
      out.allowed = options_.failure_mode == FailureMode::kOpen;
      out.source = Source::kFailureMode;
      out.error = response ? "sluiced answered " + std::to_string(response->status)
                           : response.error().message;
      return out;
    }
    if (response->status != 200 && response->status != 429) {
      return MakeError(std::string(kRefused) + std::to_string(response->status) + ": " +
                       DecodeErrorMessage(response->body));
    }
    auto check = DecodeCheckAnswer(response->body);
    auto permit = DecodeAcquirePermit(response->body);
    if (!check || !permit) return MakeError("the answer is not an acquire answer");
    out.allowed = check->allowed;
    out.retry_after = check->retry_after;
    out.statuses = std::move(check->statuses);
    out.permit_ttl = permit->ttl;
    if (out.allowed && !permit->token.empty()) out.permit = Hold(permit->token, sent, permit->ttl);
    return out;
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

  // The permit's TTL counts from `sent` on this client's clock: before sluiced decided, so the
  // permit is inside sluiced's live set whatever the clocks' offsets (docs/load-protection.md).
  Permit Hold(const std::string& token, Timestamp sent, Duration ttl) {
    auto state = std::make_shared<Permit::State>();
    state->token = token;
    state->sent = sent;
    state->ttl = ttl;
    state->retry_at = sent;
    state->release = [this](Permit::State& s) { return ReleasePermit(s); };
    {
      std::lock_guard lock(permits_mu_);
      held_.emplace(state.get(), state);
      if (!renewer_.joinable()) renewer_ = std::thread([this] { Renew(); });
    }
    permits_cv_.notify_all();
    return Permit(std::move(state));
  }

  Result<bool> ReleasePermit(Permit::State& s) {
    {
      std::lock_guard lock(permits_mu_);
      held_.erase(&s);
    }
    if (s.lost.load()) return false;
    const Timestamp now = clock_.Now();
    auto r = Exchange("/v1/release", EncodePermitBody(s.token), now + options_.deadline);
    if (!r) return std::unexpected(r.error());
    if (r->status != 200) {
      return MakeError("sluiced answered " + std::to_string(r->status) + ": " +
                       DecodeErrorMessage(r->body));
    }
    auto outcome = DecodePermitOutcome(r->body, "released");
    if (!outcome) return std::unexpected(outcome.error());
    return outcome->done;
  }

  // When a held permit is next renewed: a third of its TTL after it was sent, or a retry.
  static Timestamp DueAt(const Permit::State& s) {
    return std::max(s.sent + s.ttl / 3, s.retry_at);
  }

  // The renewer: wakes when the earliest permit is due (waiting in real time for what the clock
  // says remains, at most 100 ms at once), renews the due ones outside the lock.
  void Renew() {
    std::unique_lock lock(permits_mu_);
    while (!stopping_renewer_) {
      const Timestamp now = clock_.Now();
      Timestamp next = now + std::chrono::milliseconds(100);
      std::vector<std::shared_ptr<Permit::State>> due;
      for (const auto& [key, s] : held_) {
        const Timestamp at = DueAt(*s);
        if (at <= now) {
          due.push_back(s);
        } else {
          next = std::min(next, at);
        }
      }
      if (due.empty()) {
        permits_cv_.wait_for(lock, next - now);
        continue;
      }
      lock.unlock();
      for (const auto& s : due) RenewOne(*s);
      lock.lock();
    }
  }

  void RenewOne(Permit::State& s) {
    const Timestamp sent = clock_.Now();
    auto r = Exchange("/v1/renew", EncodePermitBody(s.token), sent + options_.deadline);
    auto outcome = r && r->status == 200 ? DecodePermitOutcome(r->body, "renewed")
                                         : Result<PermitOutcome>(MakeError("unreachable"));
    if (outcome && outcome->done) {
      s.sent = sent;
      s.ttl = outcome->ttl;
      s.retry_at = sent;
      s.renewals.fetch_add(1);
      return;
    }
    // sluiced no longer holds it, or it could not be asked and the TTL has run out here: the
    // slots may be someone else's now.
    if (outcome || clock_.Now() >= s.sent + s.ttl) {
      s.lost.store(true);
      std::lock_guard lock(permits_mu_);
      held_.erase(&s);
      return;
    }
    s.retry_at = clock_.Now() + s.ttl / 10;
  }

  Result<CheckResponse> Call(const std::string& body, Timestamp deadline) {
    auto response = Exchange("/v1/check", body, deadline);
    if (!response) return std::unexpected(response.error());
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

  // One POST on a kept-alive connection, or a new one.
  Result<HttpResponse> Exchange(std::string_view path, const std::string& body,
                                Timestamp deadline) {
    std::string request = "POST " + std::string(path) +
                          " HTTP/1.1\r\nHost: sluiced\r\n"
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
      return std::move(*response);
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

  std::mutex permits_mu_;
  std::condition_variable permits_cv_;
  std::unordered_map<Permit::State*, std::shared_ptr<Permit::State>> held_;  // being renewed
  std::thread renewer_;  // started with the first permit
  bool stopping_renewer_ = false;
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

Result<AcquireResponse> Client::Acquire(const CheckRequest& request) {
  return impl_->Acquire(request);
}

ClientStats Client::Stats() const { return impl_->Stats(); }

}  // namespace sluice::client
