#include "store/memory/override_table.h"

#include <bit>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "store/memory/reserving_limiter.h"
#include "store/memory/state_codec.h"

namespace sluice::internal {
namespace {

void AppendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// The rate's part of a table key: every field of the spec, each self-delimiting, so two specs
// that differ in anything never share a counter, and (prefix, key) pairs never collide.
std::string RatePrefix(const LimitSpec& spec) {
  std::string p;
  p += static_cast<char>(spec.algorithm);
  AppendVarint(p, static_cast<uint64_t>(spec.limit));
  AppendVarint(p, static_cast<uint64_t>(spec.period.count()));
  AppendVarint(p, static_cast<uint64_t>(spec.burst));
  p += static_cast<char>(spec.shaper ? 1 : 0);
  // Only a shaper's max_delay means anything (ValidateLimitSpec); the flag above delimits it.
  if (spec.shaper) AppendVarint(p, static_cast<uint64_t>(spec.max_delay.count()));
  return p;
}

bool GetVarint(std::string_view key, size_t& pos, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && pos < key.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(key[pos++]);
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The spec RatePrefix wrote at the start of a table key, and where the caller's key begins.
bool ParseRatePrefix(std::string_view key, LimitSpec& spec, size_t& end) {
  size_t pos = 0;
  uint64_t limit = 0, period = 0, burst = 0, max_delay = 0;
  if (key.empty()) return false;
  spec.algorithm = static_cast<Algorithm>(static_cast<uint8_t>(key[pos++]));
  if (!GetVarint(key, pos, limit) || !GetVarint(key, pos, period) || !GetVarint(key, pos, burst) ||
      pos >= key.size()) {
    return false;
  }
  spec.shaper = key[pos++] != 0;
  if (spec.shaper && !GetVarint(key, pos, max_delay)) return false;
  spec.limit = static_cast<int64_t>(limit);
  spec.period = Duration(static_cast<int64_t>(period));
  spec.burst = static_cast<int64_t>(burst);
  spec.max_delay = spec.shaper ? Duration(static_cast<int64_t>(max_delay)) : Duration::max();
  end = pos;
  return ValidateLimitSpec(spec).has_value();
}

template <typename Alg>
class OverrideLimiter final : public ReservingLimiter, private OverrideRate {
 public:
  OverrideLimiter(Alg alg, const LimitSpec& spec, std::shared_ptr<OverrideTable> table,
                  size_t max_key_bytes, const Store* owner, std::function<void()> on_destroy)
      : ReservingLimiter(owner),
        alg_(std::move(alg)),
        spec_(spec),
        prefix_(RatePrefix(spec)),
        max_key_bytes_(max_key_bytes),
        table_(std::move(table)),
        on_destroy_(std::move(on_destroy)) {}
  ~OverrideLimiter() override {
    if (on_destroy_) on_destroy_();
  }
  OverrideLimiter(const OverrideLimiter&) = delete;
  OverrideLimiter& operator=(const OverrideLimiter&) = delete;

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    return DecideReserving(key, now, cost, 0, nullptr);
  }
  // An override is never a calendar limit (Envoy's units): it has no zone to decide in.
  Decision DecideReserving(std::string_view key, Timestamp now, int64_t cost, int64_t reserve,
                           const CalendarZone* /*zone*/) override {
    if (cost < 0 || key.size() > max_key_bytes_) return Invalid();
    return WithTableKey(
        key, [&](std::string_view k) { return table_->Decide(*this, k, now, cost, reserve); });
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    if (cost < 0 || key.size() > max_key_bytes_) return Invalid();
    return WithTableKey(key, [&](std::string_view k) {
      return table_->Decide</*kCharge=*/true>(*this, k, now, cost);
    });
  }
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    if (cost <= 0 || key.size() > max_key_bytes_) return;  // nothing that was admitted
    WithTableKey(key, [&](std::string_view k) { table_->Refund(*this, k, at, now, cost); });
  }
  void Reset(std::string_view key) override {
    if (key.size() > max_key_bytes_) return;
    WithTableKey(key, [&](std::string_view k) { table_->Reset(k); });
  }
  size_t Sweep(Timestamp now) override { return table_->Sweep(now); }
  StoreStats Stats() const override {
    StoreStats s;
    table_->AddStats(s);
    return s;
  }
  const LimitSpec& spec() const override { return spec_; }

 private:
  // OverrideRate: the algorithm on the table's state, keeping its replenishment time current.
  OverrideState Initial(Timestamp now) const override {
    typename Alg::State s = alg_.Initial(now);
    const Timestamp replenished = alg_.ReplenishedAt(s);
    return OverrideState{std::move(s), replenished};
  }
  Decision Decide(OverrideState& state, Timestamp now, int64_t cost,
                  int64_t reserve) const override {
    auto& s = std::get<typename Alg::State>(state.inner);  // the prefix names the algorithm
    const Decision d = alg_.Decide(s, now, cost, reserve);
    state.replenished_at = alg_.ReplenishedAt(s);
    return d;
  }
  Decision Charge(OverrideState& state, Timestamp now, int64_t cost) const override {
    auto& s = std::get<typename Alg::State>(state.inner);
    const Decision d = alg_.Charge(s, now, cost);
    state.replenished_at = alg_.ReplenishedAt(s);
    return d;
  }
  void Refund(OverrideState& state, Timestamp at, Timestamp now, int64_t cost) const override {
    auto& s = std::get<typename Alg::State>(state.inner);
    alg_.Refund(s, at, now, cost);
    state.replenished_at = alg_.ReplenishedAt(s);
  }

