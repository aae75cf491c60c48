#include "store/redis/sentinel_transport.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sluice::internal {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Whether a reply says the server is a replica now. Why no script ran there, or rather why none
// of it counted: sluice's scripts have no shebang flags, so Redis (7.0, and 6.x before it) runs
// them in "eval compatibility" mode. On a read-only replica (replica-read-only yes, the
// default) every write such a script attempts is refused with READONLY, and redis.call raises
// that refusal as a Lua error, which stops the script at its first write: no key is written,
// nothing is replicated, and the error reply carries "READONLY" (as its code in 7.0, inside
// "ERR Error running script ..." in 6.x). A script whose reply says READONLY therefore counted
// nothing anywhere; the call is failed like a connection error (failure_mode decides, degraded)
// and the sentinels are asked where the master went. The ROLE check keeps scripts from being
// sent to a known replica at all; READONLY covers the moments between a master's demotion and
// sluice learning of it (a connection re-made to the demoted server in that window).
bool SaysReadOnly(const Result<RedisReply>& reply) {
  return !reply && !IsConnectionError(reply.error()) &&
         reply.error().message.find("READONLY") != std::string::npos;
}

class SentinelTransport final : public RedisTransport {
 public:
  SentinelTransport(SentinelSettings settings, int connections, const NodeSettings& node)
      : name_("sentinel:" + settings.master),
        connections_(connections),
        node_(node),
        grace_(std::chrono::seconds(10) + 4 * (settings.master_template.connect_timeout +
                                               settings.master_template.command_timeout)) {
    watch_ = std::make_unique<SentinelWatch>(
        std::move(settings), [this](const SentinelFinding& f) { Found(f); }, [this] { Tidy(); });
    // Started once watch_ is set: `found` uses it.
    watch_->Start();
  }

