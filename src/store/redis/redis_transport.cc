#include "store/redis/redis_transport.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
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

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// A few pipelined connections to one server, used round robin, behind the server's breaker.
// It tells state changes (connected, lost, restored; breaker opened, closed; AUTH refused) to
// the event sink, and runs the monitor's checks for its server.
class RedisNode {
 public:
  RedisNode(const RedisEndpoint& endpoint, int connections, const NodeSettings& settings)
      : endpoint_(endpoint),
        clock_(*settings.clock),
        breaker_(settings.breaker),
        breaker_options_(settings.breaker),
        events_(settings.events) {
    const size_t n = static_cast<size_t>(std::max(1, connections));
    seen_.assign(n, 0);
    probing_ = std::make_unique<std::atomic<bool>[]>(n);
    for (size_t i = 0; i < n; ++i) {
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
    Observe(reply, /*background=*/false);
    return reply;
  }

  // A Redis error reply is an answer: the server is alive. Only I/O errors and timeouts count,
  // and only a request's count towards the breaker (the monitor's calls may close it, never
  // open it: a quiet outage must not leave it open when Redis is back).
  void Observe(const Result<RedisReply>& reply, bool background) {
    if (!reply && IsConnectionError(reply.error())) {
      if (reply.error().message.ends_with(kShuttingDown)) return;
      connection_errors_.fetch_add(1, std::memory_order_relaxed);
      if (!background && !IsRefusedAtOnce(reply.error()) && breaker_.OnFailure(clock_.Now())) {
        Tell(RedisEventKind::kBreakerOpened,
             "circuit breaker open after " + std::to_string(breaker_options_.failure_threshold) +
                 " consecutive failures: calls are refused at once, one probe after " +
                 std::to_string(ToMillis(breaker_options_.open_for)) + " ms");
      }
      LinkDown(reply.error());
      return;
    }
    if (breaker_.OnSuccess()) Tell(RedisEventKind::kBreakerClosed, "circuit breaker closed");
    if (link_.load(std::memory_order_relaxed) != kUp) LinkUp();
    if (!reply && IsAuthFailure(reply.error())) {
      Tell(RedisEventKind::kAuthFailed, "authentication failed: " + reply.error().message);
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
                                 Observe(reply, /*background=*/false);
                                 done(std::move(reply));
                               });
  }

  Result<RedisReply> Command(std::span<const std::string_view> args) {
    std::string resp;
    AppendCommand(resp, args);
    return Call(std::move(resp));
  }

  bool Refuses() const { return breaker_.Refuses(clock_.Now()); }

  bool OnIoThread() const {
    return std::any_of(connections_.begin(), connections_.end(),
                       [](const auto& c) { return c->OnItsThread(); });
  }

  const RedisEndpoint& endpoint() const { return endpoint_; }

  void AddStats(TransportStats& s) const {
    for (const auto& c : connections_) {
      s.requests += c->requests_sent();
      s.batches += c->batches_sent();
    }
    s.short_circuited += short_circuited_.load(std::memory_order_relaxed);
    s.connection_errors += connection_errors_.load(std::memory_order_relaxed);
  }

  // The monitor's PINGs: to each connection Redis has not answered since the last round, one
  // at a time, past the breaker (they are its probes) and the reconnect backoff. A connection
  // Redis closed is re-made by the PING, before a request needs it.
  void Probe() {
    static const std::string kPing = [] {
      std::string resp;
      AppendCommand(resp, std::array<std::string_view, 1>{"PING"});
      return resp;
    }();
    for (size_t i = 0; i < connections_.size(); ++i) {
      const uint64_t answers = connections_[i]->answers();
      if (answers != seen_[i]) {
        seen_[i] = answers;
        continue;
      }
      if (probing_[i].exchange(true)) continue;
      connections_[i]->CallAsync(
          kPing, 1,
          [this, i](Result<RedisReply> reply) {
            Observe(reply, /*background=*/true);
            probing_[i].store(false);
          },
          /*background=*/true);
    }
  }