  Decision Invalid() const { return InvalidRequest(alg_.capacity()); }

  // Calls f with the table's key (prefix, then key): on the stack when it is short, as the
  // override keys of the service are.
  template <typename F>
  auto WithTableKey(std::string_view key, F&& f) const {
    constexpr size_t kOnStack = 256;
    const size_t n = prefix_.size() + key.size();
    if (n <= kOnStack) {
      char buf[kOnStack];
      std::memcpy(buf, prefix_.data(), prefix_.size());
      std::memcpy(buf + prefix_.size(), key.data(), key.size());
      return f(std::string_view(buf, n));
    }
    std::string joined = prefix_;
    joined += key;
    return f(std::string_view(joined));
  }

  const Alg alg_;
  const LimitSpec spec_;
  const std::string prefix_;
  const size_t max_key_bytes_;
  const std::shared_ptr<OverrideTable> table_;
  const std::function<void()> on_destroy_;
};

template <typename Alg>
Result<std::unique_ptr<MemoryLimiter>> Make(const LimitSpec& spec,
                                            std::shared_ptr<OverrideTable> table,
                                            size_t max_key_bytes, const Store* owner,
                                            std::function<void()> on_destroy) {
  static_assert(sizeof(OverrideLimiter<Alg>) + 64 <= kOverrideLimiterBytes);
  auto alg = Alg::Create(spec);
  if (!alg) return std::unexpected(alg.error());
  if constexpr (requires { alg->MaxHeapBytes(); }) {
    // A log at its longest must fit a shard a few times over, as for a configured limit.
    if (4 * (alg->MaxHeapBytes() + 64) > table->shard_budget()) {
      return MakeError("the memory store's part for limit overrides has " +
                       std::to_string(table->shard_budget()) + " bytes a shard, too few for " +
                       DescribeLimitSpec(spec) + " (raise the memory bound)");
    }
  }
  return std::unique_ptr<MemoryLimiter>(std::make_unique<OverrideLimiter<Alg>>(
      std::move(*alg), spec, std::move(table), max_key_bytes, owner, std::move(on_destroy)));
}

}  // namespace

OverrideTable::OverrideTable(size_t shards, size_t shard_budget, size_t fixed_bytes, uint64_t seed)
    : seed_(seed),
      shard_mask_(shards - 1),
      shard_budget_(shard_budget),
      fixed_bytes_(fixed_bytes),
      shards_(std::make_unique<std::unique_ptr<Shard>[]>(shards)) {
  for (size_t i = 0; i < shards; ++i) shards_[i] = std::make_unique<Shard>(shard_budget);
}

Result<std::shared_ptr<OverrideTable>> OverrideTable::Make(size_t max_bytes, size_t shards,
                                                           uint64_t seed) {
  constexpr size_t kAllocHeader = 16;
  const auto fixed = [](size_t n) {
    return sizeof(OverrideTable) + kAllocHeader +
           n * (sizeof(void*) + sizeof(Shard) + kAllocHeader);
  };
  // Every shard at least a small table and a few counters, as a configured limit's shards.
  const size_t need = Shard::MinBudget(OverrideAlg(nullptr));
  const auto fits = [&](size_t n) {
    return max_bytes > fixed(n) && (max_bytes - fixed(n)) / n >= need;
  };
  shards = std::bit_ceil(std::max<size_t>(shards, 1));
  while (shards > 1 && !fits(shards)) shards /= 2;
  if (!fits(shards)) {
    return MakeError("the memory store's part for limit overrides, " + std::to_string(max_bytes) +
                     " bytes, is too small for their table (raise the memory bound)");
  }
  const size_t per_shard = (max_bytes - fixed(shards)) / shards;
  return std::make_shared<OverrideTable>(shards, per_shard, fixed(shards), seed);
}

size_t OverrideTable::Sweep(Timestamp now) {
  size_t dropped = 0;
  for (size_t i = 0; i <= shard_mask_; ++i) dropped += shards_[i]->Sweep(OverrideAlg(nullptr), now);
  return dropped;
}

