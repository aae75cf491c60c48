#include "store/redis/redis_transport.h"

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "store/redis/crc16.h"
#include "store/redis/redis_reply.h"

namespace sluice::internal {
namespace {

constexpr int kSlots = 16384;

// A few pipelined connections to one server, used round robin, behind the server's breaker.
class RedisNode {
 public:
  RedisNode(const RedisEndpoint& endpoint, int connections, const BreakerSettings& breaker)
      : endpoint_(endpoint), clock_(*breaker.clock), breaker_(breaker.options) {
    for (int i = 0; i < std::max(1, connections); ++i) {
      connections_.push_back(std::make_unique<PipelinedConnection>(endpoint));
    }
  }

  Result<RedisReply> Call(std::string commands, int count = 1) {
    if (!breaker_.Allow(clock_.Now())) {
      short_circuited_.fetch_add(1, std::memory_order_relaxed);
      return MakeError(std::string(kCircuitOpenMessage) + ": " + endpoint_.Name());
    }
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % connections_.size();
    auto reply = connections_[i]->Call(std::move(commands), count);
    Observe(reply);
    return reply;
  }

  // A Redis error reply is an answer: the server is alive. Only I/O errors and timeouts count.
  void Observe(const Result<RedisReply>& reply) {
    if (!reply && IsConnectionError(reply.error())) {
      connection_errors_.fetch_add(1, std::memory_order_relaxed);
      breaker_.OnFailure(clock_.Now());
    } else {
      breaker_.OnSuccess();
    }
  }

  void CallAsync(std::string commands, int count, PipelinedConnection::Callback done) {
    if (!breaker_.Allow(clock_.Now())) {
      short_circuited_.fetch_add(1, std::memory_order_relaxed);
      done(MakeError(std::string(kCircuitOpenMessage) + ": " + endpoint_.Name()));
      return;
    }
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % connections_.size();
    connections_[i]->CallAsync(std::move(commands), count,
                               [this, done = std::move(done)](Result<RedisReply> reply) {
                                 Observe(reply);
                                 done(std::move(reply));
                               });
  }

  Result<RedisReply> Command(std::span<const std::string_view> args) {
    std::string resp;
    AppendCommand(resp, args);
    return Call(std::move(resp));
  }

  bool Refuses() const { return breaker_.Refuses(clock_.Now()); }

  const RedisEndpoint& endpoint() const { return endpoint_; }

  void AddStats(TransportStats& s) const {
    for (const auto& c : connections_) {
      s.requests += c->requests_sent();
      s.batches += c->batches_sent();
    }
    s.short_circuited += short_circuited_.load(std::memory_order_relaxed);
    s.connection_errors += connection_errors_.load(std::memory_order_relaxed);
  }

 private:
  const RedisEndpoint endpoint_;
  const Clock& clock_;
  CircuitBreaker breaker_;
  std::vector<std::unique_ptr<PipelinedConnection>> connections_;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> short_circuited_{0};
  std::atomic<uint64_t> connection_errors_{0};
};

// "<verb> <script or sha> <number of keys> keys... args..." in RESP.
std::string EvalCommand(std::string_view verb, std::string_view script,
                        std::span<const std::string> keys, std::span<const std::string> args) {
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  const std::string nkeys = std::to_string(keys.size());
  argv.push_back(verb);
  argv.push_back(script);
  argv.push_back(nkeys);
  for (const std::string& k : keys) argv.push_back(k);
  for (const std::string& a : args) argv.push_back(a);
  std::string resp;
  AppendCommand(resp, argv);
  return resp;
}

// The SHA1 of each script, learnt from SCRIPT LOAD; the same on every node.
class ScriptRunner {
 public:
  Result<RedisReply> Eval(RedisNode& node, const LuaScript& script,
                          std::span<const std::string> keys, std::span<const std::string> args,
                          bool asking) {
    std::string sha = Known(script);
    if (sha.empty()) {
      auto loaded = Load(node, script);
      if (!loaded) return std::unexpected(loaded.error());
      sha = std::move(*loaded);
    }
    for (int attempt = 0;; ++attempt) {
      std::string resp;
      if (asking) AppendCommand(resp, std::array<std::string_view, 1>{"ASKING"});
      resp += EvalCommand("EVALSHA", sha, keys, args);
      auto reply = node.Call(std::move(resp), asking ? 2 : 1);
      if (reply || attempt > 0 || !reply.error().message.starts_with("NOSCRIPT")) return reply;
      if (auto loaded = Load(node, script); !loaded) return std::unexpected(loaded.error());
    }
  }