  // Reads the eviction policy (CONFIG GET, or INFO memory where CONFIG is not allowed),
  // maxmemory and evicted_keys, and tells what changed.
  void WatchEviction() {
    if (Refuses()) return;  // down: nothing to read
    auto memory = Background({"INFO", "memory"});
    auto stats = Background({"INFO", "stats"});
    if (!memory || !stats) return;
    std::string policy;
    if (auto config = Background({"CONFIG", "GET", "maxmemory-policy"});
        config && config->elements.size() == 2) {
      policy = config->elements[1].str;
    } else {
      policy = InfoField(memory->str, "maxmemory_policy");
    }
    const std::string maxmemory = InfoField(memory->str, "maxmemory");
    const uint64_t evicted = InfoNumber(stats->str, "evicted_keys");
    const bool unsafe = maxmemory != "0" && !maxmemory.empty() && policy != "noeviction";

    std::lock_guard<std::mutex> lock(eviction_mu_);
    if (!eviction_.watched || policy != policy_ || unsafe != eviction_.unsafe) {
      RedisEvent e{RedisEventKind::kEvictionPolicy, endpoint_.Name(), "", unsafe, 0};
      e.message = Prefix() + "maxmemory-policy " + policy + " with maxmemory " + maxmemory +
                  (unsafe ? " bytes can evict sluice's counters: a limit whose counter is evicted "
                            "starts over and admits more than it allows; set maxmemory-policy "
                            "noeviction (docs/redis.md)"
                          : ": sluice's counters are not evicted");
      if (events_ != nullptr) (*events_)(std::move(e));
    } else {
      // evicted_keys starts again from 0 when Redis restarts.
      const uint64_t grown = evicted >= last_evicted_ ? evicted - last_evicted_ : evicted;
      if (grown > 0) {
        eviction_.evicted += grown;
        Tell(RedisEventKind::kKeysEvicted,
             "evicted " + std::to_string(grown) + " keys (" + std::to_string(eviction_.evicted) +
                 " since sluice started watching) under maxmemory-policy " + policy +
                 ": limits whose counters were evicted started over and over-admitted");
      }
    }
    eviction_.watched = true;
    eviction_.unsafe = unsafe;
    policy_ = policy;
    last_evicted_ = evicted;
  }

  EvictionState Eviction() const {
    std::lock_guard<std::mutex> lock(eviction_mu_);
    return eviction_;
  }

 private:
  enum Link : int { kUnknown, kUp, kDown };
  static constexpr std::string_view kShuttingDown = "shutting down";

  static int64_t ToMillis(Duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  }

  std::string Prefix() const { return "redis " + endpoint_.Name() + ": "; }

  void Tell(RedisEventKind kind, const std::string& what) {
    if (events_ != nullptr)
      (*events_)(RedisEvent{kind, endpoint_.Name(), Prefix() + what, false, 0});
  }

  // The error without "redis connection: host:port: ".
  std::string Why(const Error& e) const {
    std::string_view m = e.message;
    if (m.starts_with(kConnectionErrorPrefix)) m.remove_prefix(kConnectionErrorPrefix.size());
    if (const std::string name = endpoint_.Name() + ": "; m.starts_with(name)) {
      m.remove_prefix(name.size());
    }
    return std::string(m);
  }

  void LinkDown(const Error& e) {
    const bool auth = IsAuthFailure(e);
    if (auth) Tell(RedisEventKind::kAuthFailed, Why(e));
    const int was = link_.exchange(kDown, std::memory_order_acq_rel);
    if (was == kDown || auth) return;  // an AUTH refusal was just told
    Tell(RedisEventKind::kConnectionLost,
         std::string(was == kUp ? "connection lost" : "unreachable") + ": " + Why(e));
  }

  void LinkUp() {
    const int was = link_.exchange(kUp, std::memory_order_acq_rel);
    if (was == kUnknown) Tell(RedisEventKind::kConnected, "connected");
    if (was == kDown) Tell(RedisEventKind::kConnectionRestored, "connection restored");
  }

  // A monitor's command: past the breaker, not counted as a request.
  Result<RedisReply> Background(std::initializer_list<std::string_view> args) {
    std::string resp;
    AppendCommand(resp, std::span<const std::string_view>(args.begin(), args.size()));
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % connections_.size();
    auto reply = connections_[i]->Call(std::move(resp), 1, /*background=*/true);
    Observe(reply, /*background=*/true);
    return reply;
  }