uint64_t OverrideTable::SaveSection(Timestamp now, int64_t to_wall_ns, SnapshotWriter& out) const {
  ByteWriter& w = out.writer();
  out.BeginSection(SectionKind::kOverrides);
  const size_t count_at = w.size();
  w.Put<uint64_t>(0);
  uint64_t count = 0;
  std::string chunk;  // one shard's counters, copied under its lock (limiter_snapshot.h)
  for (size_t i = 0; i <= shard_mask_; ++i) {
    chunk.clear();
    ByteWriter cw(chunk);
    shards_[i]->ForEachLive(
        OverrideAlg(nullptr), now, [&](std::string_view key, const OverrideState& state) {
          LimitSpec spec;
          size_t end = 0;
          if (!ParseRatePrefix(key, spec, end)) return;  // every key has one: RatePrefix
          std::visit(
              [&](const auto& inner) {
                const uint8_t tag = StateTagFor(spec);
                WithAlgOfTag(tag, SnapshotAlgs{}, [&](auto alg) {
                  using Alg = typename decltype(alg)::type;
                  using S = std::decay_t<decltype(inner)>;
                  if constexpr (std::is_same_v<typename Alg::State, S>) {
                    cw.PutBytes(key);
                    cw.Put<uint8_t>(tag);
                    EncodeState<Alg>(inner, TimeFrame{spec.period.count(), to_wall_ns}, cw);
                    ++count;
                  }
                });
              },
              state.inner);
        });
    w.PutRaw(chunk);
  }
  w.PatchAt<uint64_t>(count_at, count);
  out.EndSection();
  return count;
}

void OverrideTable::RestoreSection(uint64_t count, std::string_view counters, Timestamp now,
                                   int64_t to_wall_ns, SnapshotRestored& counts) {
  ByteReader r(counters);
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view key;
    uint8_t tag = 0;
    LimitSpec spec;
    size_t end = 0;
    if (!r.GetBytes(key) || !r.Get(tag)) return;
    // A key's prefix is its whole spec, so its counter can never meet another rate's; only a
    // tag this build would not keep for it (another build's state) is refused.
    if (!ParseRatePrefix(key, spec, end) || tag != StateTagFor(spec)) return;
    const TimeFrame frame{spec.period.count(), to_wall_ns};
    bool sound = false;
    WithAlgOfTag(tag, SnapshotAlgs{}, [&](auto id) {
      using Alg = typename decltype(id)::type;
      // No override is a calendar window (its tag never matches a rate's): none is kept here.
      if constexpr (!std::is_same_v<Alg, CalendarWindow>) {
        typename Alg::State state{};
        auto alg = Alg::Create(spec);
        if (!alg || !DecodeState<Alg>(r, frame, spec, state)) return;
        sound = true;
        const Timestamp replenished = alg->ReplenishedAt(state);
        if (replenished <= now) {
          ++counts.expired;
          return;
        }
        const uint64_t h = HashKey(key, seed_);
        ShardFor(h).Restore(OverrideAlg(nullptr), key, static_cast<uint32_t>(h),
                            OverrideState{std::move(state), replenished}, now);
        ++counts.restored;
      }
    });
    if (!sound) return;
  }
}

void OverrideTable::AddStats(StoreStats& s) const {
  for (size_t i = 0; i <= shard_mask_; ++i) shards_[i]->AddStats(s);
  s.bytes += fixed_bytes_;
  s.max_bytes += fixed_bytes_;
}

Result<std::unique_ptr<MemoryLimiter>> MakeOverrideLimiter(const LimitSpec& spec,
                                                           std::shared_ptr<OverrideTable> table,
                                                           size_t max_key_bytes, const Store* owner,
                                                           std::function<void()> on_destroy) {
  // Rates past 64-bit arithmetic get the 128-bit buckets, as in the store's own limiters.
  const bool wide = NeedsWideArithmetic(spec);
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      if (wide) {
        return Make<WideTokenBucket>(spec, std::move(table), max_key_bytes, owner,
                                     std::move(on_destroy));
      }
      return Make<TokenBucket>(spec, std::move(table), max_key_bytes, owner, std::move(on_destroy));
    case Algorithm::kLeakyBucket:
      if (wide) {
        return Make<WideLeakyBucket>(spec, std::move(table), max_key_bytes, owner,
                                     std::move(on_destroy));
      }
      return Make<LeakyBucket>(spec, std::move(table), max_key_bytes, owner, std::move(on_destroy));
    case Algorithm::kFixedWindow:
      // Per-request overrides are fixed-length windows (the HTTP and gRPC codecs refuse a
      // calendar); a table slot keeps FixedWindow's state.
      if (spec.IsCalendar()) return MakeError("a per-request override cannot be a calendar window");
      return Make<FixedWindow>(spec, std::move(table), max_key_bytes, owner, std::move(on_destroy));
    case Algorithm::kSlidingWindowLog:
      return Make<SlidingWindowLog>(spec, std::move(table), max_key_bytes, owner,
                                    std::move(on_destroy));
    case Algorithm::kSlidingWindowCounter:
      return Make<SlidingWindowCounter>(spec, std::move(table), max_key_bytes, owner,
                                        std::move(on_destroy));
    case Algorithm::kGcra:
      return Make<Gcra>(spec, std::move(table), max_key_bytes, owner, std::move(on_destroy));
  }
  return MakeError("unknown algorithm");
}

}  // namespace sluice::internal