  // Asynchronous: nothing here may wait for a reply (it may run on an I/O thread). A script
  // not loaded yet is loaded first (SCRIPT LOAD, then EVALSHA from its callback); a server that
  // lost it (NOSCRIPT) gets the whole script once by EVAL, which also caches it there.
  void EvalAsync(RedisNode& node, const LuaScript& script, std::vector<std::string> keys,
                 std::vector<std::string> args, PipelinedConnection::Callback done) {
    std::string sha = Known(script);
    if (sha.empty()) {
      std::string load;
      AppendCommand(load, std::array<std::string_view, 3>{"SCRIPT", "LOAD", script.source});
      node.CallAsync(std::move(load), 1,
                     [this, &node, &script, keys = std::move(keys), args = std::move(args),
                      done = std::move(done)](Result<RedisReply> loaded) mutable {
                       if (!loaded) return done(std::move(loaded));
                       Remember(script, loaded->str);
                       EvalAsync(node, script, std::move(keys), std::move(args), std::move(done));
                     });
      return;
    }
    std::string evalsha = EvalCommand("EVALSHA", sha, keys, args);
    node.CallAsync(std::move(evalsha), 1,
                   [&node, &script, keys = std::move(keys), args = std::move(args),
                    done = std::move(done)](Result<RedisReply> reply) mutable {
                     if (!reply && reply.error().message.starts_with("NOSCRIPT")) {
                       node.CallAsync(EvalCommand("EVAL", script.source, keys, args), 1,
                                      std::move(done));
                       return;
                     }
                     done(std::move(reply));
                   });
  }

 private:
  void Remember(const LuaScript& script, const std::string& sha) {
    std::lock_guard<std::mutex> lock(mu_);
    sha_[&script] = sha;
  }

  std::string Known(const LuaScript& script) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sha_.find(&script);
    return it == sha_.end() ? std::string() : it->second;
  }

  Result<std::string> Load(RedisNode& node, const LuaScript& script) {
    const std::array<std::string_view, 3> load = {"SCRIPT", "LOAD", script.source};
    auto reply = node.Command(load);
    if (!reply) return std::unexpected(reply.error());
    std::lock_guard<std::mutex> lock(mu_);
    sha_[&script] = reply->str;
    return reply->str;
  }

  std::mutex mu_;
  std::unordered_map<const LuaScript*, std::string> sha_;
};

class StandaloneTransport final : public RedisTransport {
 public:
  StandaloneTransport(const RedisEndpoint& endpoint, int connections,
                      const BreakerSettings& breaker)
      : node_(endpoint, connections, breaker) {}

  Result<RedisReply> Eval(const LuaScript& script, std::span<const std::string> keys,
                          std::span<const std::string> args) override {
    return scripts_.Eval(node_, script, keys, args, /*asking=*/false);
  }
  void EvalAsync(const LuaScript& script, std::vector<std::string> keys,
                 std::vector<std::string> args, PipelinedConnection::Callback done) override {
    scripts_.EvalAsync(node_, script, std::move(keys), std::move(args), std::move(done));
  }
  bool Refuses(std::string_view) override { return node_.Refuses(); }
  Result<RedisReply> Command(std::string_view, std::span<const std::string_view> args) override {
    return node_.Command(args);
  }
  TransportStats Stats() const override {
    TransportStats s;
    node_.AddStats(s);
    return s;
  }

