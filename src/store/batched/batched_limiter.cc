// The batched limiters (batched_limiter.h): per key a view -- the shared state as of the last
// sync, read back from the inner store's answer (view_seed.h), plus this node's hits since --
// decided with the pure algorithm, and the hits not yet sent.
#include "store/batched/batched_limiter.h"

#include <array>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/arith.h"
#include "store/batched/batched_store_impl.h"
#include "store/batched/view_seed.h"

namespace sluice::internal {

BatchedLimiter::BatchedLimiter(std::shared_ptr<BatchedStoreImpl> store,
                               std::shared_ptr<Limiter> inner, std::shared_ptr<ViewTable> table)
    : ForwardingLimiter(store.get(), std::move(inner)),
      store_(std::move(store)),
      table_(std::move(table)) {}

// The table's unsent hits are sent without waiting for the answer: a limiter may go on any
// thread, a Redis connection's included, which must not wait for itself.
BatchedLimiter::~BatchedLimiter() { store_->Retire(table_); }

StoreStats BatchedLimiter::Stats() const {
  StoreStats s = inner()->Stats();
  s.batched = true;
  s.keys += table_->views();
  s.batched_pending_hits = table_->pending_hits();
  s.batched_over_admitted_hits = table_->over_admitted();
  return s;
}

namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename Alg>
class Table final : public ViewTable, public std::enable_shared_from_this<Table<Alg>> {
 public:
  using State = typename Alg::State;

  Table(BatchedStoreImpl& store, std::shared_ptr<Limiter> inner, Alg alg, const LimitSpec& spec,
        Duration interval)
      : ViewTable(store, std::move(inner), interval), alg_(std::move(alg)), scale_(spec) {}

  // What is still pending is given back here first (as if it had never been taken); the rest
  // was sent already, and is given back in the inner store.
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    if (cost <= 0) return;
    int64_t rest = cost;
    {
      Shard& shard = ShardFor(key);
      std::lock_guard lock(shard.mu);
      auto it = shard.map.find(key);
      if (it != shard.map.end() && it->second.seeded) {
        View& v = it->second;
        alg_.Refund(v.state, at, now, cost);
        if (SameWindow(v, at)) {
          const int64_t taken = std::min(v.pending, cost);
          v.pending -= taken;
          v.admitted = std::max<int64_t>(0, v.admitted - taken);
          rest -= taken;
        }
      }
    }
    if (rest > 0) inner()->Refund(key, at, now, rest);
  }

  void Reset(std::string_view key) override {
    DropView(key);
    inner()->Reset(key);
  }