  // The watch stops first: nothing replaces a transport after that. The transports go next,
  // while the watch (which their last callbacks may ask to Recheck) still exists.
  ~SentinelTransport() override {
    watch_->Stop();
    std::shared_ptr<RedisTransport> current;
    std::vector<Retired> retired;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current = std::move(current_);
      retired = std::move(retired_);
    }
  }

  Result<RedisReply> Eval(const LuaScript& script, std::span<const std::string> keys,
                          std::span<const std::string> args) override {
    auto t = Current();
    if (!t) return NoMaster();
    auto reply = t->Eval(script, keys, args);
    return Check(std::move(reply), t.get());
  }

  void EvalAsync(const LuaScript& script, std::vector<std::string> keys,
                 std::vector<std::string> args, PipelinedConnection::Callback done) override {
    auto t = Current();
    if (!t) return done(NoMaster());
    RedisTransport* raw = t.get();
    t->EvalAsync(script, std::move(keys), std::move(args),
                 [this, raw, done = std::move(done)](Result<RedisReply> reply) {
                   done(Check(std::move(reply), raw));
                 });
  }

  bool Refuses(std::string_view key) override {
    auto t = Current();
    return t && t->Refuses(key);
  }

  Result<RedisReply> Command(std::string_view key,
                             std::span<const std::string_view> args) override {
    auto t = Current();
    if (!t) return NoMaster();
    return Check(t->Command(key, args), t.get());
  }

  TransportStats Stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    TransportStats s = gone_;
    if (current_) Add(s, current_->Stats());
    for (const auto& r : retired_) Add(s, r.transport->Stats());
    return s;
  }

  void Monitor() override {
    if (auto t = Current()) t->Monitor();
  }
  EvictionState Eviction() const override {
    auto t = Current();
    return t ? t->Eviction() : EvictionState{};
  }

  bool OnIoThread() const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ && current_->OnIoThread()) return true;
    return std::any_of(retired_.begin(), retired_.end(),
                       [](const Retired& r) { return r.transport->OnIoThread(); });
  }

 private:
  // A transport to a master no longer trusted. Destroyed on the watch's thread once nothing
  // holds it and `grace_` has passed: by then every call queued on it has been answered (each
  // is bounded by the timeouts), so destroying it runs no caller's callback (which could hold
  // the last reference to the store).
  struct Retired {
    std::shared_ptr<RedisTransport> transport;
    SteadyClock::time_point since;
  };

  static void Add(TransportStats& to, const TransportStats& s) {
    to.requests += s.requests;
    to.batches += s.batches;
    to.redirects += s.redirects;
    to.retries += s.retries;
    to.map_refreshes += s.map_refreshes;
    to.short_circuited += s.short_circuited;
    to.connection_errors += s.connection_errors;
  }

  std::shared_ptr<RedisTransport> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }

  Result<RedisReply> NoMaster() {
    watch_->Recheck();
    return MakeError(std::string(kConnectionErrorPrefix) + name_ + ": no master to trust yet");
  }

  // A connection failure or a READONLY reply: ask the sentinels again. A READONLY server is a
  // replica now: no script goes there any more.
  Result<RedisReply> Check(Result<RedisReply> reply, RedisTransport* from) {
    if (reply) return reply;
    if (SaysReadOnly(reply)) {
      Distrust(from);
      watch_->Recheck();
      return MakeError(std::string(kConnectionErrorPrefix) + name_ +
                       ": the master is a replica now (" + reply.error().message + ")");
    }
    if (IsConnectionError(reply.error()) && !IsShortCircuit(reply.error())) watch_->Recheck();
    return reply;
  }

  void Distrust(RedisTransport* t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_.get() != t) return;
    RetireLocked();
    TellOnce("master " + address_.Name() + " answered READONLY");
  }

  void RetireLocked() {
    if (current_) retired_.push_back({std::move(current_), SteadyClock::now()});
    current_.reset();
    watch_->WakeBy(SteadyClock::now() + grace_);
  }

  void Found(const SentinelFinding& f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!f.address) {
      // Unreachable: the master known may still be the master (a blip, or a failover not yet
      // done); its connections keep trying. Not a master: nothing goes there.
      if (!f.unreachable && current_) RetireLocked();
      if (!f.unreachable || !current_) TellOnce(f.why);
      return;
    }
    told_.clear();
    if (current_ && address_ == *f.address) return;
    const RedisEndpoint e = watch_->settings().MasterAt(*f.address);
    const bool moved = current_ || address_.port != 0;
    const std::string was = address_.Name();
    RetireLocked();
    current_ = MakeStandaloneTransport(e, connections_, node_);
    address_ = *f.address;
    Tell(RedisEventKind::kConnected,
         "master " + address_.Name() + (moved ? " (was " + was + ")" : std::string()));
  }

  void Tidy() {
    std::vector<std::shared_ptr<RedisTransport>> doomed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = SteadyClock::now();
      auto keep = std::partition(retired_.begin(), retired_.end(), [&](const Retired& r) {
        return r.transport.use_count() > 1 || now - r.since < grace_;
      });
      for (auto it = keep; it != retired_.end(); ++it) {
        Add(gone_, it->transport->Stats());
        doomed.push_back(std::move(it->transport));
      }
      retired_.erase(keep, retired_.end());
      if (!retired_.empty()) watch_->WakeBy(now + std::chrono::seconds(1));
    }
    doomed.clear();  // joins their I/O threads, outside the lock
  }

  // Why there is no master to use, told when it differs from the last time (guarded by mu_): the
  // watch asks again every second while it lasts, and a refused certificate, a wrong password
  // or a sentinel that names no master is one state, logged once with its reason.
  void TellOnce(const std::string& why) {
    if (why == told_) return;
    told_ = why;
    Tell(RedisEventKind::kConnectionLost, why);
  }

  void Tell(RedisEventKind kind, const std::string& what) {
    if (node_.events != nullptr) {
      (*node_.events)(RedisEvent{kind, name_, "redis " + name_ + ": " + what, false, 0});
    }
  }

  const std::string name_;
  const int connections_;
  const NodeSettings node_;
  const SteadyClock::duration grace_;
  mutable std::mutex mu_;
  std::shared_ptr<RedisTransport> current_;  // guarded by mu_; null: no master to trust
  MasterAddress address_;                    // guarded by mu_: current_'s, or the last one's
  std::vector<Retired> retired_;             // guarded by mu_
  TransportStats gone_;                      // guarded by mu_: destroyed transports' counts
  std::string told_;                         // guarded by mu_: TellOnce's last
  std::unique_ptr<SentinelWatch> watch_;
};

}  // namespace

std::unique_ptr<RedisTransport> MakeSentinelTransport(SentinelSettings settings, int connections,
                                                      NodeSettings node) {
  return std::make_unique<SentinelTransport>(std::move(settings), connections, node);
}

}  // namespace sluice::internal