 private:
  RedisNode node_;
  ScriptRunner scripts_;
};

class ClusterTransport final : public RedisTransport {
 public:
  static constexpr int kMaxAttempts = 6;
  static constexpr auto kRefreshEvery = std::chrono::milliseconds(100);

  ClusterTransport(std::vector<RedisEndpoint> seeds, int connections, BreakerSettings breaker)
      : seeds_(std::move(seeds)), connections_(connections), breaker_(breaker) {
    slots_.fill(nullptr);
  }

  Result<RedisReply> Eval(const LuaScript& script, std::span<const std::string> keys,
                          std::span<const std::string> args) override {
    return Route(keys.empty() ? std::string_view() : std::string_view(keys[0]),
                 [&](RedisNode& node, bool asking) {
                   return scripts_.Eval(node, script, keys, args, asking);
                 });
  }

  // An unknown slot owner is not refused: the call will read the map first.
  bool Refuses(std::string_view key) override {
    const RedisNode* node = NodeForSlot(RedisHashSlot(key));
    return node != nullptr && node->Refuses();
  }

  Result<RedisReply> Command(std::string_view key,
                             std::span<const std::string_view> args) override {
    return Route(key, [&](RedisNode& node, bool asking) {
      std::string resp;
      if (asking) AppendCommand(resp, std::array<std::string_view, 1>{"ASKING"});
      AppendCommand(resp, args);
      return node.Call(std::move(resp), asking ? 2 : 1);
    });
  }