  void DropView(std::string_view key) override {
    Shard& shard = ShardFor(key);
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) {
      store().Release(EntryBytes(it->first));
      shard.map.erase(it);
    }
  }

  bool HasView(std::string_view key) const override {
    const Shard& shard = ShardFor(key);
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(key);
    return it != shard.map.end() && it->second.seeded;
  }

  // A request for `key` goes to the inner store: until its answer comes, local decisions count
  // its cost as taken (the inner store may take it at any moment), so that none spends the same
  // quota; a key without a view gets a placeholder that the first answer seeds. Unsent hits that
  // ride with it leave `pending` (no sync sends them meanwhile) but stay in the view's state.
  Tracked Track(std::string_view key, Timestamp now, int64_t cost, bool ride) override {
    if (cost < 0) return {};
    Shard& shard = ShardFor(key);
    std::lock_guard lock(shard.mu);
    if (shard.retired) return {};
    auto it = shard.map.find(key);
    if (it == shard.map.end()) {
      if (!store().Reserve(EntryBytes(key))) return {};  // no room: this key stays exact
      it = shard.map.emplace(std::string(key), View{}).first;
    }
    View& v = it->second;
    v.outstanding += cost;
    v.used = true;
    Tracked t{.tracked = true};
    // A cost beyond what a key can hold is refused whatever rides with it: none does.
    if (ride && v.seeded && v.pending > 0 && SameWindow(v, now) && cost <= 2 * alg_.capacity()) {
      t.riding = v.pending;
      t.riding_admitted = v.admitted;
      v.riding += v.pending;
      v.pending = v.admitted = 0;
    }
    return t;
  }

  // The answer to a tracked request. A placeholder is seeded from it; a seeded view takes the
  // cost if the inner store kept it. An answer computed before the one that seeded the view (or
  // before a sync's) is then counted twice: the strict side, until the next sync reads the
  // shared state back.
  void Observe(std::string_view key, Timestamp now, int64_t cost, bool charge,
               const Decision& answer, bool taken, const Tracked& tracked) override {
    Shard& shard = ShardFor(key);
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return;  // reset or dropped meanwhile, or the limiter has gone
    View& v = it->second;
    v.outstanding = std::max<int64_t>(0, v.outstanding - cost);
    if (tracked.riding > 0) {
      v.riding = std::max<int64_t>(0, v.riding - tracked.riding);
      // Not kept: unsent again, for the next sync (in the window they were counted in).
      if (!taken) {
        AddPending(v, now, tracked.riding - tracked.riding_admitted, /*admitted=*/false);
        AddPending(v, now, tracked.riding_admitted, /*admitted=*/true);
      }
    }
    const bool usable = !answer.degraded && answer.reason != DecisionReason::kInvalidRequest;
    if (v.seeded) {
      if (taken && cost > 0) alg_.Charge(v.state, now, cost);
      return;
    }
    if (!usable || (answer.allowed && !taken)) {
      // Nothing to read the shared state from (an admission given back says nothing about it).
      if (v.outstanding == 0 && v.pending == 0) {
        store().Release(EntryBytes(it->first));
        shard.map.erase(it);
      }
      return;
    }
    v.state = Read(answer, now, /*in_debt=*/!answer.allowed && (charge || cost == 0));
    v.seeded = true;
  }

  void Collect(Timestamp now, bool last, std::vector<FlushItem>& items,
               BatchedFlush& result) override {
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mu);
      if (shard.retired) continue;
      shard.retired = last;
      for (auto it = shard.map.begin(); it != shard.map.end();) {
        View& v = it->second;
        if (!v.seeded && !last) {  // a placeholder: its first answer is on the way
          ++it;
          continue;
        }
        if (!SameWindow(v, now)) v.pending = v.admitted = 0;  // a window that ended: moot
        // Not used for a whole interval: the next use asks the inner store. The last sync
        // sends the hits and drops every view.
        if (last || (!v.used && v.pending == 0)) {
          if (last && v.pending > 0) {
            items.push_back(FlushItem{this->shared_from_this(), it->first, v.pending, v.admitted});
            ++result.keys_sent;
          }
          store().Release(EntryBytes(it->first));
          it = shard.map.erase(it);
          ++result.views_dropped;
          continue;
        }
        items.push_back(FlushItem{this->shared_from_this(), it->first, v.pending, v.admitted});
        v.in_flight = v.pending;
        v.in_flight_admitted = v.admitted;
        v.pending = v.admitted = 0;
        v.used = false;
        ++result.keys_sent;
        ++it;
      }
    }
  }

  void Apply(const FlushItem& item, const Decision& answer, Timestamp at,
             BatchedFlush& result) override {
    Shard& shard = ShardFor(item.key);
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(item.key);  // none once the limiter has gone (its views with it)
    if (answer.degraded || answer.reason == DecisionReason::kInvalidRequest) {
      // Not the shared store's answer: nothing was taken there. The hits are kept (at most what
      // a key can hold) and sent with the next flush; the view goes on as it is.
      result.hits_kept += static_cast<uint64_t>(item.hits);
      if (it == shard.map.end()) return;
      View& v = it->second;
      v.pending = std::min(2 * alg_.capacity(), v.pending + v.in_flight);
      v.admitted = std::min(v.pending, v.admitted + v.in_flight_admitted);
      v.in_flight = v.in_flight_admitted = 0;
      v.used = true;
      return;
    }
    result.hits_sent += static_cast<uint64_t>(item.hits);
    if (it == shard.map.end()) return;  // reset meanwhile
    View& v = it->second;
    State state = Read(answer, at, /*in_debt=*/!answer.allowed);
    // The debt a charge made is the charge's (taken even beyond the limit): what is beyond the
    // limit besides was admitted without room.
    if (item.admitted > 0) {
      const int64_t charged = item.hits - item.admitted;
      CountOverAdmitted(std::min(item.admitted, std::max<int64_t>(0, Beyond(state, at) - charged)));
    }
    // The hits taken here since the send are not in the answer: they stay in the view. So do
    // those riding with a request meanwhile (counted twice if the answer came after it took them:
    // the strict side, until the next sync).
    if (v.pending > 0 && SameWindow(v, at)) alg_.Charge(state, at, v.pending);
    if (v.riding > 0) alg_.Charge(state, at, v.riding);
    v.state = state;
    v.in_flight = v.in_flight_admitted = 0;
  }

  uint64_t views() const override {
    uint64_t n = 0;
    for (const Shard& shard : shards_) {
      std::lock_guard lock(shard.mu);
      n += shard.map.size();
    }
    return n;
  }

  uint64_t pending_hits() const override {
    uint64_t n = 0;
    for (const Shard& shard : shards_) {
      std::lock_guard lock(shard.mu);
      for (const auto& [key, v] : shard.map)
        n += static_cast<uint64_t>(v.pending + v.in_flight + v.riding);
    }
    return n;
  }

 private:
  struct View {
    State state{};
    int64_t pending = 0;    // hits taken here and not yet sent (at most 2 x capacity)
    int64_t admitted = 0;   // of them, admissions (the rest: charges)
    int64_t window = 0;     // fixed window: the window `pending` was counted in
    int64_t in_flight = 0;  // sent by the flush under way
    int64_t in_flight_admitted = 0;
    int64_t outstanding = 0;  // cost of requests sent to the inner store, not yet answered
    int64_t riding = 0;       // unsent hits sent with such requests (still in `state`)
    bool seeded = false;      // read back from an answer (before: a placeholder)
    bool used = false;        // decided on since the last flush
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, View, StringHash, std::equal_to<>> map;
    bool retired = false;  // the limiter has gone: no view is made any more
  };
  static constexpr size_t kShards = 16;

  Shard& ShardFor(std::string_view key) { return shards_[StringHash{}(key) % kShards]; }
  const Shard& ShardFor(std::string_view key) const { return shards_[StringHash{}(key) % kShards]; }

  // A view's accounted size: the map's node (key string, view, next pointer, cached hash), a
  // bucket pointer, and the key's own allocation when it is longer than the inline buffer.
  static size_t EntryBytes(std::string_view key) {
    constexpr size_t kNode = sizeof(std::pair<const std::string, View>) + 2 * sizeof(void*);
    constexpr size_t kInline = 15;  // libstdc++'s short-string buffer
    return kNode + sizeof(void*) + (key.size() > kInline ? key.size() + 1 : 0);
  }

  static constexpr bool kWindowed = std::is_same_v<Alg, FixedWindow>;

  // Hits counted in a fixed window that has ended decide nothing any more, here or there.
  bool SameWindow(const View& v, Timestamp t) const {
    if constexpr (kWindowed) {
      return v.pending == 0 || v.window == FloorDiv(ToNanos(t), scale_.period_ns);
    } else {
      return true;
    }
  }

  State Read(const Decision& answer, Timestamp at, bool in_debt) const {
    if constexpr (kWindowed) {
      return ViewSeed<Alg>::Read(scale_, answer, at, in_debt);
    } else {
      return ViewSeed<Alg>::Read(scale_, answer, at);
    }
  }

  int64_t Beyond(const State& state, Timestamp at) const {
    if constexpr (kWindowed) {
      return 0;  // the answer does not say by how much a window is beyond its limit
    } else if constexpr (std::is_same_v<Alg, Gcra>) {
      return ViewSeed<Alg>::Beyond(scale_, state, at);
    } else {
      return ViewSeed<Alg>::Beyond(scale_, state);
    }
  }

  void AddPending(View& v, Timestamp now, int64_t hits, bool admitted) {
    if (hits <= 0) return;
    if constexpr (kWindowed) {
      const int64_t w = FloorDiv(ToNanos(now), scale_.period_ns);
      if (w != v.window) {
        if (w < v.window) return;  // the clock stepped back: counted in the later window
        v.pending = v.admitted = 0;
        v.window = w;
      }
    }
    const int64_t most = 2 * alg_.capacity();  // what a key can hold: more would be dropped there
    const int64_t added = std::min(hits, most - v.pending);
    if (added <= 0) return;
    v.pending += added;
    if (admitted) v.admitted += added;
  }

  Decision Take(std::string_view key, Timestamp now, int64_t cost, bool charge) override {
    if (cost >= 0) {
      Shard& shard = ShardFor(key);
      std::lock_guard lock(shard.mu);
      auto it = shard.map.find(key);
      if (it != shard.map.end() && it->second.seeded) {
        store().CountLocal(1);
        return TakeLocal(it->second, now, cost, charge);
      }
    }
    // No view: no unsent hits to send with it.
    const Tracked tracked = Track(key, now, cost, /*ride=*/false);
    const Decision d = charge ? inner()->Charge(key, now, cost) : inner()->Decide(key, now, cost);
    store().CountForwarded(1);
    if (tracked.tracked) Observe(key, now, cost, charge, d, Taken(d, charge), tracked);
    return d;
  }

  void TakeAsync(std::string_view key, Timestamp now, int64_t cost, bool charge,
                 Limiter::DecisionCallback done) override {
    if (cost >= 0) {
      Decision d;
      bool local = false;
      {
        Shard& shard = ShardFor(key);
        std::lock_guard lock(shard.mu);
        auto it = shard.map.find(key);
        if (it != shard.map.end() && it->second.seeded) {
          d = TakeLocal(it->second, now, cost, charge);
          local = true;
        }
      }
      if (local) {
        store().CountLocal(1);
        done(d);
        return;
      }
    }
    const Tracked tracked = Track(key, now, cost, /*ride=*/false);
    auto answered = [self = this->shared_from_this(), owned = std::string(key), now, cost, charge,
                     tracked, done = std::move(done)](const Decision& answer) {
      self->store().CountForwarded(1);
      if (tracked.tracked) {
        self->Observe(owned, now, cost, charge, answer, Taken(answer, charge), tracked);
      }
      done(answer);
    };
    if (charge) {
      inner()->ChargeAsync(key, now, cost, std::move(answered));
    } else {
      inner()->DecideAsync(key, now, cost, std::move(answered));
    }
  }

  // As much less remains; and a refusal, whose durations are of the shared state as it is (an
  // admission given back reports them as taken, the hits with the cost), takes as much longer
  // for a bucket to be full again (a window's reset is its end either way).
  void Unride(Decision& d, int64_t riding) const override {
    if (d.degraded || d.reason == DecisionReason::kInvalidRequest) return;
    d.remaining = std::max<int64_t>(0, d.remaining - riding);
    if constexpr (!kWindowed) {
      if (d.allowed) return;
      // riding <= 2 x capacity, and capacity x d fits the algorithms' scaled state.
      d.reset_after += Duration(CeilDiv(riding * scale_.d, scale_.n));
    }
  }

  // Whether the inner store kept the cost of a single request it answered.
  static bool Taken(const Decision& d, bool charge) {
    if (d.degraded || d.reason == DecisionReason::kInvalidRequest) return false;
    return charge || d.allowed;
  }

  // The shard's lock held.
  Decision TakeLocal(View& v, Timestamp now, int64_t cost, bool charge) {
    v.used = true;
    if (v.outstanding > 0) return TakeBehindOutstanding(v, now, cost, charge);
    if (charge) {
      const Decision d = alg_.Charge(v.state, now, cost);
      AddPending(v, now, cost, /*admitted=*/false);
      return d;
    }
    const Decision d = alg_.Decide(v.state, now, cost);
    if (d.allowed) AddPending(v, now, cost, /*admitted=*/true);
    return d;
  }

  // Requests are on their way to the inner store: decided against a copy of the view with
  // their cost taken, and only what is decided here is applied to the view itself.
  Decision TakeBehindOutstanding(View& v, Timestamp now, int64_t cost, bool charge) {
    State with = v.state;
    alg_.Charge(with, now, v.outstanding);
    const Decision d = charge ? alg_.Charge(with, now, cost) : alg_.Decide(with, now, cost);
    if (charge || d.allowed) {
      alg_.Charge(v.state, now, cost);
      AddPending(v, now, cost, /*admitted=*/!charge);
    }
    return d;
  }

  const Alg alg_;
  const ViewScale scale_;
  std::array<Shard, kShards> shards_;
};