  // "name:value\r\n" in an INFO reply.
  static std::string InfoField(std::string_view info, std::string_view name) {
    const std::string key = std::string(name) + ":";
    for (size_t at = info.find(key); at != std::string_view::npos; at = info.find(key, at + 1)) {
      if (at != 0 && info[at - 1] != '\n') continue;
      const size_t from = at + key.size();
      const size_t end = info.find_first_of("\r\n", from);
      return std::string(info.substr(from, end == std::string_view::npos ? end : end - from));
    }
    return {};
  }
  static uint64_t InfoNumber(std::string_view info, std::string_view name) {
    const std::string v = InfoField(info, name);
    uint64_t n = 0;
    std::from_chars(v.data(), v.data() + v.size(), n);
    return n;
  }

  const RedisEndpoint endpoint_;
  const Clock& clock_;
  CircuitBreaker breaker_;
  const CircuitBreaker::Options breaker_options_;
  std::function<void(RedisEvent)>* const events_;
  std::atomic<int> link_{kUnknown};
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> short_circuited_{0};
  std::atomic<uint64_t> connection_errors_{0};
  std::vector<uint64_t> seen_;                    // the monitor's: answers at its last round
  std::unique_ptr<std::atomic<bool>[]> probing_;  // a monitor PING is outstanding
  mutable std::mutex eviction_mu_;
  EvictionState eviction_;     // guarded by eviction_mu_
  std::string policy_;         // guarded by eviction_mu_
  uint64_t last_evicted_ = 0;  // guarded by eviction_mu_
  // Last: their I/O threads stop, answering what is queued, while the rest is still alive.
  std::vector<std::unique_ptr<PipelinedConnection>> connections_;
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
  StandaloneTransport(const RedisEndpoint& endpoint, int connections, const NodeSettings& settings)
      : node_(endpoint, connections, settings) {}

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
  void Monitor() override {
    node_.Probe();
    node_.WatchEviction();
  }
  EvictionState Eviction() const override { return node_.Eviction(); }
  bool OnIoThread() const override { return node_.OnIoThread(); }

 private:
  ScriptRunner scripts_;
  // After the scripts: its connections' threads stop, answering what is queued (callbacks that
  // use the scripts), while the scripts are still alive.
  RedisNode node_;
};

class ClusterTransport final : public RedisTransport {
 public:
  static constexpr int kMaxAttempts = 6;
  static constexpr auto kRefreshEvery = std::chrono::milliseconds(100);

  ClusterTransport(std::vector<RedisEndpoint> seeds, int connections, const NodeSettings& settings)
      : seeds_(std::move(seeds)), connections_(connections), settings_(settings) {
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

  void Monitor() override {
    for (RedisNode* node : Nodes()) {
      node->Probe();
      node->WatchEviction();
    }
  }

  EvictionState Eviction() const override {
    EvictionState sum;
    for (RedisNode* node : Nodes()) {
      const EvictionState e = node->Eviction();
      sum.watched = sum.watched || e.watched;
      sum.unsafe = sum.unsafe || e.unsafe;
      sum.evicted += e.evicted;
    }
    return sum;
  }

  bool OnIoThread() const override {
    const std::vector<RedisNode*> nodes = Nodes();
    return std::any_of(nodes.begin(), nodes.end(),
                       [](const RedisNode* node) { return node->OnIoThread(); });
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

  // Nodes are never dropped: the pointers stay valid.
  std::vector<RedisNode*> Nodes() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<RedisNode*> nodes;
    for (const auto& [name, node] : nodes_) nodes.push_back(node.get());
    return nodes;
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
    // Over TLS, a node the cluster names by IP is verified against the configured server name,
    // or else the first seed's host name (a certificate seldom lists every node's IP).
    if (endpoint.tls != nullptr && endpoint.tls_name.empty() && IsIpLiteral(endpoint.host)) {
      endpoint.tls_name = seeds_.front().host;
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto& node = nodes_[name];
    if (node == nullptr) node = std::make_unique<RedisNode>(endpoint, connections_, settings_);
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
  const NodeSettings settings_;
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
                                                        int connections, NodeSettings settings) {
  return std::make_unique<StandaloneTransport>(endpoint, connections, settings);
}

std::unique_ptr<RedisTransport> MakeClusterTransport(std::vector<RedisEndpoint> seeds,
                                                     int connections, NodeSettings settings) {
  return std::make_unique<ClusterTransport>(std::move(seeds), connections, settings);
}

}  // namespace sluice::internal