  TransportStats Stats() const override {
    TransportStats s;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      for (const auto& [name, node] : nodes_) node->AddStats(s);
    }
    s.redirects = redirects_.load(std::memory_order_relaxed);
    s.retries = retries_.load(std::memory_order_relaxed);
    s.map_refreshes = refreshes_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  template <typename Send>
  Result<RedisReply> Route(std::string_view key, Send&& send) {
    const int slot = RedisHashSlot(key);
    RedisNode* node = NodeForSlot(slot);
    if (node == nullptr) {
      Refresh(/*force=*/true);
      node = NodeForSlot(slot);
      if (node == nullptr) {
        return MakeError(std::string(kConnectionErrorPrefix) +
                         "redis cluster: no reachable node knows the slot map");
      }
    }
    bool asking = false;
    Result<RedisReply> reply = MakeError("");
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      reply = send(*node, asking);
      asking = false;
      if (reply) return reply;
      const std::string& message = reply.error().message;
      std::string address;
      if (ParseRedirect(message, "MOVED ", address)) {
        redirects_.fetch_add(1, std::memory_order_relaxed);
        RedisNode* to = NodeAt(address);
        if (to == nullptr) return reply;
        SetSlot(slot, to);
        Refresh(/*force=*/false);  // a MOVED usually means more than one slot changed hands
        node = to;
      } else if (ParseRedirect(message, "ASK ", address)) {
        redirects_.fetch_add(1, std::memory_order_relaxed);
        node = NodeAt(address);
        if (node == nullptr) return reply;
        asking = true;
      } else if (message.starts_with("TRYAGAIN") || message.starts_with("CLUSTERDOWN")) {
        retries_.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::milliseconds(2 << attempt));  // 2..64 ms
        if (message.starts_with("CLUSTERDOWN")) Refresh(/*force=*/false);
        node = NodeForSlot(slot) != nullptr ? NodeForSlot(slot) : node;
      } else if (IsConnectionError(reply.error())) {
        // The master may be gone; once its replica is promoted the map says so.
        Refresh(/*force=*/false);
        RedisNode* now_serving = NodeForSlot(slot);
        if (now_serving == nullptr || now_serving == node) return reply;  // no other route yet
        retries_.fetch_add(1, std::memory_order_relaxed);
        node = now_serving;
      } else {
        return reply;  // a script or command error: not the cluster's business
      }
    }
    return reply;
  }

  RedisNode* NodeForSlot(int slot) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    RedisNode* node = slots_[static_cast<size_t>(slot)];
    return node;
  }

  void SetSlot(int slot, RedisNode* node) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    slots_[static_cast<size_t>(slot)] = node;
  }

  // The node for "host:port", made on first sight. Nodes are never dropped (a cluster has few),
  // so the pointers in slots_ stay valid.
  RedisNode* NodeAt(std::string_view address) {
    const std::string name(address);
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      if (auto it = nodes_.find(name); it != nodes_.end()) return it->second.get();
    }
    RedisEndpoint endpoint = seeds_.front();
    if (!SplitAddress(address, endpoint.host, endpoint.port)) return nullptr;
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto& node = nodes_[name];
    if (node == nullptr) node = std::make_unique<RedisNode>(endpoint, connections_, breaker_);
    return node.get();
  }

  // Re-reads the slot map from the first node that answers: known nodes, then the seeds. At
  // most once per kRefreshEvery unless forced, and by one thread at a time.
  void Refresh(bool force) {
    std::unique_lock<std::mutex> refreshing(refresh_mu_, std::try_to_lock);
    if (!refreshing.owns_lock()) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_refresh_ < kRefreshEvery) return;
    last_refresh_ = now;
    refreshes_.fetch_add(1, std::memory_order_relaxed);
    std::vector<std::string> candidates;
    {
      std::shared_lock<std::shared_mutex> lock(mu_);
      for (const auto& [name, node] : nodes_) candidates.push_back(name);
    }
    for (const RedisEndpoint& seed : seeds_) candidates.push_back(seed.Name());
    const std::array<std::string_view, 2> cmd = {"CLUSTER", "SLOTS"};
    for (const std::string& name : candidates) {
      RedisNode* node = NodeAt(name);
      if (node == nullptr) continue;
      auto reply = node->Command(cmd);
      if (!reply || reply->type != RedisReply::Type::kArray) continue;
      if (Apply(*reply, node->endpoint().host)) return;
    }
  }

  // CLUSTER SLOTS: [[first, last, [host, port, id, ...], replicas...], ...].
  bool Apply(const RedisReply& map, const std::string& asked_host) {
    std::array<RedisNode*, kSlots> slots{};
    slots.fill(nullptr);
    bool any = false;
    for (const RedisReply& range : map.elements) {
      if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
      const int64_t first = range.elements[0].integer;
      const int64_t last = range.elements[1].integer;
      const RedisReply& master = range.elements[2];
      // An empty host means "the host you asked".
      std::string host = master.elements[0].str.empty() ? asked_host : master.elements[0].str;
      RedisNode* node = NodeAt(host + ":" + std::to_string(master.elements[1].integer));
      if (node == nullptr || first < 0 || last >= kSlots || first > last) continue;
      for (int64_t s = first; s <= last; ++s) slots[static_cast<size_t>(s)] = node;
      any = true;
    }
    if (!any) return false;
    std::unique_lock<std::shared_mutex> lock(mu_);
    slots_ = slots;
    return true;
  }

  const std::vector<RedisEndpoint> seeds_;
  const int connections_;
  const BreakerSettings breaker_;
  ScriptRunner scripts_;

  mutable std::shared_mutex mu_;
  std::array<RedisNode*, kSlots> slots_;                               // guarded by mu_
  std::unordered_map<std::string, std::unique_ptr<RedisNode>> nodes_;  // guarded by mu_

  std::mutex refresh_mu_;
  std::chrono::steady_clock::time_point last_refresh_{};  // guarded by refresh_mu_

  std::atomic<uint64_t> redirects_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> refreshes_{0};
};

}  // namespace

std::unique_ptr<RedisTransport> MakeStandaloneTransport(const RedisEndpoint& endpoint,
                                                        int connections, BreakerSettings breaker) {
  return std::make_unique<StandaloneTransport>(endpoint, connections, breaker);
}

std::unique_ptr<RedisTransport> MakeClusterTransport(std::vector<RedisEndpoint> seeds,
                                                     int connections, BreakerSettings breaker) {
  return std::make_unique<ClusterTransport>(std::move(seeds), connections, breaker);
}

}  // namespace sluice::internal