template <typename Alg>
std::shared_ptr<ViewTable> Make(BatchedStoreImpl& store, std::shared_ptr<Limiter> inner,
                                const LimitSpec& spec, Duration interval) {
  auto alg = Alg::Create(spec);
  if (!alg) return nullptr;  // the inner store accepted the spec: cannot happen
  return std::make_shared<Table<Alg>>(store, std::move(inner), std::move(*alg), spec, interval);
}

}  // namespace

std::shared_ptr<ViewTable> MakeViewTable(BatchedStoreImpl& store, std::shared_ptr<Limiter> inner,
                                         const LimitSpec& spec, Duration interval) {
  // A wide spec's buckets keep 128-bit local views, as the memory store keeps its counters.
  const bool wide = NeedsWideArithmetic(spec);
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      if (wide) return Make<WideTokenBucket>(store, std::move(inner), spec, interval);
      return Make<TokenBucket>(store, std::move(inner), spec, interval);
    case Algorithm::kGcra:
      return Make<Gcra>(store, std::move(inner), spec, interval);
    case Algorithm::kLeakyBucket:
      if (wide) return Make<WideLeakyBucket>(store, std::move(inner), spec, interval);
      return Make<LeakyBucket>(store, std::move(inner), spec, interval);
    case Algorithm::kFixedWindow:
      return Make<FixedWindow>(store, std::move(inner), spec, interval);
    default:
      return nullptr;  // CheckBatchable refused it
  }
}

}  // namespace sluice::internal
